/**
 * Review of the session-dropping answers against a real stateful streamable HTTP server, behind a proxy that answers
 * some requests itself: supergateway's `-32603 MCP server process failed` and the 400 "No valid session ID provided".
 * What is bounded, which session the pool keeps, what the server is left holding, and that a call still running on a
 * dropped session finishes.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { McpServerSchema } from "../../lib/config/schema";
import { discoverServer } from "../../lib/mcp/discovery";
import { DeadlineExceededError } from "../../lib/shared/deadline";
import { SessionPool } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { startHttpFixture, type StreamableHttpFixture } from "../fixtures/http-server";
import { startSseFixture } from "../fixtures/sse-server";
import { startProxy, type Proxy, type ProxiedRequest, type ProxyAnswer } from "../fixtures/proxy";

const PROCESS_FAILED = "MCP server process failed";
const UNKNOWN_SESSION = "Bad Request: No valid session ID provided";

const rpcError = (request: ProxiedRequest, status: number, code: number, message: string): ProxyAnswer => ({
  status,
  body: JSON.stringify({ jsonrpc: "2.0", id: (JSON.parse(request.body) as { id?: unknown }).id ?? null, error: { code, message } }),
});

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function served(opts: Parameters<typeof startHttpFixture>[0] = {}): Promise<{ fixture: StreamableHttpFixture; proxy: Proxy }> {
  const fixture = await startHttpFixture({ name: "gw", toolNames: ["echo"], ...opts });
  cleanups.push(() => fixture.close());
  const proxy = await startProxy(fixture.url);
  cleanups.push(() => proxy.close());
  return { fixture, proxy };
}

function newPool(): SessionPool {
  const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
  cleanups.push(() => pool.close());
  return pool;
}

const target = (url: string) => ({
  serverName: "gw",
  server: McpServerSchema.parse({ type: "http", url, session_init_timeout: 10 }),
  headers: async () => ({}),
  secrets: [],
});

describe("discovery meeting a session-dropping answer on every listing", () => {
  test.each([
    ["supergateway's -32603 'MCP server process failed'", (r: ProxiedRequest) => rpcError(r, 200, -32603, PROCESS_FAILED)],
    ["the 400 'No valid session ID provided' (JSON-RPC)", (r: ProxiedRequest) => rpcError(r, 400, -32000, UNKNOWN_SESSION)],
    ["the 400 'No valid session ID provided' (plain text)", (): ProxyAnswer => ({ status: 400, body: UNKNOWN_SESSION, contentType: "text/plain" })],
  ])("%s: listed on two sessions only, both ended on the server, nothing left in the pool", async (_label, answer) => {
    const { fixture, proxy } = await served();
    proxy.rule = (r) => (r.rpcMethod === "tools/list" ? answer(r) : undefined);
    const pool = newPool();
    await expect(discoverServer(target(proxy.url("/mcp")), pool)).rejects.toThrow();
    expect(proxy.requests.filter((r) => r.rpcMethod === "tools/list")).toHaveLength(2);
    expect(fixture.initializeCount()).toBe(2);
    await pool.close();
    expect(fixture.activeSessionIds()).toEqual([]);
  });
});

describe("discovery that lists again after the gateway's answer", () => {
  test("the pool keeps the second session, which the next acquisition uses; the first is ended on the server", async () => {
    const { fixture, proxy } = await served();
    let failed = false;
    proxy.rule = (r) => {
      if (r.rpcMethod !== "tools/list" || failed) return undefined;
      failed = true;
      return rpcError(r, 200, -32603, PROCESS_FAILED);
    };
    const pool = newPool();
    const tools = await discoverServer(target(proxy.url("/mcp")), pool);
    expect(tools.map((t) => t.definition.name)).toEqual(["echo"]);
    const first = proxy.requests.find((r) => r.rpcMethod === "tools/list")!.headers["mcp-session-id"];
    await fixture.waitForRequest((r) => r.method === "DELETE" && r.sessionId === first);
    const server = McpServerSchema.parse({ type: "http", url: proxy.url("/mcp") });
    const lease = await pool.acquire("gw", server, { headers: {}, initTimeoutMs: 10_000 });
    try {
      expect(fixture.initializeCount()).toBe(2);
      expect(fixture.activeSessionIds()).toEqual([lease.session.client.transport?.sessionId]);
      expect(fixture.activeSessionIds()).not.toContain(first);
    } finally {
      lease.release();
    }
  });
});

describe("a call answered -32603 'MCP server process failed' while another call runs on its session", () => {
  test("the running call finishes with its answer; the session is ended on the server after it, and the next call starts a new one", async () => {
    let release!: (text: string) => void;
    const held = new Promise<string>((resolve) => (release = resolve));
    const { fixture, proxy } = await served({ toolNames: ["echo", "progress"], extraTools: [{ name: "hold", respond: () => held }] });
    proxy.rule = (r) =>
      r.rpcMethod === "tools/call" && (r.params?.arguments as { text?: string } | undefined)?.text === "die" ? rpcError(r, 200, -32603, PROCESS_FAILED) : undefined;
    const configPath = await writeConfig(await makeTempDir("mcp-gw-review-"), { mcpServers: { gw: { type: "http", url: proxy.url("/mcp") } } });
    const toolkit: McpToolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), httpSessionIdleSeconds: null });
    cleanups.push(() => toolkit.close());
    const graph = toolNodeGraph(await toolkit.getTools());
    expect((await callThroughGraph(graph, "gw_echo", { text: "first" })).content).toBe("first");
    const [session] = fixture.activeSessionIds();
    const running = callThroughGraph(graph, "gw_hold", {});
    await fixture.waitForRequest((r) => r.rpcMethod === "tools/call" && (r.body as { params?: { name?: string } }).params?.name === "hold");
    const failed = await callThroughGraph(graph, "gw_echo", { text: "die" });
    expect(failed.status).toBe("error");
    expect(String(failed.content)).toContain(PROCESS_FAILED);
    // The running call's session is not ended under it.
    expect(fixture.activeSessionIds()).toEqual([session]);
    release("held answer");
    expect((await running).content).toBe("held answer");
    await fixture.waitForRequest((r) => r.method === "DELETE" && r.sessionId === session);
    expect((await callThroughGraph(graph, "gw_echo", { text: "after" })).content).toBe("after");
    expect(fixture.initializeCount()).toBe(2);
    expect(fixture.activeSessionIds()).toHaveLength(1);
    expect(fixture.activeSessionIds()).not.toContain(session);
  });
});

describe("the same answers where no session id was given, or over SSE: the server's own answer, not asked again", () => {
  test("stateless streamable HTTP: -32603 'MCP server process failed' to the listing is asked once", async () => {
    const { proxy } = await served({ stateless: true });
    proxy.rule = (r) => (r.rpcMethod === "tools/list" ? rpcError(r, 200, -32603, PROCESS_FAILED) : undefined);
    await expect(discoverServer(target(proxy.url("/mcp")), newPool())).rejects.toThrow(PROCESS_FAILED);
    expect(proxy.requests.filter((r) => r.rpcMethod === "tools/list")).toHaveLength(1);
  });

  test("SSE: a 400 'No valid session ID provided' to the listing's POST is asked once", async () => {
    const fixture = await startSseFixture({ name: "gw", toolNames: ["echo"] });
    cleanups.push(() => fixture.close());
    const proxy = await startProxy(fixture.url);
    cleanups.push(() => proxy.close());
    proxy.rule = (r) => (r.rpcMethod === "tools/list" ? rpcError(r, 400, -32000, UNKNOWN_SESSION) : undefined);
    const server = McpServerSchema.parse({ type: "sse", url: proxy.url("/sse"), session_init_timeout: 10 });
    await expect(discoverServer({ ...target(""), server }, newPool())).rejects.toThrow();
    expect(proxy.requests.filter((r) => r.rpcMethod === "tools/list")).toHaveLength(1);
  });
});

describe("the 400 'No valid session ID provided' on requests that are not a session's POST", () => {
  test("to the initialize POST itself: no session had expired, initialize is not asked again", async () => {
    const { fixture, proxy } = await served();
    proxy.rule = (r) => (r.rpcMethod === "initialize" ? rpcError(r, 400, -32000, UNKNOWN_SESSION) : undefined);
    await expect(discoverServer(target(proxy.url("/mcp")), newPool())).rejects.toThrow(UNKNOWN_SESSION);
    expect(proxy.requests.filter((r) => r.rpcMethod === "initialize")).toHaveLength(1);
    expect(fixture.activeSessionIds()).toEqual([]);
  });

  test("to the GET of the session's event stream and to its DELETE: the session serves on, and closing ends", async () => {
    const { fixture, proxy } = await served();
    proxy.rule = (r) => (r.method === "GET" || r.method === "DELETE" ? { status: 400, body: UNKNOWN_SESSION, contentType: "text/plain" } : undefined);
    const pool = newPool();
    const tools = await discoverServer(target(proxy.url("/mcp")), pool);
    expect(tools.map((t) => t.definition.name)).toEqual(["echo"]);
    await fixture.waitForRequest((r) => r.rpcMethod === "tools/list");
    const lease = await pool.acquire("gw", McpServerSchema.parse({ type: "http", url: proxy.url("/mcp") }), { headers: {}, initTimeoutMs: 10_000 });
    try {
      const answer = await lease.session.client.callTool({ name: "echo", arguments: { text: "still" } });
      expect(answer.content).toEqual([{ type: "text", text: "still" }]);
    } finally {
      lease.release();
    }
    expect(fixture.initializeCount()).toBe(1);
    await pool.close();
    expect(proxy.requests.some((r) => r.method === "DELETE")).toBe(true);
  });
});

describe("discovery's second listing is bounded by session_init_timeout too", () => {
  test("a gateway failure, then a listing that never answers: discovery ends with the timeout", async () => {
    const { proxy } = await served();
    let lists = 0;
    proxy.rule = (r) => {
      if (r.rpcMethod !== "tools/list") return undefined;
      lists += 1;
      return lists === 1 ? rpcError(r, 200, -32603, PROCESS_FAILED) : "hang";
    };
    const server = McpServerSchema.parse({ type: "http", url: proxy.url("/mcp"), session_init_timeout: 1 });
    await expect(discoverServer({ ...target(""), server }, newPool())).rejects.toBeInstanceOf(DeadlineExceededError);
    expect(lists).toBe(2);
  });
});
