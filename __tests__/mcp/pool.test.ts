import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, type HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { stdioFixture } from "../fixtures/stdio";

let http: HttpFixture;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["echo", "slow"] });
  const dir = await makeTempDir("mcp-pool-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      remote: { type: "http", url: http.url, user_auth: { header: "X-User-Token", users: { alice: "a-1", bob: "b-1" } } },
      local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), httpSessionIdleSeconds: 0.2 });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

const deleted = (sessionId: string | undefined) => (r: { method: string; sessionId?: string }) =>
  r.method === "DELETE" && r.sessionId === sessionId;

describe("HTTP sessions per header set close when idle", () => {
  test("an unused session is terminated; the next call opens a new one; stdio sessions stay", async () => {
    const pid = (await callThroughGraph(graph, "local_pid", {})).content;
    await callThroughGraph(graph, "remote_echo", { text: "idle-1" }, { context: { user_id: "alice" } });
    const first = findToolCall(http.requests, "idle-1")!.sessionId;
    await http.waitForRequest(deleted(first));
    expect(http.activeSessionIds()).not.toContain(first);

    await callThroughGraph(graph, "remote_echo", { text: "idle-2" }, { context: { user_id: "alice" } });
    const second = findToolCall(http.requests, "idle-2")!.sessionId;
    expect(second).toBeDefined();
    expect(second).not.toBe(first);
    expect((await callThroughGraph(graph, "local_pid", {})).content).toBe(pid);
  });

  test("a session is not closed while a call is running on it", async () => {
    const message = await callThroughGraph(graph, "remote_slow", { ms: 600 }, { context: { user_id: "bob" } });
    expect(message.content).toBe("slept 600");
    const call = http.requests.find((r) => r.rpcMethods?.includes("tools/call") && (r.body as { params: { name: string } }).params.name === "slow")!;
    expect(http.requests.some(deleted(call.sessionId))).toBe(false);
    await http.waitForRequest(deleted(call.sessionId));
  });
});
