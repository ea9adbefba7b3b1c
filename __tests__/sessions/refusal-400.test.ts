/**
 * A 400 that is not the "unknown session" answer stays the server's own answer, shown as it is; and the status added to
 * a bodiless refusal is not added to a body that merely ends in ':'.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startHttpFixture, type StreamableHttpFixture } from "../fixtures/http-server";
import { startProxy, type Proxy } from "../fixtures/proxy";

const PREFIX = "MCP tool 'echo' on server 'py' failed: Streamable HTTP error: Error POSTing to endpoint (HTTP 400)";

describe.each([false, true])("a 400 that is not the unknown-session answer (stateless: %s)", (stateless) => {
  let fixture: StreamableHttpFixture;
  let proxy: Proxy;
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;

  beforeAll(async () => {
    fixture = await startHttpFixture({ name: "py", toolNames: ["echo"], stateless });
    proxy = await startProxy(fixture.url);
    const configPath = await writeConfig(await makeTempDir("mcp-400-"), { mcpServers: { py: { type: "http", url: proxy.url("/mcp") } } });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    graph = toolNodeGraph(await toolkit.getTools());
    expect((await callThroughGraph(graph, "py_echo", { text: "before" })).content).toBe("before");
  });
  afterAll(async () => {
    await toolkit.close();
    await proxy.close();
    await fixture.close();
  });

  const refuse = (text: string, body: string, contentType = "text/plain; charset=utf-8") => {
    proxy.rule = (r) => (r.rpcMethod === "tools/call" && (r.params?.arguments as { text?: string }).text === text ? { status: 400, body, contentType } : undefined);
  };

  test.each([
    ["a body ending in ':'", "Missing field:", "Missing field:"],
    ["the phrase inside a longer plain text", "Bad Request: No valid session ID provided. Also: quota", "Bad Request: No valid session ID provided. Also: quota"],
    [
      "the phrase inside a longer JSON-RPC message",
      JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "Bad Request: No valid session ID provided for tool x" }, id: null }),
      JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "Bad Request: No valid session ID provided for tool x" }, id: null }),
    ],
    [
      "the phrase as a nested error's message (a gateway relaying an upstream's failure)",
      JSON.stringify({ jsonrpc: "2.0", error: { code: -32602, message: "Invalid params", data: { upstream: { message: "Bad Request: No valid session ID provided" } } }, id: null }),
      JSON.stringify({ jsonrpc: "2.0", error: { code: -32602, message: "Invalid params", data: { upstream: { message: "Bad Request: No valid session ID provided" } } }, id: null }),
    ],
    ['the phrase followed by a quote in plain text', 'Bad Request: No valid session ID provided" is not a header', 'Bad Request: No valid session ID provided" is not a header'],
  ])("%s: the server's own answer, one line, the session kept", async (_label, body, shown) => {
    refuse("refused", body);
    const inits = fixture.initializeCount();
    const failed = await callThroughGraph(graph, "py_echo", { text: "refused" });
    expect(failed.status).toBe("error");
    expect(failed.content).toBe(`${PREFIX}: ${shown}`);
    expect((await callThroughGraph(graph, "py_echo", { text: "after" })).content).toBe("after");
    if (!stateless) expect(fixture.initializeCount()).toBe(inits);
  });

  test("a whitespace body reads as an empty one, with its status", async () => {
    refuse("blank", "  \n");
    const failed = await callThroughGraph(graph, "py_echo", { text: "blank" });
    expect(failed.content).toBe(`${PREFIX} with an empty body`);
  });
});

describe("a stateless server (no session id) that answers the unknown-session text", () => {
  test("its 400 is its own answer: shown as it is, not sent again", async () => {
    const fixture = await startHttpFixture({ name: "py", toolNames: ["echo"], stateless: true });
    const proxy = await startProxy(fixture.url);
    const configPath = await writeConfig(await makeTempDir("mcp-400s-"), { mcpServers: { py: { type: "http", url: proxy.url("/mcp") } } });
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const ownGraph = toolNodeGraph(await own.getTools());
      expect(proxy.requests.some((r) => r.headers["mcp-session-id"] !== undefined)).toBe(false);
      for (const [body, shown] of [
        ["Bad Request: No valid session ID provided", "Bad Request: No valid session ID provided"],
        [
          JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "Bad Request: No valid session ID provided" }, id: null }),
          JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "Bad Request: No valid session ID provided" }, id: null }),
        ],
      ]) {
        proxy.rule = (r) => (r.rpcMethod === "tools/call" ? { status: 400, body } : undefined);
        const failed = await callThroughGraph(ownGraph, "py_echo", { text: "lost" });
        expect(failed.content).toBe(`${PREFIX}: ${shown}`);
      }
      expect(proxy.requests.filter((r) => r.rpcMethod === "tools/call")).toHaveLength(2);
    } finally {
      await own.close();
      await proxy.close();
      await fixture.close();
    }
  });
});
