/**
 * SPEC §5 (issue 10): `session_init_timeout` bounds every initialization, a stdio session's as a whole: the thread's
 * folders it prepares before the spawn as well as the spawn and the MCP handshake. A hung file system (a stalled
 * network mount under the data dir) is built deterministically: libuv's thread pool is held busy by reads of FIFOs
 * without a writer (`BusyPool`), so every asynchronous file-system call waits until the test releases it. Each
 * assertion is on an outcome reached while the pool is still held, never on a time.
 *
 * The server is the bash fixture, wrapped so that every child it starts appends `<pid> <cwd>` to a log as it starts:
 * whether an abandoned start ever spawned a child is read there once the toolkit closed (which waits for the late
 * preparation and whatever follows it).
 */
import { afterEach, expect, test } from "@jest/globals";
import { existsSync, readFileSync, realpathSync } from "node:fs";
import * as path from "node:path";
import type { ToolMessage } from "@langchain/core/messages";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { McpServerSchema } from "../../lib/config/schema";
import { discoverAll } from "../../lib/mcp/discovery";
import { SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { StartStepTimeoutError } from "../../lib/sessions/start-failure";
import { threadPaths } from "../../lib/sessions/workspace";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, cleanErrorLine, toolCalls, toolMessagesOf, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { BusyPool } from "../fixtures/busy-pool";
import { alive } from "../fixtures/processes";
import { attemptWatch } from "../fixtures/attempts";

const SH_SERVER = path.join(__dirname, "..", "fixtures", "sh-server.sh");
const STALLED_LINE =
  "MCP tool 'pid' on server 'sh' was not called: its MCP session did not start within 3.0s (session_init_timeout): " +
  "its thread workspace was still being prepared (the file system did not answer)";

let fifos: string[];
const { interceptor: entered, nextAttempt } = attemptWatch();
let busy: BusyPool | undefined;
const toolkits: McpToolkit[] = [];

afterEach(async () => {
  await busy?.release();
  busy = undefined;
  await Promise.all(toolkits.splice(0).map((toolkit) => toolkit.close()));
});

interface Harness {
  toolkit: McpToolkit;
  graph: ToolNodeGraph;
  /** The pids of the children started so far in `thread`'s workspace, in order. */
  spawnedIn(thread: string): number[];
  /** Whether `thread`'s folder exists in the data dir. */
  hasFolder(thread: string): boolean;
}

async function harness(server: Record<string, unknown> = {}): Promise<Harness> {
  fifos ??= await BusyPool.fifos("mcp-start-deadline-fifos-");
  const dataDir = await makeTempDir("mcp-start-deadline-data-");
  const log = path.join(await makeTempDir("mcp-start-deadline-log-"), "spawned");
  // `$$$$`: the config reads `$$` as a literal `$`.
  const script = `printf '%s %s\\n' "$$$$" "$PWD" >> "$1"; exec bash "$0"`;
  const configPath = await writeConfig(await makeTempDir("mcp-start-deadline-"), {
    mcpServers: { sh: { type: "stdio", command: "bash", args: ["-c", script, SH_SERVER, log], session_init_timeout: 3, ...server } },
  });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, interceptors: [entered] });
  toolkits.push(toolkit);
  // Discovery starts the default thread's child (and the sweep of a killed host's processes) before the pool is held.
  let tools = await toolkit.getTools();
  // session_init_timeout (3 s: the calls that succeed after a stall must start within it on a loaded machine) also
  // bounds discovery's start: discovered again (a new pool) until it lists the tool.
  for (let attempt = 0; attempt < 20 && toolkit.discoveryFailures.has("sh"); attempt++) {
    await toolkit.reset();
    tools = await toolkit.getTools();
  }
  const graph = toolNodeGraph(tools);
  const spawnedIn = (thread: string): number[] => {
    // The pool works on the data dir's real path, the child's cwd with it.
    const workspace = threadPaths(realpathSync(dataDir), thread).workspace;
    const lines = readFileSync(log, "utf8").split("\n").filter((line) => line.endsWith(` ${workspace}`));
    return lines.map((line) => Number(line.split(" ")[0]));
  };
  const hasFolder = (thread: string): boolean => existsSync(path.dirname(threadPaths(dataDir, thread).userData));
  return { toolkit, graph, spawnedIn, hasFolder };
}

const runOf = (thread: string) => ({ context: { user_id: "u" }, configurable: { thread_id: thread } });

function pidOf(message: ToolMessage): number {
  expect({ status: message.status }).toEqual({ status: "success" });
  return Number(message.content);
}

test("a stalled thread-folder preparation: the call comes back at session_init_timeout with one clean line naming the step; the abandoned start leaves no child, and the scope's next call works once the file system answers", async () => {
  const { toolkit, graph, spawnedIn } = await harness();
  busy = BusyPool.hold(fifos);
  const message = await callThroughGraph(graph, "sh_pid", {}, runOf("stalled"));
  // Still held: the call did not wait for the file system.
  expect(cleanErrorLine(message)).toBe(STALLED_LINE);
  await busy.release();
  busy = undefined;
  const next = pidOf(await callThroughGraph(graph, "sh_pid", {}, runOf("stalled")));
  expect(pidOf(await callThroughGraph(graph, "sh_pid", {}, runOf("stalled")))).toBe(next);
  // close() waits for the late preparation of the abandoned start: had it gone on to spawn, its child would be logged.
  await toolkit.close();
  expect(spawnedIn("stalled")).toEqual([next]);
  expect(alive(next)).toBe(false);
}, 60_000);

test("the late preparation of a start that gave up leaves no folder behind: its removal waits for it", async () => {
  const { toolkit, graph, spawnedIn, hasFolder } = await harness();
  busy = BusyPool.hold(fifos);
  expect(cleanErrorLine(await callThroughGraph(graph, "sh_pid", {}, runOf("given-up")))).toBe(STALLED_LINE);
  await busy.release();
  busy = undefined;
  // close() waits for the late preparation and the removal of the empty folders it created.
  await toolkit.close();
  expect({ spawned: spawnedIn("given-up"), folder: hasFolder("given-up") }).toEqual({ spawned: [], folder: false });
}, 60_000);

test("discovery of a stdio server whose default thread's folders are stalled is skipped at session_init_timeout", async () => {
  await harness(); // the sweep of a killed host's processes (once per process) is over before the pool is held
  const dataDir = await makeTempDir("mcp-start-deadline-discovery-");
  const pool = new SessionPool(new RecordingLogger(), { dataDir });
  const server = McpServerSchema.parse({ type: "stdio", command: "bash", args: [SH_SERVER], session_init_timeout: 1 });
  busy = BusyPool.hold(fifos);
  try {
    const [discovery] = await discoverAll([{ serverName: "sh", server, headers: async () => EMPTY_HEADERS, secrets: [] }], pool, new RecordingLogger());
    expect({ failure: discovery.failure, tools: discovery.tools }).toEqual({
      failure: "Skipping MCP server 'sh' after tool discovery timed out (1.0s)",
      tools: [],
    });
  } finally {
    await busy.release();
    busy = undefined;
    await pool.close();
  }
}, 60_000);

test("concurrent first calls in one scope during the stall each come back with the same line, and no child is left of their start", async () => {
  const { toolkit, graph, spawnedIn } = await harness();
  busy = BusyPool.hold(fifos);
  const calls = [1, 2, 3].map((n) => ({ name: "sh_pid", args: {}, id: `parallel-${n}` }));
  const result = await graph.invoke({ messages: [toolCalls(calls)] }, runOf("parallel"));
  const lines = toolMessagesOf(result.messages).map((message) => cleanErrorLine(message));
  expect(lines).toEqual([STALLED_LINE, STALLED_LINE, STALLED_LINE]);
  await busy.release();
  busy = undefined;
  const next = pidOf(await callThroughGraph(graph, "sh_pid", {}, runOf("parallel")));
  await toolkit.close();
  expect(spawnedIn("parallel")).toEqual([next]);
}, 60_000);

test("first acquisitions of one scope during the stall share one start: all fail with its one error, naming the step", async () => {
  await harness(); // the sweep of a killed host's processes (once per process) is over before the pool is held
  const pool = new SessionPool(new RecordingLogger(), { dataDir: await makeTempDir("mcp-start-deadline-shared-") });
  const server = McpServerSchema.parse({ type: "stdio", command: "bash", args: [SH_SERVER] });
  const options = { headers: EMPTY_HEADERS, initTimeoutMs: 1000, scope: sessionScope("u", "shared") };
  busy = BusyPool.hold(fifos);
  try {
    const outcomes = await Promise.allSettled([1, 2, 3].map(() => pool.acquire("sh", server, options)));
    const reasons = outcomes.map((outcome) => (outcome.status === "rejected" ? outcome.reason : outcome.status));
    expect(reasons[0]).toBeInstanceOf(StartStepTimeoutError);
    expect({ step: (reasons[0] as StartStepTimeoutError).step, same: reasons.every((reason) => reason === reasons[0]) }).toEqual({
      step: "thread workspace",
      same: true,
    });
  } finally {
    await busy.release();
    busy = undefined;
    await pool.close();
  }
}, 60_000);

test("the run cancelled during the stalled preparation ends the call at once; the abandoned start leaves no child", async () => {
  // No session_init_timeout: only the cancellation can end the wait.
  const { toolkit, graph, spawnedIn } = await harness({ session_init_timeout: null });
  busy = BusyPool.hold(fifos);
  const controller = new AbortController();
  const attempt = nextAttempt();
  const cancelled = graph.invoke({ messages: [toolCalls([{ name: "sh_pid", args: {} }])] }, { ...runOf("cancelled"), signal: controller.signal });
  await attempt;
  const reason = new Error("run cancelled by the test");
  controller.abort(reason);
  await expect(cancelled).rejects.toThrow("run cancelled by the test");
  await busy.release();
  busy = undefined;
  const next = pidOf(await callThroughGraph(graph, "sh_pid", {}, runOf("cancelled")));
  await toolkit.close();
  expect(spawnedIn("cancelled")).toEqual([next]);
}, 60_000);

test("the toolkit closed during the stalled preparation: the call ends at once, and the late preparation starts no child", async () => {
  const { toolkit, graph, spawnedIn, hasFolder } = await harness({ session_init_timeout: null });
  busy = BusyPool.hold(fifos);
  const attempt = nextAttempt();
  const call = graph.invoke({ messages: [toolCalls([{ name: "sh_pid", args: {} }])] }, runOf("closed"));
  await attempt;
  const closing = toolkit.close();
  // The tool throws ToolkitClosedError; the ToolNode makes its own error message of it.
  const message = toolMessagesOf((await call).messages)[0];
  expect({ status: message.status, closed: String(message.content).includes("McpToolkit is closed") }).toEqual({ status: "error", closed: true });
  await busy.release();
  busy = undefined;
  await closing;
  expect({ spawned: spawnedIn("closed"), folder: hasFolder("closed") }).toEqual({ spawned: [], folder: false });
}, 60_000);

test("tool_call_timeout shorter than session_init_timeout does not end a start (session_init_timeout bounds it): the call gets the start's line", async () => {
  const { graph } = await harness({ tool_call_timeout: 0.25 });
  busy = BusyPool.hold(fifos);
  expect(cleanErrorLine(await callThroughGraph(graph, "sh_pid", {}, runOf("counted")))).toBe(STALLED_LINE);
}, 60_000);

test("max_total_timeout shorter than session_init_timeout ends a call whose start is stalled, with its own line", async () => {
  const { graph } = await harness({ session_init_timeout: 600, max_total_timeout: 0.5 });
  busy = BusyPool.hold(fifos);
  const message = await callThroughGraph(graph, "sh_pid", {}, runOf("capped"));
  expect(cleanErrorLine(message)).toBe(
    "MCP tool 'pid' on server 'sh' failed: timed out after 0.5s in total (max_total_timeout, which progress does not extend)",
  );
}, 60_000);
