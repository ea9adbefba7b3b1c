/**
 * A soak of what the library keeps per thread, user, secret, session and call: thousands of distinct (user, thread,
 * secret) runs through a real ToolNode graph, on a real stdio child pinned per (user, thread) under a small LRU bound
 * and a real streamable HTTP server whose header comes from each run's `context.secrets`. Half the runs are stateless
 * (a server user, no checkpointer: a temporary thread). What the process holds is counted where the code exposes it
 * (live children, the server's live sessions, the pool, the merged-header memo, the thread workspaces' secret records,
 * the thread folders on disk) at checkpoints along the way: it must stay under a bound that does not grow with the
 * number of distinct runs.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { randomUUID } from "node:crypto";
import { readdirSync } from "node:fs";
import * as path from "node:path";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { EMPTY_HEADERS, mergedHeaderSets } from "../../lib/shared/headers";
import { sessionScope } from "../../lib/sessions/scope";
import { threadPaths } from "../../lib/sessions/workspace";
import { sharesWorkspaceSecrets, workspaceSessionCount } from "../../lib/sessions/workspace-secrets";
import { threadFolderRemoval } from "../../lib/sessions/thread-folders";
import { SessionPool } from "../../lib/sessions/pool";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { toolCalls, toolMessagesOf, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startHttpFixture, type StreamableHttpFixture } from "../fixtures/http-server";
import { pidsWithMarker, waitUntil } from "../fixtures/processes";

const SH_SERVER = path.join(__dirname, "..", "fixtures", "sh-server.sh");
const RUNS = Number(process.env.SOAK_RUNS ?? 1200);
const CHECKPOINTS = 4;
/** Every how many runs one calls the stdio server too: each distinct thread spawns a child (about 0.2 s with eviction). */
const STDIO_EVERY = Number(process.env.SOAK_STDIO_EVERY ?? 50);
/** Runs in flight at once (a server's concurrent requests): the pool goes over its caps while all are busy, and back. */
const CONCURRENT = 10;
const MAX_STDIO = 4;
const MAX_HTTP = 4;
/** The process-wide merged-header memo's fixed bound (`MERGED_HEADERS_LIMIT`). */
const MERGED_HEADERS_LIMIT = 1024;

let http: StreamableHttpFixture;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;
let dataDir: string;
const marker = `soak-${randomUUID()}`;

beforeAll(async () => {
  http = await startHttpFixture({ name: "web", toolNames: ["echo"] });
  const dir = await makeTempDir("mcp-soak-");
  dataDir = await makeTempDir("mcp-soak-data-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      sh: { type: "stdio", command: "bash", args: [SH_SERVER, marker] },
      web: { type: "http", url: http.url, headers_from_context: { headers: { "X-Api-Key": "api_key" } } },
    },
  });
  toolkit = createMcpToolkit({
    configPath,
    env: {},
    logger: new RecordingLogger(),
    dataDir,
    maxStdioSessions: MAX_STDIO,
    maxHttpSessionsPerServer: MAX_HTTP,
  });
  graph = toolNodeGraph(await toolkit.getTools());
});

afterAll(async () => {
  await toolkit?.close();
  await http?.close();
});

function poolOf(kit: McpToolkit): SessionPool {
  return (kit as unknown as { current: { pool: SessionPool } }).current.pool;
}

/** Run `i`: its own user, thread and secret; odd runs are stateless (server user, no checkpointer). */
async function run(i: number): Promise<void> {
  const user = `user-${i}`;
  const thread = `thread-${i}`;
  const configurable: Record<string, unknown> = { thread_id: thread };
  if (i % 2 === 1) configurable.langgraph_auth_user = { identity: user, is_authenticated: true, permissions: [] };
  const result = await graph.invoke(
    {
      messages: [
        toolCalls([
          ...(STDIO_EVERY > 0 && i % STDIO_EVERY === 0 ? [{ name: "sh_pid", args: {} }] : []),
          { name: "web_echo", args: { text: `hello ${i}` } },
        ]),
      ],
    },
    { context: { user_id: user, secrets: { api_key: `secret-${i}-${randomUUID()}` } }, configurable },
  );
  const messages = toolMessagesOf(result.messages);
  expect(messages.map((m) => m.status)).toEqual(messages.map(() => "success"));
}

interface Held {
  children: number;
  serverSessions: number;
  pool: number;
  mergedHeaders: number;
  workspaceRecords: number;
  workspaceMembers: number;
  removals: number;
  threadFolders: number;
}

const BOUND: Held = {
  children: MAX_STDIO,
  serverSessions: MAX_HTTP,
  pool: MAX_STDIO + MAX_HTTP,
  mergedHeaders: MERGED_HEADERS_LIMIT,
  // One record per live stdio session's workspace (each thread here has one user).
  workspaceRecords: MAX_STDIO,
  workspaceMembers: MAX_STDIO,
  removals: 0,
  // The live sessions' folders; every other one was an empty skeleton, removed with its last session.
  threadFolders: MAX_STDIO,
};
const withinBound = (at: Held): boolean => (Object.keys(BOUND) as (keyof Held)[]).every((key) => at[key] <= BOUND[key]);

/** What the process holds now, counted over the first `upTo` runs' threads. */
function holding(upTo: number): Held {
  const pool = poolOf(toolkit);
  let workspaceRecords = 0;
  let workspaceMembers = 0;
  let removals = 0;
  for (let i = 0; i < upTo; i += 1) {
    const paths = threadPaths(dataDir, `thread-${i}`);
    if (sharesWorkspaceSecrets(paths.workspace)) workspaceRecords += 1;
    workspaceMembers += workspaceSessionCount(paths.workspace);
    if (threadFolderRemoval(paths) !== undefined) removals += 1;
  }
  let threadFolders = 0;
  try {
    threadFolders = readdirSync(path.join(dataDir, "threads")).length;
  } catch {
    // no thread folder yet
  }
  return {
    children: pidsWithMarker(marker).length,
    serverSessions: http.activeSessionIds().length,
    pool: pool.live,
    mergedHeaders: mergedHeaderSets(),
    workspaceRecords,
    workspaceMembers,
    removals,
    threadFolders,
  };
}

/**
 * What the process holds once the closes the runs started have settled: each count settles on its own (a child's
 * exit, then its folder's removal), so the counts are read again until all are within the bound or 10 s ran out.
 */
async function held(upTo: number): Promise<Held> {
  const pool = poolOf(toolkit);
  // The cheap counts first: the full reading walks every thread's folder.
  await waitUntil(() => pool.live <= MAX_STDIO + MAX_HTTP && pidsWithMarker(marker).length <= MAX_STDIO, 10_000);
  let at = holding(upTo);
  for (let i = 0; i < 100 && !withinBound(at); i += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    at = holding(upTo);
  }
  return at;
}

describe(`soak: ${RUNS} runs, each its own user, thread and secret`, () => {
  test("what the library holds stays under a bound independent of the number of distinct runs", async () => {
    const seen: Held[] = [];
    const step = RUNS / CHECKPOINTS;
    for (let i = 0; i < RUNS; i += CONCURRENT) {
      await Promise.all(Array.from({ length: Math.min(CONCURRENT, RUNS - i) }, (_, j) => run(i + j)));
      if ((i + CONCURRENT) % step === 0) seen.push(await held(i + CONCURRENT));
    }
    // Let the last folder removals settle before reading the disk a final time.
    await waitUntil(() => [...Array(RUNS).keys()].every((i) => threadFolderRemoval(threadPaths(dataDir, `thread-${i}`)) === undefined), 10_000);
    seen.push(await held(RUNS));
    for (const at of seen) {
      for (const key of Object.keys(BOUND) as (keyof Held)[]) {
        expect({ key, held: at[key], within: at[key] <= BOUND[key] }).toEqual({ key, held: at[key], within: true });
      }
    }
  }, 120_000);
});

describe("a thread workspace many users share (runs without a thread id all use 'default'), its calls overlapping", () => {
  test("what departed sessions were sent is kept only for the calls that ran while they left, not until the workspace is idle", async () => {
    const server = McpServerSchema.parse({ type: "stdio", command: "bash", args: [SH_SERVER, `${marker}-shared`] });
    const bound = 2;
    const pool = new SessionPool(new RecordingLogger(), { dataDir: await makeTempDir("mcp-soak-shared-"), maxStdioSessions: bound });
    try {
      const scoped = (user: string) => ({ headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope(user, "default") });
      // A relay: each user's call starts before the previous one ends, so some call of the workspace always runs, and
      // each new child evicts the least recently used one (idle) while calls run.
      let previous = await pool.acquire("local", server, scoped("user-0"));
      previous.session.rememberSecrets(["secret-0"]);
      const sizes: number[] = [];
      for (let i = 1; i < 30; i += 1) {
        const next = await pool.acquire("local", server, scoped(`user-${i}`));
        // The session the bound evicted has left the workspace (its child is gone).
        expect(await waitUntil(() => pool.live === bound, 30_000)).toBe(true);
        sizes.push(next.session.rememberSecrets([`secret-${i}`]).length);
        previous.release();
        previous = next;
      }
      previous.release();
      // The two live sessions' secrets, and those of the two that left while the previous call ran (it still runs):
      // a constant, where keeping them until no call runs at all would keep every user's.
      expect(sizes).toEqual(sizes.map((_, k) => Math.min(k + 2, bound + 2)));
    } finally {
      await pool.close();
    }
  }, 60_000);
});
