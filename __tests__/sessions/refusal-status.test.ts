/**
 * A call (or a listing) the server refuses with an HTTP 4xx/5xx and a body: the model's line names the status on both
 * transports, as the SSE transport's own error does ("Error POSTing to endpoint (HTTP 403): …"), the body quoted after
 * it, scrubbed of the request's credential (the body may echo a header), bounded and on one line. Real fixture servers
 * (streamable HTTP and SSE) behind a proxy that answers the refused requests itself, driven through a ToolNode.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, cleanErrorLine, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startHttpFixture, type StreamableHttpFixture } from "../fixtures/http-server";
import { startProxy, type ProxiedRequest, type Proxy } from "../fixtures/proxy";
import { startSseFixture, type SseFixture } from "../fixtures/sse-server";

const SECRET = "sk-refused-Qv7x";
const perCall = { headers_from_context: { headers: { "X-Api-Key": "api_key" } } };
const context = { context: { secrets: { api_key: SECRET } } };

describe("a call refused with an HTTP status and a JSON body", () => {
  let http: StreamableHttpFixture;
  let sse: SseFixture;
  let httpFront: Proxy;
  let sseFront: Proxy;
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;

  beforeAll(async () => {
    [http, sse] = await Promise.all([startHttpFixture({ name: "remote", toolNames: ["echo"] }), startSseFixture({ name: "legacy", toolNames: ["echo"] })]);
    [httpFront, sseFront] = await Promise.all([startProxy(http.url), startProxy(sse.url)]);
    const configPath = await writeConfig(await makeTempDir("mcp-refusal-status-"), {
      mcpServers: {
        remote: { type: "http", url: httpFront.url(new URL(http.url).pathname), ...perCall },
        legacy: { type: "sse", url: sseFront.url(new URL(sse.url).pathname), ...perCall },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit?.close();
    await httpFront?.close();
    await sseFront?.close();
    await http?.close();
    await sse?.close();
  });

  /** Both fronts refuse each call with `status` and the body `body` makes of the request's credential. */
  function refuse(status: number, body: (sent: string) => string): void {
    const rule = (r: ProxiedRequest) =>
      r.rpcMethod === "tools/call" ? { status, body: body(String(r.headers["x-api-key"])), contentType: "application/json" } : undefined;
    httpFront.rule = rule;
    sseFront.rule = rule;
  }
  const lines = async () => {
    const [streamable, legacy] = await Promise.all([
      callThroughGraph(graph, "remote_echo", { text: "x" }, context),
      callThroughGraph(graph, "legacy_echo", { text: "x" }, context),
    ]);
    return { streamable: cleanErrorLine(streamable), legacy: cleanErrorLine(legacy) };
  };

  test.each([
    [403, () => JSON.stringify({ error: "forbidden" }), '(HTTP 403): {"error":"forbidden"}'],
    [
      500,
      (sent: string) => JSON.stringify({ jsonrpc: "2.0", error: { code: -32603, message: `upstream refused key ${sent}` }, id: null }),
      '(HTTP 500): {"jsonrpc":"2.0","error":{"code":-32603,"message":"upstream refused key [redacted]"},"id":null}',
    ],
  ])("HTTP %i: the streamable HTTP line names the status as the SSE line does, the echoed credential scrubbed", async (status, body, shown) => {
    refuse(status, body);
    const { streamable, legacy } = await lines();
    expect(legacy).toBe(`MCP tool 'echo' on server 'legacy' failed: Error POSTing to endpoint ${shown}`);
    expect(streamable).toBe(`MCP tool 'echo' on server 'remote' failed: Streamable HTTP error: Error POSTing to endpoint ${shown}`);
    expect(`${streamable}${legacy}`).not.toContain("sk-refused");
  });

  test("a long body with line breaks: one bounded line that still names the status", async () => {
    refuse(502, (sent) => JSON.stringify({ error: "bad gateway", detail: `key ${sent}\n${"x".repeat(5000)}` }, null, 2));
    const { streamable } = await lines();
    expect(streamable.startsWith("MCP tool 'echo' on server 'remote' failed: Streamable HTTP error: Error POSTing to endpoint (HTTP 502): {")).toBe(true);
    expect(streamable.length).toBeLessThan(1200);
    expect(streamable).not.toContain("sk-refused");
  });

  test("an empty body: the status, once, and that the body was empty, on both transports", async () => {
    refuse(503, () => "");
    const { streamable, legacy } = await lines();
    expect(streamable).toBe("MCP tool 'echo' on server 'remote' failed: Streamable HTTP error: Error POSTing to endpoint (HTTP 503) with an empty body");
    expect(legacy).toBe("MCP tool 'echo' on server 'legacy' failed: Error POSTing to endpoint (HTTP 503) with an empty body");
  });

  test("the calls after the refusals go through on both transports", async () => {
    httpFront.rule = () => undefined;
    sseFront.rule = () => undefined;
    expect((await callThroughGraph(graph, "remote_echo", { text: "after" }, context)).content).toBe("after");
    expect((await callThroughGraph(graph, "legacy_echo", { text: "after" }, context)).content).toBe("after");
  });
});

describe("a listing refused with an HTTP status and a JSON body", () => {
  test("discovery's warning names the status as well", async () => {
    const http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const front = await startProxy(http.url);
    front.rule = (r) => (r.rpcMethod === "tools/list" ? { status: 403, body: JSON.stringify({ error: "forbidden" }) } : undefined);
    const configPath = await writeConfig(await makeTempDir("mcp-refusal-status-list-"), {
      mcpServers: { remote: { type: "http", url: front.url(new URL(http.url).pathname) } },
    });
    const logger = new RecordingLogger();
    const toolkit = createMcpToolkit({ configPath, env: {}, logger });
    try {
      expect(await toolkit.getTools()).toHaveLength(0);
      expect(logger.messages("warn")).toContain(
        'Skipping MCP server \'remote\' after tool discovery failed: Streamable HTTP error: Error POSTing to endpoint (HTTP 403): {"error":"forbidden"}',
      );
    } finally {
      await toolkit.close();
      await front.close();
      await http.close();
    }
  });
});

describe("a listing an SSE server refuses with an empty body", () => {
  test("discovery's warning names the status and says the body was empty", async () => {
    const sse = await startSseFixture({ name: "legacy", toolNames: ["echo"] });
    const front = await startProxy(sse.url);
    front.rule = (r: ProxiedRequest) => (r.rpcMethod === "tools/list" ? { status: 401, body: "", contentType: "application/json" } : undefined);
    const logger = new RecordingLogger();
    const configPath = await writeConfig(await makeTempDir("mcp-refusal-status-"), {
      mcpServers: { legacy: { type: "sse", url: front.url(new URL(sse.url).pathname) } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger });
    try {
      expect(await toolkit.getTools()).toEqual([]);
      const warning = logger.messages("warn").find((m) => m.startsWith("Skipping MCP server 'legacy'"));
      expect(warning).toMatch(/Error POSTing to endpoint \(HTTP 401\) with an empty body$/);
    } finally {
      await toolkit.close();
      await front.close();
      await sse.close();
    }
  });
});
