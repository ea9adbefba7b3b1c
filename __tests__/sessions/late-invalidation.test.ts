/**
 * SPEC §5.1: a call that fails with a closed connection evicts its stdio session only if the pool entry is still that
 * session. The race, built deterministically through a real graph: a call holds the scope's child while it walks the
 * thread's large workspace (off the event loop, held by a busy libuv pool), the child dies, the scope's next call
 * already has a new session starting, and only then does the first call find its connection closed. Its late error
 * must not evict the new session: the call after that runs on the same new child.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import type { ToolMessage } from "@langchain/core/messages";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";
import { BusyPool } from "../fixtures/busy-pool";
import { alive, waitUntil } from "../fixtures/processes";
import { attemptWatch } from "../fixtures/attempts";

let toolkit: McpToolkit;
let graph: ToolNodeGraph;
let fifos: string[];
const { interceptor: entered, nextAttempt } = attemptWatch();
const run = { context: { user_id: "u" }, configurable: { thread_id: "late-invalidation" } };

beforeAll(async () => {
  const dataDir = await makeTempDir("mcp-late-invalidation-data-");
  // Over the in-place walk's budget: each call's snapshot goes through libuv's thread pool.
  const workspace = path.join(dataDir, "threads", "late-invalidation", "user-data", "workspace");
  mkdirSync(workspace, { recursive: true });
  for (let f = 0; f < 300; f += 1) writeFileSync(path.join(workspace, `f${f}`), "");
  fifos = await BusyPool.fifos("mcp-late-invalidation-fifos-");
  const configPath = await writeConfig(await makeTempDir("mcp-late-invalidation-"), {
    mcpServers: { ws: { type: "stdio", ...stdioFixture({ name: "ws", toolNames: ["pid"] }), tool_call_timeout: 600 } },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, interceptors: [entered] });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit?.close();
});

async function pidOf(message: ToolMessage): Promise<number> {
  expect(message.status).toBe("success");
  return Number(message.content);
}

test("a closed-connection error that reaches the pool after the scope's new session was created does not evict it", async () => {
  const first = await pidOf(await callThroughGraph(graph, "ws_pid", {}, run));
  const busy = BusyPool.hold(fifos);
  let released = false;
  try {
    // The old call: it holds the first child's session and walks the workspace, which cannot go on.
    const oldEntered = nextAttempt();
    const oldCall = callThroughGraph(graph, "ws_pid", {}, run);
    await oldEntered;
    process.kill(first, "SIGKILL");
    // Reaped by this process: the pool sees the exit on the scope's next acquisition.
    expect(await waitUntil(() => !alive(first))).toBe(true);
    // The scope's next call: its new session is registered in the pool (its thread folders wait for the held pool).
    const newEntered = nextAttempt();
    const newCall = callThroughGraph(graph, "ws_pid", {}, run);
    await newEntered;
    // Only now does the old call's walk end and its request meet the closed connection.
    await busy.release();
    released = true;
    expect((await oldCall).content).toBe(
      "MCP tool 'pid' on server 'ws' failed: the connection to the server closed before it answered (its process ended or " +
        "closed its output). The call was not sent again; a new session serves the next call.",
    );
    const second = await pidOf(await newCall);
    expect(second).not.toBe(first);
    // The late error evicted nothing: the scope's new child serves the call after it.
    expect(await pidOf(await callThroughGraph(graph, "ws_pid", {}, run))).toBe(second);
    expect(alive(second)).toBe(true);
  } finally {
    if (!released) await busy.release();
  }
}, 60_000);
