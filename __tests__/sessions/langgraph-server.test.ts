/**
 * stdio sessions as users run them: the repository's `agent` graph (`graphs/agent.ts`, the demo model) served by a
 * real `langgraphjs dev` with an auth handler whose users own their threads, driven through the server's API.
 */
import { afterAll, beforeAll, describe, expect, jest, test } from "@jest/globals";
import { readFile, utimes } from "node:fs/promises";
import * as path from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { makeTempDir, stdioFixture, writeConfig } from "../fixtures";
import { startLangGraphDev, type LangGraphDevServer } from "../fixtures/langgraph-dev";

jest.setTimeout(180_000);

const ROOT = path.resolve(__dirname, "..", "..");
let dev: LangGraphDevServer;
let dataDir: string;
let stdinLog: string;
const clients: Record<string, Client> = {};

interface StateMessage {
  type: string;
  content: unknown;
  artifact?: unknown;
}

beforeAll(async () => {
  const dir = await makeTempDir("langgraph-server-sessions-");
  dataDir = path.join(dir, "data");
  stdinLog = path.join(dir, "stdin.log");
  const launch = stdioFixture({ name: "fx", toolNames: ["where", "pid", "slow", "write_file"] });
  // `tee` keeps every message the child is sent, so a test can see the cancellation reach it.
  const configPath = await writeConfig(dir, {
    mcpServers: {
      fx: {
        type: "stdio",
        command: "sh",
        args: ["-c", 'tee -a "$STDIN_LOG" | exec "$0" "$@"', launch.command, ...launch.args],
        env: { ...launch.env, STDIN_LOG: stdinLog },
      },
    },
  });
  dev = await startLangGraphDev(
    { agent: `${path.join(ROOT, "graphs", "agent.ts")}:graph` },
    {
      auth: `${path.join(ROOT, "__tests__", "fixtures", "server-auth.ts")}:auth`,
      env: { MCP_HARNESS_CONFIG: configPath, MCP_HARNESS_DATA_DIR: dataDir, MCP_HARNESS_MODEL: "" },
    },
  );
  for (const user of ["alice", "bob"]) clients[user] = new Client({ apiUrl: dev.url, apiKey: null, defaultHeaders: { authorization: `Bearer ${user}-token` } });
}, 180_000);

afterAll(async () => {
  await dev?.close();
});

/** One run of the agent on `thread` asking for `request`; the ToolMessage it produced, as checkpointed. */
async function ask(user: string, thread: string, request: string, context?: Record<string, unknown>): Promise<StateMessage> {
  const client = clients[user]!;
  const before = (await client.threads.getState<{ messages?: StateMessage[] }>(thread)).values.messages?.length ?? 0;
  await client.runs.wait(thread, "agent", { input: { messages: [{ role: "human", content: request }] }, ...(context ? { context } : {}) });
  const messages = (await client.threads.getState<{ messages: StateMessage[] }>(thread)).values.messages.slice(before);
  const tool = messages.find((m) => m.type === "tool");
  if (!tool) throw new Error(`no tool message in ${JSON.stringify(messages)}\n${dev.output()}`);
  return tool;
}

async function where(user: string, thread: string, context?: Record<string, unknown>): Promise<{ pid: number; cwd: string }> {
  return JSON.parse(String((await ask(user, thread, "fx_where {}", context)).content)) as { pid: number; cwd: string };
}

function workspaceOf(thread: string): string {
  return path.join(dataDir, "threads", thread, "user-data", "workspace");
}

/** Polls `condition`; gives up (throwing) after about two minutes, so a failed test leaves no loop running. */
async function until(condition: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 2400; i += 1) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("condition never held");
}

const logText = () => readFile(stdinLog, "utf8").catch(() => "");

describe("stdio sessions in the LangGraph server", () => {
  test("two threads the server created get a child each, in the folder named by the server's thread id; a thread's runs share one", async () => {
    const { thread_id: one } = await clients.alice!.threads.create();
    const { thread_id: two } = await clients.alice!.threads.create();
    const a = await where("alice", one);
    const b = await where("alice", two);
    expect(a.cwd).toBe(workspaceOf(one));
    expect(b.cwd).toBe(workspaceOf(two));
    expect(a.pid).not.toBe(b.pid);
    expect((await where("alice", one)).pid).toBe(a.pid);
  });

  test("the authenticated user is the session's user: context.user_id naming another user changes nothing", async () => {
    const { thread_id: thread } = await clients.alice!.threads.create();
    const first = await where("alice", thread);
    expect((await where("alice", thread, { user_id: "bob" })).pid).toBe(first.pid);
  });

  test("context.thread_id cannot put a run into another user's thread workspace", async () => {
    const { thread_id: bobs } = await clients.bob!.threads.create();
    await ask("bob", bobs, 'fx_write_file {"path":"plan.txt","content":"bob only"}');
    const { thread_id: alices } = await clients.alice!.threads.create();
    await expect(clients.alice!.threads.get(bobs)).rejects.toThrow();
    // Refused access to Bob's thread by the server, Alice names it in her run's context: her run stays in her thread.
    expect((await where("alice", alices, { thread_id: bobs })).cwd).toBe(workspaceOf(alices));
    // Nor through the run's config: the server stamps the run's own thread over the caller's configurable.thread_id.
    await clients.alice!.runs.wait(alices, "agent", { input: { messages: [{ role: "human", content: "fx_where {}" }] }, config: { configurable: { thread_id: bobs } } });
    const state = await clients.alice!.threads.getState<{ messages: StateMessage[] }>(alices);
    expect(JSON.parse(String(state.values.messages.filter((m) => m.type === "tool").at(-1)!.content))).toMatchObject({ cwd: workspaceOf(alices) });
  });

  test("a run cancelled through the API during a call: the child is told, the session is kept for the thread's next run", async () => {
    const { thread_id: thread } = await clients.alice!.threads.create();
    const { pid } = await where("alice", thread);
    const ms = 600_000 + (Date.now() % 1000);
    const run = await clients.alice!.runs.create(thread, "agent", { input: { messages: [{ role: "human", content: `fx_slow {"ms":${ms}}` }] } });
    await until(async () => (await logText()).includes(`"ms":${ms}`));
    await clients.alice!.runs.cancel(thread, run.run_id, true);
    await until(async () => (await logText()).includes("notifications/cancelled"));
    expect((await where("alice", thread)).pid).toBe(pid);
  });

  test("the checkpointed ToolMessage of a write shows /mnt/user-data paths only, no host path", async () => {
    const { thread_id: thread } = await clients.alice!.threads.create();
    const tool = await ask("alice", thread, 'fx_write_file {"path":"out/report.txt","content":"r"}');
    expect(tool.content).toBe("wrote /mnt/user-data/workspace/out/report.txt");
    expect(tool.artifact).toMatchObject({ workspace_changes: ["/mnt/user-data/workspace/out/report.txt"] });
    const state = JSON.stringify(await clients.alice!.threads.getState(thread));
    expect(state).not.toContain(dataDir);
  });
});

describe("after the dev server reloaded (a source file changed)", () => {
  test("a run on an existing thread gets a working session in the same workspace; the old child is gone", async () => {
    const { thread_id: thread } = await clients.alice!.threads.create();
    const before = await where("alice", thread);
    const now = new Date();
    await utimes(path.join(ROOT, "__tests__", "fixtures", "server-auth.ts"), now, now);
    // The old server's end closes its children; the new one answers once it listens (401: it asks for credentials).
    await until(async () => !isAlive(before.pid));
    await until(async () => (await fetch(`${dev.url}/ok`).then((r) => r.status, () => 0)) === 401);
    const after = await where("alice", thread);
    expect(after.cwd).toBe(before.cwd);
    expect(after.pid).not.toBe(before.pid);
  });
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
