/**
 * The stdio workspace walks around a call are under the call's `tool_call_timeout`: a walk that does not finish (a
 * hung file system) costs the change listing, marked so, not the call. A large workspace is walked off the event
 * loop, through libuv's thread pool; here that pool is held busy by reads of FIFOs without a writer, so the walk
 * cannot go on until the test lets it: nothing depends on timing.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "@jest/globals";
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, runningCall, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";
import { BusyPool } from "../fixtures/busy-pool";

const CUT_NOTE = "workspace_changes not listed: the workspace walk did not finish within tool_call_timeout";
let toolkit: McpToolkit;
let graph: ToolNodeGraph;
let fifos: string[];
let workspace: string;
let busy: BusyPool | undefined;
const run = { context: { user_id: "u" }, configurable: { thread_id: "walk" } };

beforeAll(async () => {
  const dataDir = await makeTempDir("mcp-walk-deadline-data-");
  workspace = path.join(dataDir, "threads", "walk", "user-data", "workspace");
  // Over the in-place walk's budget: the walks go off the event loop.
  mkdirSync(path.join(workspace, "gate"), { recursive: true });
  for (let f = 0; f < 300; f += 1) writeFileSync(path.join(workspace, `f${f}`), "");
  fifos = await BusyPool.fifos("mcp-walk-deadline-fifos-");
  const configPath = await writeConfig(await makeTempDir("mcp-walk-deadline-"), {
    mcpServers: { ws: { type: "stdio", ...stdioFixture({ name: "ws", toolNames: ["echo", "await_file"] }), tool_call_timeout: 1 } },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  graph = toolNodeGraph(await toolkit.getTools());
  // The child is started and the workspace known to be large before the pool is held.
  expect((await callThroughGraph(graph, "ws_echo", { text: "warm" }, run)).content).toBe("warm");
});
afterEach(async () => {
  await busy?.release();
  busy = undefined;
});
afterAll(async () => {
  await toolkit?.close();
});

test("a walk before the call that does not finish: the call is sent and answers, its changes not listed and marked so", async () => {
  busy = BusyPool.hold(fifos);
  const message = await callThroughGraph(graph, "ws_echo", { text: "answered" }, run);
  expect({ status: message.status, content: message.content }).toEqual({ status: "success", content: "answered" });
  expect(message.artifact).toEqual({ note: CUT_NOTE });
}, 20_000);

test("a walk after the answer that does not finish: the answer is the call's result, its changes not listed and marked so", async () => {
  // The call runs in the child until the test creates the gate file: the pool is held while it runs.
  const { done } = await runningCall(graph, "ws_await_file", { path: "gate/open" }, run);
  busy = BusyPool.hold(fifos);
  writeFileSync(path.join(workspace, "gate", "open"), "");
  const message = await done;
  expect({ status: message.status, content: message.content }).toEqual({ status: "success", content: "open" });
  expect(message.artifact).toEqual({ note: CUT_NOTE });
}, 20_000);
