/**
 * HTTP/SSE session edges (SPEC §5.2): several calls meeting one expiry at once, a re-initialization
 * the server holds or refuses again, header sets that differ only in spelling or order, and what the model reads.
 */
import { describe, expect, test } from "@jest/globals";
import { readFile, writeFile } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { discoverServer } from "../../lib/mcp/discovery";
import { SessionPool } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { toolCalls, toolMessagesOf, toolNodeGraph, callThroughGraph } from "../fixtures/graph";
import { startHttpFixture, type StreamableHttpFixture } from "../fixtures/http-server";
import { startProxy, type Proxy } from "../fixtures/proxy";
import { startSseFixture } from "../fixtures/sse-server";
import { findToolCall } from "../fixtures/http-common";
import { waitUntil } from "../fixtures/processes";

const EXPIRED =
  "MCP tool 'echo' on server 'remote' failed: the server no longer knows this MCP session (HTTP 404: it expired or the " +
  "server restarted). The call was not sent again; a new session serves the next call.";

async function withProxiedToolkit(
  extra: Record<string, unknown>,
  run: (ctx: { fx: StreamableHttpFixture; proxy: Proxy; toolkit: McpToolkit }) => Promise<void>,
): Promise<void> {
  const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
  const proxy = await startProxy(fx.url);
  const configPath = await writeConfig(await makeTempDir("mcp-edges-http-"), {
    mcpServers: { remote: { type: "http", url: proxy.url("/mcp"), ...extra } },
  });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  try {
    await run({ fx, proxy, toolkit });
  } finally {
    await toolkit.close();
    await proxy.close();
    await fx.close();
  }
}

const callsWith = (fx: StreamableHttpFixture, text: string) =>
  fx.requests.filter((r) => r.rpcMethods?.includes("tools/call") && (r.body as { params: { arguments: { text?: string } } }).params.arguments.text === text);

describe("two calls in flight when the server forgets their session", () => {
  test("each gets the clear error, neither is sent again, and the next calls start exactly one new session", async () => {
    await withProxiedToolkit({}, async ({ fx, proxy, toolkit }) => {
      const graph = toolNodeGraph(await toolkit.getTools());
      expect((await callThroughGraph(graph, "remote_echo", { text: "warm" })).content).toBe("warm");
      const held: Array<() => void> = [];
      proxy.rule = (r) => (r.rpcMethod === "tools/call" ? (_res: ServerResponse, forward: () => void) => void held.push(forward) : undefined);
      const both = graph.invoke({
        messages: [toolCalls([{ name: "remote_echo", args: { text: "one" } }, { name: "remote_echo", args: { text: "two" } }])],
      });
      await waitUntil(() => held.length === 2);
      await fx.forgetSessions();
      const inits = fx.initializeCount();
      proxy.rule = () => undefined;
      for (const forward of held) forward();
      const messages = toolMessagesOf((await both).messages);
      expect(messages.map((m) => [m.status, m.content])).toEqual([
        ["error", EXPIRED],
        ["error", EXPIRED],
      ]);
      expect(callsWith(fx, "one")).toHaveLength(1);
      expect(callsWith(fx, "two")).toHaveLength(1);
      expect(fx.initializeCount()).toBe(inits);

      const next = await graph.invoke({
        messages: [toolCalls([{ name: "remote_echo", args: { text: "three" } }, { name: "remote_echo", args: { text: "four" } }])],
      });
      expect(toolMessagesOf(next.messages).map((m) => m.content)).toEqual(["three", "four"]);
      expect(fx.initializeCount()).toBe(inits + 1);
      expect(fx.activeSessionIds()).toHaveLength(1);
    });
  });
});

describe("a re-initialization after expiry that the server holds", () => {
  test("a call's new session is bounded by session_init_timeout: one clean line; the next call works", async () => {
    await withProxiedToolkit({ session_init_timeout: 2 }, async ({ fx, proxy, toolkit }) => {
      const graph = toolNodeGraph(await toolkit.getTools());
      expect((await callThroughGraph(graph, "remote_echo", { text: "warm" })).content).toBe("warm");
      await fx.forgetSessions({ streams: "kept" });
      expect((await callThroughGraph(graph, "remote_echo", { text: "lost" })).content).toBe(EXPIRED);
      proxy.rule = (r) => (r.rpcMethod === "initialize" ? "hang" : undefined);
      const stuck = await callThroughGraph(graph, "remote_echo", { text: "stuck" });
      expect([stuck.status, stuck.content]).toEqual([
        "error",
        "MCP tool 'echo' on server 'remote' was not called: its MCP session did not start within 2.0s (session_init_timeout)",
      ]);
      expect(callsWith(fx, "stuck")).toHaveLength(0);
      proxy.rule = () => undefined;
      expect((await callThroughGraph(graph, "remote_echo", { text: "after" })).content).toBe("after");
    });
  });

  test("discovery's re-initialization is bounded by session_init_timeout too", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const proxy = await startProxy(fx.url);
    const server = McpServerSchema.parse({ type: "http", url: proxy.url("/mcp"), session_init_timeout: 2 });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const target = { serverName: "remote", server, headers: async () => ({}), secrets: [] };
    try {
      await discoverServer(target, pool);
      await fx.forgetSessions();
      proxy.rule = (r) => (r.rpcMethod === "initialize" ? "hang" : undefined);
      await expect(discoverServer(target, pool)).rejects.toThrow("timed out after 2.0s");
      proxy.rule = () => undefined;
      expect((await discoverServer(target, pool)).map((t) => t.definition.name)).toEqual(["echo"]);
    } finally {
      await pool.close();
      await proxy.close();
      await fx.close();
    }
  });

  test("discovery whose re-initialized session is forgotten again: no third session, the pool holds nothing", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const proxy = await startProxy(fx.url);
    const server = McpServerSchema.parse({ type: "http", url: proxy.url("/mcp"), session_init_timeout: 5 });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const target = { serverName: "remote", server, headers: async () => ({}), secrets: [] };
    try {
      await discoverServer(target, pool);
      const inits = fx.initializeCount();
      proxy.rule = (r) =>
        r.rpcMethod === "tools/list"
          ? { status: 404, body: JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }) }
          : undefined;
      await expect(discoverServer(target, pool)).rejects.toThrow();
      expect(fx.initializeCount()).toBe(inits + 1);
      expect(pool.size()).toBe(0);
    } finally {
      await pool.close();
      await proxy.close();
      await fx.close();
    }
  });
});

describe("per-header-set pool", () => {
  test("header sets that differ only in name spelling or order share one session; another value gets its own", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const server = McpServerSchema.parse({ type: "http", url: fx.url });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const acquire = async (headers: Record<string, string>) => {
      const lease = await pool.acquire("remote", server, { headers, initTimeoutMs: 5000 });
      lease.release();
      return lease.session;
    };
    try {
      const a = await acquire({ "X-Key": "k1", "X-Tenant": "t" });
      expect(await acquire({ "x-tenant": "t", "x-key": "k1" })).toBe(a);
      const b = await acquire({ "X-Key": "k2", "X-Tenant": "t" });
      expect(b).not.toBe(a);
      // A value and a name swapped between headers is another header set.
      expect(await acquire({ "X-Key": "t", "X-Tenant": "k1" })).not.toBe(a);
      expect(fx.activeSessionIds()).toHaveLength(3);
    } finally {
      await pool.close();
      await fx.close();
    }
  });
});

describe("a reload while SSE calls run", () => {
  test("the running call completes on its old session, the new generation gets its own, the old one is closed after", async () => {
    let release!: (text: string) => void;
    const blocked = new Promise<string>((resolve) => (release = resolve));
    const sse = await startSseFixture({ name: "legacy", toolNames: ["echo"], extraTools: [{ name: "block", respond: () => blocked }] });
    const dir = await makeTempDir("mcp-edges-sse-reload-");
    const configPath = await writeConfig(dir, { mcpServers: { legacy: { type: "sse", url: sse.url } } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const running = callThroughGraph(toolNodeGraph(await toolkit.getTools()), "legacy_block", {});
      const call = await sse.waitForRequest((r) => (r.body as { params?: { name?: string } })?.params?.name === "block");
      const old = call.sessionId;
      await writeFile(configPath, (await readFile(configPath, "utf8")).replace('"sse"', '"sse", "description": "edited"'));
      expect((await callThroughGraph(toolNodeGraph(await toolkit.getTools()), "legacy_echo", { text: "fresh" })).content).toBe("fresh");
      const fresh = findToolCall(sse.requests, "fresh")!.sessionId;
      expect(fresh).not.toBe(old);
      expect(sse.activeSessionIds().sort()).toEqual([old, fresh].sort());
      release("released");
      expect((await running).content).toBe("released");
      expect(await waitUntil(() => sse.activeSessionIds().length === 1)).toBe(true);
      expect(sse.activeSessionIds()).toEqual([fresh]);
      expect(sse.openStreams()).toHaveLength(1);
    } finally {
      release("test over");
      await toolkit.close();
      await sse.close();
    }
  });
});

describe("a credential the server echoes in an error body", () => {
  const SECRET = "sk-alice-Zq8w/+=";
  test.each([
    ["HTTP 500", 500],
    ["HTTP 401", 401],
    ["HTTP 403", 403],
    ["HTTP 404 (expired)", 404],
  ])("%s: the ToolMessage holds no form of it, on one line", async (_label, status) => {
    await withProxiedToolkit(
      { user_auth: { header: "X-User-Token", users: { alice: SECRET } } },
      async ({ proxy, toolkit }) => {
        const graph = toolNodeGraph(await toolkit.getTools());
        proxy.rule = (r) => {
          if (r.rpcMethod !== "tools/call") return undefined;
          const sent = String(r.headers["x-user-token"]);
          const body = `bad token ${sent}\njson ${JSON.stringify(sent)} url ${encodeURIComponent(sent)} b64 ${Buffer.from(sent).toString("base64")}`;
          return { status, body, contentType: "text/plain" };
        };
        const message = await callThroughGraph(graph, "remote_echo", { text: "x" }, { context: { user_id: "alice" } });
        const text = String(message.content);
        expect(message.status).toBe("error");
        expect(text).not.toContain("sk-alice");
        expect(text).not.toContain(encodeURIComponent(SECRET));
        expect(text).not.toContain(Buffer.from(SECRET).toString("base64"));
        expect(text).not.toMatch(/[\r\n]/);
        expect(text).not.toContain("127.0.0.1");
      },
    );
  });
});

describe("an SSE session refused with 404 while its event stream stays open", () => {
  test("the old stream is closed once the call failed: one live stream, the new session's", async () => {
    const sse = await startSseFixture({ name: "remote", toolNames: ["echo"] });
    const proxy = await startProxy(sse.url);
    const configPath = await writeConfig(await makeTempDir("mcp-edges-sse-404-"), {
      mcpServers: { remote: { type: "sse", url: proxy.url(new URL(sse.url).pathname) } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      expect((await callThroughGraph(graph, "remote_echo", { text: "before" })).content).toBe("before");
      let refused = false;
      proxy.rule = (r) =>
        r.rpcMethod === "tools/call" && !refused
          ? ((refused = true), { status: 404, body: JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }) })
          : undefined;
      expect((await callThroughGraph(graph, "remote_echo", { text: "during" })).content).toBe(EXPIRED);
      expect((await callThroughGraph(graph, "remote_echo", { text: "after" })).content).toBe("after");
      expect(await waitUntil(() => sse.openStreams().length === 1)).toBe(true);
      expect(sse.activeSessionIds()).toEqual([findToolCall(sse.requests, "after")!.sessionId]);
    } finally {
      await toolkit.close();
      await proxy.close();
      await sse.close();
    }
  });
});

describe("SSE: a late failure of the old session's call", () => {
  test("does not drop the session that replaced it", async () => {
    const sse = await startSseFixture({ name: "legacy", toolNames: ["echo", "slow"] });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const server = McpServerSchema.parse({ type: "sse", url: sse.url });
    const acquire = () => pool.acquire("legacy", server, { headers: {}, initTimeoutMs: 5000 });
    try {
      const old = await acquire();
      const running = old.session.client.callTool({ name: "slow", arguments: { ms: 60_000 } }, undefined, { timeout: 2 ** 31 - 1 });
      await sse.waitForRequest((r) => r.rpcMethods?.includes("tools/call") === true);
      await sse.endStreams();
      expect(await waitUntil(() => pool.size() === 0)).toBe(true);
      const replacement = await acquire();
      replacement.release();
      // The old call's failure is handled only now, after its replacement is up.
      await expect(running).rejects.toThrow("Connection closed");
      pool.invalidate(old.session);
      old.release();
      const again = await acquire();
      again.release();
      expect(again.session).toBe(replacement.session);
      expect(await again.session.client.callTool({ name: "echo", arguments: { text: "ok" } })).toMatchObject({ content: [{ text: "ok" }] });
      expect(sse.initializeCount()).toBe(2);
    } finally {
      await pool.close();
      await sse.close();
    }
  });
});

describe("SSE: a re-initialization after the stream ended that the server holds", () => {
  test("is bounded by session_init_timeout, and the next acquisition works", async () => {
    const sse = await startSseFixture({ name: "legacy", toolNames: ["echo"] });
    const proxy = await startProxy(sse.url);
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const server = McpServerSchema.parse({ type: "sse", url: proxy.url(new URL(sse.url).pathname) });
    const acquire = (initTimeoutMs: number) => pool.acquire("legacy", server, { headers: {}, initTimeoutMs });
    try {
      (await acquire(5000)).release();
      await sse.endStreams();
      expect(await waitUntil(() => pool.size() === 0)).toBe(true);
      let hungOpen = 0;
      proxy.rule = (r) =>
        r.method === "GET"
          ? (res: ServerResponse) => {
              hungOpen += 1;
              res.on("close", () => (hungOpen -= 1));
            }
          : undefined;
      await expect(acquire(300)).rejects.toThrow("timed out after 0.3s");
      expect(pool.size()).toBe(0);
      // The client gave up the stream's request: nothing held open for the session that never started.
      expect(await waitUntil(() => hungOpen === 0)).toBe(true);
      proxy.rule = () => undefined;
      const next = await acquire(5000);
      next.release();
      expect(await next.session.client.callTool({ name: "echo", arguments: { text: "ok" } })).toMatchObject({ content: [{ text: "ok" }] });
    } finally {
      await pool.close();
      await proxy.close();
      await sse.close();
    }
  });
});

describe("a config edit while a call's HTTP session is being initialized", () => {
  test("the call runs on the new generation once; the old generation's sessions are all ended on the server", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const proxy = await startProxy(fx.url);
    const dir = await makeTempDir("mcp-edges-http-reload-");
    const configPath = await writeConfig(dir, {
      mcpServers: { remote: { type: "http", url: proxy.url("/mcp"), headers_from_context: { headers: { "X-User": "user" } } } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      const held: Array<() => void> = [];
      proxy.rule = (r) =>
        r.rpcMethod === "initialize" && r.headers["x-user"] === "u-1" && held.length === 0
          ? (_res: ServerResponse, forward: () => void) => void held.push(forward)
          : undefined;
      const running = callThroughGraph(graph, "remote_echo", { text: "moved" }, { context: { secrets: { user: "u-1" } } });
      await waitUntil(() => held.length === 1);
      await writeFile(configPath, (await readFile(configPath, "utf8")).replace('"http"', '"http", "description": "edited"'));
      // The reload retires the old generation while the call's session is still initializing there.
      await toolkit.getTools();
      held[0]();
      const message = await running;
      expect([message.status, message.content]).toEqual(["success", "moved"]);
      expect(callsWith(fx, "moved")).toHaveLength(1);
      const callSession = findToolCall(fx.requests, "moved")!.sessionId!;
      const heldSession = fx.requests.find((r) => r.rpcMethods?.includes("notifications/initialized") && r.headers["x-user"] === "u-1")!.sessionId!;
      // The session initialized on the retired generation is not the one the call ran on, and is ended on the server.
      expect(callSession).not.toBe(heldSession);
      expect(await waitUntil(() => !fx.activeSessionIds().includes(heldSession))).toBe(true);
      expect(fx.activeSessionIds()).toHaveLength(2);
      expect(fx.activeSessionIds()).toContain(callSession);
    } finally {
      await toolkit.close();
      await proxy.close();
      await fx.close();
    }
    expect(fx.activeSessionIds()).toHaveLength(0);
  });
});

describe("a credential the server echoes while refusing a call's new session", () => {
  const SECRET = "sk-bob-Yy7v_secret";
  test.each([401, 404, 500])("initialize answered HTTP %i: the ToolMessage holds no form of it, on one line", async (status) => {
    await withProxiedToolkit({ user_auth: { header: "X-User-Token", users: { bob: SECRET } } }, async ({ proxy, toolkit }) => {
      const graph = toolNodeGraph(await toolkit.getTools());
      proxy.rule = (r) => {
        if (r.rpcMethod !== "initialize" || r.headers["x-user-token"] === undefined) return undefined;
        const sent = String(r.headers["x-user-token"]);
        return { status, body: `no session for ${sent}\r\n${JSON.stringify({ token: sent })} ${encodeURIComponent(sent)}`, contentType: "text/plain" };
      };
      const message = await callThroughGraph(graph, "remote_echo", { text: "x" }, { context: { user_id: "bob" } });
      const text = String(message.content);
      expect(message.status).toBe("error");
      expect(text).toContain("MCP tool 'echo' on server 'remote'");
      expect(text).not.toContain("sk-bob");
      expect(text).not.toContain("Yy7v");
      expect(text).not.toMatch(/[\r\n]/);
    });
  });
});

describe("two calls waiting for one new session that the server forgets mid-handshake", () => {
  test("both start again on one shared session (one more initialize, not one per call), each call sent once", async () => {
    await withProxiedToolkit({ headers_from_context: { headers: { "X-User": "user" } } }, async ({ fx, proxy, toolkit }) => {
      const graph = toolNodeGraph(await toolkit.getTools());
      let forgotten = false;
      proxy.rule = (r) =>
        r.rpcMethod === "notifications/initialized" && r.headers["x-user"] === "u-9" && !forgotten
          ? ((forgotten = true), { status: 404, body: JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }) })
          : undefined;
      const inits = fx.initializeCount();
      const result = await graph.invoke(
        { messages: [toolCalls([{ name: "remote_echo", args: { text: "a" } }, { name: "remote_echo", args: { text: "b" } }])] },
        { context: { secrets: { user: "u-9" } } },
      );
      expect(toolMessagesOf(result.messages).map((m) => [m.status, m.content])).toEqual([
        ["success", "a"],
        ["success", "b"],
      ]);
      expect(forgotten).toBe(true);
      expect(fx.initializeCount() - inits).toBe(2);
      expect(callsWith(fx, "a")).toHaveLength(1);
      expect(callsWith(fx, "b")).toHaveLength(1);
      expect(findToolCall(fx.requests, "a")!.sessionId).toBe(findToolCall(fx.requests, "b")!.sessionId);
    });
  });
});

describe("a user's header changing mid-conversation", () => {
  test("the next call gets a new session; the old one is ended on the server once idle, the new one kept", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const configPath = await writeConfig(await makeTempDir("mcp-edges-rotate-"), {
      mcpServers: { remote: { type: "http", url: fx.url, headers_from_context: { headers: { "X-Key": "key" } } } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), httpSessionIdleSeconds: 0.2 });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      const options = (key: string) => ({ context: { user_id: "carol", secrets: { key } }, configurable: { thread_id: "t-1" } });
      expect((await callThroughGraph(graph, "remote_echo", { text: "k1" }, options("key-one"))).content).toBe("k1");
      const old = findToolCall(fx.requests, "k1")!.sessionId;
      expect((await callThroughGraph(graph, "remote_echo", { text: "k2" }, options("key-two"))).content).toBe("k2");
      const fresh = findToolCall(fx.requests, "k2")!.sessionId;
      expect(fresh).not.toBe(old);
      expect(findToolCall(fx.requests, "k2")!.headers["x-key"]).toBe("key-two");
      await fx.waitForRequest((r) => r.method === "DELETE" && r.sessionId === old);
      expect(fx.activeSessionIds()).not.toContain(old);
    } finally {
      await toolkit.close();
      await fx.close();
    }
  });
});
