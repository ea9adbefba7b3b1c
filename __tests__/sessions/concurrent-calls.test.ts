/**
 * Several calls at once in one stdio session (same user, same thread: one child, one thread workspace), through a
 * real ToolNode graph. Between a call's lease and its request (a workspace over the in-place walk's budget is walked
 * off the event loop first) the child may die; between its answer and its ToolMessage another call may be sent on it.
 */
import { afterEach, expect, test } from "@jest/globals";
import { mkdir, writeFile } from "node:fs/promises";
import * as path from "node:path";
import type { BaseMessage, ToolMessage } from "@langchain/core/messages";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolCalls, toolMessagesOf, toolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";
import { waitUntil } from "../fixtures/processes";

const toolkits: McpToolkit[] = [];
afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((t) => t.close()));
});

const closedText = (tool: string) =>
  `MCP tool '${tool}' on server 'ws' failed: the connection to the server closed before it answered (its process ended or ` +
  "closed its output). The call was not sent again; a new session serves the next call.";

test("the child dies while one call runs and another, holding the session, still walks a large workspace: both get the closed-connection error", async () => {
  const dataDir = await makeTempDir("mcp-concurrent-ws-data-");
  // Over the in-place walk's budget: each call's snapshot goes off the event loop, and takes a while.
  const workspace = path.join(dataDir, "threads", "big-ws", "user-data", "workspace");
  for (let d = 0; d < 30; d += 1) {
    await mkdir(path.join(workspace, `d${d}`), { recursive: true });
    await Promise.all(Array.from({ length: 300 }, (_, f) => writeFile(path.join(workspace, `d${d}`, `f${f}`), "")));
  }
  const launch = stdioFixture({ name: "ws", toolNames: ["pid", "ticker"] });
  const configPath = await writeConfig(await makeTempDir("mcp-concurrent-ws-"), { mcpServers: { ws: { type: "stdio", ...launch } } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  toolkits.push(toolkit);
  const graph = toolNodeGraph(await toolkit.getTools());
  const options = { context: { user_id: "u" }, configurable: { thread_id: "big-ws" } };
  const pid = Number((await callThroughGraph(graph, "ws_pid", {}, options)).content);
  // The scope's pool entry (test observation only).
  const pool = (toolkit as unknown as { current: { pool: { entries: Map<string, { key: string; inFlight: number }> } } }).current.pool;
  const inFlight = () => [...pool.entries.values()].find((e) => e.key.includes("big-ws"))?.inFlight;

  // A call sent and running on the child (its progress shows it).
  let progressed = false;
  const running = (async () => {
    const stream = await graph.stream(
      { messages: [toolCalls([{ name: "ws_ticker", args: { intervalMs: 50, durationMs: 30_000 }, id: "A" }])] },
      { ...options, streamMode: ["custom", "values"] },
    );
    let last: ToolMessage[] = [];
    for await (const [mode, chunk] of stream) {
      if (mode === "custom") progressed = true;
      else last = toolMessagesOf((chunk as { messages: BaseMessage[] }).messages);
    }
    return last;
  })();
  expect(await waitUntil(() => progressed)).toBe(true);
  expect(inFlight()).toBe(1);
  // A call holding the session, still walking the workspace before it is sent, when the child dies.
  const walking = callThroughGraph(graph, "ws_pid", {}, options);
  expect(await waitUntil(() => inFlight() === 2)).toBe(true);
  process.kill(pid, "SIGKILL");

  expect((await running)[0].content).toBe(closedText("ticker"));
  expect((await walking).content).toBe(closedText("pid"));
  expect(Number((await callThroughGraph(graph, "ws_pid", {}, options)).content)).not.toBe(pid);
});

test("names in workspace_changes are scrubbed of a secret the session was sent after the call's answer, before its ToolMessage was made", async () => {
  // The gap between a call's answer and its ToolMessage: here an outer interceptor holding the answer; in the wild also
  // the walk of a large workspace after the answer, off the event loop, while another run's call is sent on the child.
  const SECRET = "tok-late-5Tq9";
  let answered!: () => void;
  const gotAnswer = new Promise<void>((resolve) => (answered = resolve));
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const interceptor: McpToolInterceptor = async (request, next) => {
    // The other call carries the secret, as a header (sent to a stdio child in `_meta`).
    if (request.toolName === "pid") return next(request.override({ headers: { ...request.headers, "X-Token": SECRET } }));
    const outcome = await next(request);
    answered();
    await held;
    return outcome;
  };
  const launch = stdioFixture({ name: "ws", toolNames: ["pid", "fs_ops"] });
  const configPath = await writeConfig(await makeTempDir("mcp-concurrent-secret-"), { mcpServers: { ws: { type: "stdio", ...launch } } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-concurrent-secret-data-"), interceptors: [interceptor] });
  toolkits.push(toolkit);
  const graph = toolNodeGraph(await toolkit.getTools());
  const thread = { context: { user_id: "u" }, configurable: { thread_id: "sec-ws" } };

  // The file's name holds the secret before the session is sent it: only a scrub at the ToolMessage can catch it.
  const own = callThroughGraph(graph, "ws_fs_ops", { ops: [{ op: "write", path: `${SECRET}.txt`, content: "x" }] }, thread);
  await gotAnswer;
  expect((await callThroughGraph(graph, "ws_pid", {}, thread)).status).toBe("success");
  release();
  const message = await own;
  expect(message.status).toBe("success");
  // The call lists the file (so the check can fail), its name scrubbed.
  expect((message.artifact as { workspace_changes?: string[] }).workspace_changes).toEqual([expect.stringMatching(/^\/mnt\/user-data\/workspace\//)]);
  expect(JSON.stringify(message.artifact)).not.toContain(SECRET);
});
