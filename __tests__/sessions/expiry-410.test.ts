/**
 * A server that answers 410 Gone, not the MCP spec's 404, on the id of a session it expired: the session is treated
 * as one the server forgot. A call already sent gets a clear error and is not sent again, the next call starts a new
 * session; discovery re-initializes once; a 410 on the session's event stream drops it before any call meets it.
 */
import { describe, expect, test } from "@jest/globals";
import { createMcpToolkit, McpServerSchema, RecordingLogger } from "../../lib";
import { discoverServer } from "../../lib/mcp/discovery";
import { SessionPool } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { findToolCall, type RecordedRequest } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { startProxy } from "../fixtures/proxy";
import { startSseFixture } from "../fixtures/sse-server";
import { waitUntil } from "../fixtures/processes";

const calls = (requests: readonly RecordedRequest[], text: string) => requests.filter((r) => findToolCall([r], text) !== undefined);

describe("a session the server answers 410 Gone", () => {
  test("a call on it gets a clear error and is not sent again; the following calls work on one new session", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"], unknownSessionStatus: 410 });
    const configPath = await writeConfig(await makeTempDir("mcp-410-"), { mcpServers: { remote: { type: "http", url: fx.url } } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      expect((await callThroughGraph(graph, "remote_echo", { text: "before" })).content).toBe("before");
      await fx.forgetSessions({ streams: "kept" });
      const inits = fx.initializeCount();

      const failed = await callThroughGraph(graph, "remote_echo", { text: "gone" });
      expect([failed.status, failed.content]).toEqual([
        "error",
        "MCP tool 'echo' on server 'remote' failed: the server no longer knows this MCP session (HTTP 410: it expired or the " +
          "server restarted). The call was not sent again; a new session serves the next call.",
      ]);
      expect(calls(fx.requests, "gone")).toHaveLength(1);

      for (const text of ["after-1", "after-2"]) expect((await callThroughGraph(graph, "remote_echo", { text })).content).toBe(text);
      expect(fx.initializeCount()).toBe(inits + 1);
      expect(findToolCall(fx.requests, "after-1")!.sessionId).toBe(findToolCall(fx.requests, "after-2")!.sessionId);
      expect(findToolCall(fx.requests, "after-1")!.sessionId).not.toBe(findToolCall(fx.requests, "before")!.sessionId);
    } finally {
      await toolkit.close();
      await fx.close();
    }
  });

  test("discovery on it re-initializes once, transparently", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"], unknownSessionStatus: 410 });
    const server = McpServerSchema.parse({ type: "http", url: fx.url, session_init_timeout: 5 });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const target = { serverName: "remote", server, headers: async () => ({}), secrets: [] };
    try {
      expect((await discoverServer(target, pool)).map((t) => t.definition.name)).toEqual(["echo"]);
      await fx.forgetSessions({ streams: "kept" });
      const inits = fx.initializeCount();
      expect((await discoverServer(target, pool)).map((t) => t.definition.name)).toEqual(["echo"]);
      expect(fx.initializeCount()).toBe(inits + 1);
      expect(pool.size()).toBe(1);
    } finally {
      await pool.close();
      await fx.close();
    }
  });

  test("a 410 on its event stream drops it: the next call starts a new session and works", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"], unknownSessionStatus: 410 });
    const configPath = await writeConfig(await makeTempDir("mcp-410-stream-"), { mcpServers: { remote: { type: "http", url: fx.url } } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      expect((await callThroughGraph(graph, "remote_echo", { text: "before" })).content).toBe("before");
      const id = findToolCall(fx.requests, "before")!.sessionId!;
      expect(await waitUntil(() => fx.openStreams().some((r) => r.sessionId === id))).toBe(true);
      const since = fx.requests.length;
      await fx.forgetSessions();
      // The SDK reconnects the stream; the server answers 410 on its id, and the pool ends the session then.
      await fx.waitForRequest((r) => r.method === "GET" && r.sessionId === id && fx.requests.indexOf(r) >= since, 10_000);
      expect(await waitUntil(() => fx.requests.some((r) => r.method === "DELETE" && r.sessionId === id))).toBe(true);

      const next = await callThroughGraph(graph, "remote_echo", { text: "next" });
      expect([next.status, next.content]).toEqual(["success", "next"]);
      expect(calls(fx.requests, "next")).toHaveLength(1);
    } finally {
      await toolkit.close();
      await fx.close();
    }
  });
});

describe("an SSE server that answers a call 410 Gone on its session id", () => {
  test("a clear error, the call not sent again, the next call on a new session", async () => {
    const sse = await startSseFixture({ name: "remote", toolNames: ["echo"] });
    const proxy = await startProxy(sse.url);
    const configPath = await writeConfig(await makeTempDir("mcp-410-sse-"), { mcpServers: { remote: { type: "sse", url: proxy.url(new URL(sse.url).pathname) } } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      expect((await callThroughGraph(graph, "remote_echo", { text: "before" })).content).toBe("before");
      const inits = sse.initializeCount();
      const gone = JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null });
      let refused = false;
      proxy.rule = (r) => (r.rpcMethod === "tools/call" && !refused ? ((refused = true), { status: 410, body: gone }) : undefined);
      const failed = await callThroughGraph(graph, "remote_echo", { text: "gone" });
      expect([failed.status, failed.content]).toEqual([
        "error",
        "MCP tool 'echo' on server 'remote' failed: the server no longer knows this MCP session (HTTP 410: it expired or the " +
          "server restarted). The call was not sent again; a new session serves the next call.",
      ]);
      expect((await callThroughGraph(graph, "remote_echo", { text: "after" })).content).toBe("after");
      expect(sse.initializeCount()).toBe(inits + 1);
      expect(proxy.requests.filter((r) => r.rpcMethod === "tools/call" && (r.params?.arguments as { text?: string }).text === "gone")).toHaveLength(1);
    } finally {
      await toolkit.close();
      await proxy.close();
      await sse.close();
    }
  });
});

describe("a 410 that is not an expired session", () => {
  test("a stateless server's own 410 on a call is shown as it is, and nothing re-initializes", async () => {
    const fx = await startHttpFixture({ name: "plain", toolNames: ["echo"], stateless: true, notFoundTool: "echo", notFoundStatus: 410 });
    const configPath = await writeConfig(await makeTempDir("mcp-410-stateless-"), { mcpServers: { plain: { type: "http", url: fx.url } } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      const inits = fx.initializeCount();
      for (const text of ["one", "two"]) {
        const message = await callThroughGraph(graph, "plain_echo", { text });
        expect(message.status).toBe("error");
        expect(message.content).toContain("(HTTP 410)");
        expect(message.content).toContain("no such tenant");
        expect(message.content).not.toContain("no longer knows this MCP session");
      }
      expect(fx.initializeCount()).toBe(inits);
    } finally {
      await toolkit.close();
      await fx.close();
    }
  });
});
