/**
 * An HTTP server that forgets its sessions (expiry, restart): its 404 on the old session id re-initializes once,
 * transparently, for discovery; a tool call already sent gets a clear error and is not sent again; the next call
 * works on a new session.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, McpServerSchema, RecordingLogger, ToolkitClosedError, type McpToolkit } from "../../lib";
import { discoverServer } from "../../lib/mcp/discovery";
import { SessionPool } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { findToolCall, type RecordedRequest } from "../fixtures/http-common";
import { startHttpFixture, type StreamableHttpFixture } from "../fixtures/http-server";
import { startProxy, sessionNotFound } from "../fixtures/proxy";
import { startSseFixture } from "../fixtures/sse-server";
import { waitUntil } from "../fixtures/processes";

let http: StreamableHttpFixture;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
  const configPath = await writeConfig(await makeTempDir("mcp-expiry-"), { mcpServers: { remote: { type: "http", url: http.url } } });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

const toolCallsSent = (text: string) => http.requests.filter((r) => r.rpcMethods?.includes("tools/call") && JSON.stringify(r.body).includes(text));

describe("a session the server forgot", () => {
  test("a tool call on it gets a clear error and is not sent again; the following call works on a new session", async () => {
    expect((await callThroughGraph(graph, "remote_echo", { text: "before" })).content).toBe("before");
    const initsBefore = http.initializeCount();
    await http.forgetSessions({ streams: "kept" });

    const failed = await callThroughGraph(graph, "remote_echo", { text: "lost" });
    expect(failed.status).toBe("error");
    expect(failed.content).toBe(
      "MCP tool 'echo' on server 'remote' failed: the server no longer knows this MCP session (HTTP 404: it expired or the " +
        "server restarted). The call was not sent again; a new session serves the next call.",
    );
    expect(toolCallsSent("lost")).toHaveLength(1);
    expect(http.initializeCount()).toBe(initsBefore);

    const after = await callThroughGraph(graph, "remote_echo", { text: "after" });
    expect(after.content).toBe("after");
    expect(http.initializeCount()).toBe(initsBefore + 1);
    expect(findToolCall(http.requests, "after")!.sessionId).not.toBe(findToolCall(http.requests, "before")!.sessionId);
    expect(toolCallsSent("lost")).toHaveLength(1);
  });

  test("discovery on a forgotten session re-initializes once, transparently, within session_init_timeout", async () => {
    const server = McpServerSchema.parse({ type: "http", url: http.url, session_init_timeout: 5 });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const target = { serverName: "remote", server, headers: async () => ({}), secrets: [] };
    try {
      expect((await discoverServer(target, pool)).map((t) => t.definition.name)).toEqual(["echo"]);
      const inits = http.initializeCount();
      await http.forgetSessions();
      expect((await discoverServer(target, pool)).map((t) => t.definition.name)).toEqual(["echo"]);
      expect(http.initializeCount()).toBe(inits + 1);
      expect(pool.size()).toBe(1);
    } finally {
      await pool.close();
    }
  });

  test.each([
    ["streamable HTTP: the listing's own stream ended", "http"],
    ["SSE: the session's event stream ended", "sse"],
  ] as const)("discovery whose listing is dropped unanswered (%s) re-initializes once, transparently", async (_label, type) => {
    const opts = { name: "dropping", toolNames: ["echo"] as const, dropListOnce: true };
    const dropping = type === "http" ? await startHttpFixture({ ...opts, toolNames: [...opts.toolNames] }) : await startSseFixture({ ...opts, toolNames: [...opts.toolNames] });
    const server = McpServerSchema.parse({ type, url: dropping.url, session_init_timeout: 5 });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    try {
      const target = { serverName: "dropping", server, headers: async () => ({}), secrets: [] };
      expect((await discoverServer(target, pool)).map((t) => t.definition.name)).toEqual(["echo"]);
      expect(dropping.initializeCount()).toBe(2);
    } finally {
      await pool.close();
      await dropping.close();
    }
  });

  test("a late invalidation from an old session's call never drops its replacement", async () => {
    const server = McpServerSchema.parse({ type: "http", url: http.url });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const acquire = () => pool.acquire("remote", server, { headers: {}, initTimeoutMs: 5000 });
    try {
      const old = await acquire();
      old.release();
      pool.invalidate(old.session);
      const replacement = await acquire();
      replacement.release();
      expect(replacement.session).not.toBe(old.session);
      pool.invalidate(old.session); // a second 404 of a call that was still running on the old session
      const again = await acquire();
      again.release();
      expect(again.session).toBe(replacement.session);
    } finally {
      await pool.close();
    }
  });

  test("getTools() after the server forgot: a reload discovers on a new session and the tools work", async () => {
    await http.forgetSessions();
    await toolkit.reset();
    const tools = await toolkit.getTools();
    const message = await callThroughGraph(toolNodeGraph(tools), "remote_echo", { text: "reloaded" });
    expect(message.content).toBe("reloaded");
  });
});

describe("a 404 that is no expired session", () => {
  test("discovery against a URL that answers 404 to initialize asks once, not twice", async () => {
    const server = McpServerSchema.parse({ type: "http", url: `${http.url.replace(/\/mcp$/, "")}/nope`, session_init_timeout: 5 });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const target = { serverName: "wrong", server, headers: async () => ({}), secrets: [] };
    const asked = () => http.requests.filter((r) => r.path === "/nope" && r.rpcMethods?.includes("initialize")).length;
    try {
      await expect(discoverServer(target, pool)).rejects.toThrow();
      expect(asked()).toBe(1);
    } finally {
      await pool.close();
    }
  });
});

describe("closing never waits on the server for long, and leaves nothing open", () => {
  test("a server that never answers the session's DELETE: close() gives it up and closes the client", async () => {
    const silent = await startHttpFixture({ name: "silent", toolNames: ["echo"], hangOnDelete: true });
    const server = McpServerSchema.parse({ type: "http", url: silent.url });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null, sessionDeleteTimeoutMs: 50 });
    try {
      const lease = await pool.acquire("silent", server, { headers: {}, initTimeoutMs: 5000 });
      await lease.session.client.callTool({ name: "echo", arguments: { text: "x" } });
      lease.release();
      const sessionId = silent.activeSessionIds()[0];
      await pool.close();
      expect(silent.requests.some((r) => r.method === "DELETE" && r.sessionId === sessionId)).toBe(true);
      expect(pool.live).toBe(0);
    } finally {
      await silent.close();
    }
  });

  test.each([false, true])("a call still running when its session closes has its request ended by the client (plain JSON answers: %s)", async (jsonResponse) => {
    // The server never answers the DELETE, so only the client can end the call's open request.
    const silent = await startHttpFixture({ name: "silent", toolNames: ["slow"], hangOnDelete: true, jsonResponse });
    const server = McpServerSchema.parse({ type: "http", url: silent.url });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null, sessionDeleteTimeoutMs: 50 });
    try {
      const lease = await pool.acquire("silent", server, { headers: {}, initTimeoutMs: 5000 });
      const running = lease.session.client.callTool({ name: "slow", arguments: { ms: 600_000 } });
      running.catch(() => undefined);
      const call = await silent.waitForRequest((r) => r.rpcMethods?.includes("tools/call") === true);
      lease.release();
      await pool.close();
      await expect(running).rejects.toThrow();
      await silent.responseClosed(call);
    } finally {
      await silent.close();
    }
  });

  test("a server that never answers an initialize: its waiting caller hears at once, close() stops the creation after a grace", async () => {
    const silent = await startHttpFixture({ name: "silent", toolNames: ["echo"], hangOnInitialize: true });
    const server = McpServerSchema.parse({ type: "http", url: silent.url });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null, sessionDeleteTimeoutMs: 50 });
    try {
      const waiting = pool.acquire("silent", server, { headers: {}, initTimeoutMs: null });
      waiting.catch(() => undefined);
      const init = await silent.waitForRequest((r) => r.rpcMethods?.includes("initialize") === true);
      const closed = pool.close();
      await expect(waiting).rejects.toThrow("MCP session closed while connecting");
      await closed;
      await silent.responseClosed(init);
      expect(pool.live).toBe(0);
    } finally {
      await silent.close();
    }
  });

  test("a session whose id the server already gave (its notifications/initialized held): close() ends it at once, without the grace", async () => {
    let open!: () => void;
    const held = await startHttpFixture({ name: "held", toolNames: ["echo"], initializedGate: new Promise<void>((resolve) => (open = resolve)) });
    const server = McpServerSchema.parse({ type: "http", url: held.url });
    // A grace longer than the test's own timeout: only a close that does not wait for it ends this test.
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null, sessionDeleteTimeoutMs: 10 * 60_000 });
    try {
      const waiting = pool.acquire("held", server, { headers: {}, initTimeoutMs: null });
      waiting.catch(() => undefined);
      const initialized = await held.waitForRequest((r) => r.rpcMethods?.includes("notifications/initialized") === true);
      await pool.close();
      await expect(waiting).rejects.toThrow("MCP session closed while connecting");
      expect(held.requests.filter((r) => r.method === "DELETE" && r.sessionId === initialized.sessionId)).toHaveLength(1);
      expect(held.activeSessionIds()).toEqual([]);
    } finally {
      open();
      await held.close();
    }
  });

  test("a session already closing (idle) still counts as live, and close() waits for it", async () => {
    const silent = await startHttpFixture({ name: "silent", toolNames: ["echo"], hangOnDelete: true });
    const server = McpServerSchema.parse({ type: "http", url: silent.url });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: 1, sessionDeleteTimeoutMs: 200 });
    try {
      const lease = await pool.acquire("silent", server, { headers: {}, initTimeoutMs: 5000 });
      const sessionId = silent.activeSessionIds()[0];
      lease.release();
      await silent.waitForRequest((r) => r.method === "DELETE" && r.sessionId === sessionId);
      expect(pool.size()).toBe(0);
      expect(pool.live).toBe(1);
      await pool.close();
      expect(pool.live).toBe(0);
    } finally {
      await silent.close();
    }
  });

  test("toolkit.close() during a load resolves only after the sessions that load opened are closed", async () => {
    let open!: () => void;
    const gated = await startHttpFixture({ name: "gated", toolNames: ["echo"], initGate: new Promise<void>((resolve) => (open = resolve)) });
    const configPath = await writeConfig(await makeTempDir("mcp-close-loading-"), { mcpServers: { gated: { type: "http", url: gated.url } } });
    const closing = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const loading = closing.getTools().catch((err: unknown) => err);
      await gated.waitForRequest((r) => r.rpcMethods?.includes("initialize") === true);
      const closed = closing.close();
      open();
      await closed;
      expect(await loading).toBeInstanceOf(ToolkitClosedError);
      expect(gated.activeSessionIds()).toEqual([]);
      expect(gated.openStreams()).toEqual([]);
    } finally {
      await gated.close();
    }
  });
});

/** A toolkit of its own on `fixture` (as server `name`, with `extra` config), its ToolNode graph for `run`; both closed after. */
async function withOwnToolkit(
  fixture: StreamableHttpFixture,
  name: string,
  extra: Record<string, unknown>,
  run: (graph: ToolNodeGraph) => Promise<void>,
): Promise<void> {
  const configPath = await writeConfig(await makeTempDir("mcp-expiry-own-"), { mcpServers: { [name]: { type: "http", url: fixture.url, ...extra } } });
  const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  try {
    await run(toolNodeGraph(await own.getTools()));
  } finally {
    await own.close();
    await fixture.close();
  }
}

describe("a 404 that is not an expired session", () => {
  test("a stateless server's own 404 on a call is shown as it is, and its session is kept", async () => {
    const stateless = await startHttpFixture({ name: "plain", toolNames: ["echo"], stateless: true, notFoundTool: "echo" });
    await withOwnToolkit(stateless, "plain", {}, async (ownGraph) => {
      const inits = stateless.initializeCount();
      for (const text of ["one", "two"]) {
        const message = await callThroughGraph(ownGraph, "plain_echo", { text });
        expect(message.status).toBe("error");
        expect(message.content).toContain("no such tenant");
        expect(message.content).not.toContain("no longer knows this MCP session");
      }
      expect(stateless.initializeCount()).toBe(inits);
    });
  });
});

describe("an SSE session whose event stream ends (the server expired it or restarted)", () => {
  test("is dropped at once: its running call fails now, not at its timeout, and the next call initializes a new session", async () => {
    const sse = await startSseFixture({ name: "legacy", toolNames: ["echo", "slow"] });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const server = McpServerSchema.parse({ type: "sse", url: sse.url });
    const acquire = () => pool.acquire("legacy", server, { headers: {}, initTimeoutMs: 5000 });
    try {
      const first = await acquire();
      // No timeout of its own: only the end of the stream can end this call.
      const running = first.session.client.callTool({ name: "slow", arguments: { ms: 60_000 } }, undefined, { timeout: 2 ** 31 - 1 });
      await sse.waitForRequest((r) => r.rpcMethods?.includes("tools/call") === true);
      const inits = sse.initializeCount();
      await sse.endStreams();
      await expect(running).rejects.toThrow("Connection closed");
      first.release();
      expect(await waitUntil(() => pool.size() === 0)).toBe(true);

      const next = await acquire();
      try {
        expect(next.session).not.toBe(first.session);
        expect(sse.initializeCount()).toBe(inits + 1);
        expect(await next.session.client.callTool({ name: "echo", arguments: { text: "after" } })).toMatchObject({ content: [{ text: "after" }] });
      } finally {
        next.release();
      }
      // Every call went to a session that was initialized: none to a stream the client reconnected on its own.
      const initialized = new Set(sse.requests.filter((r) => r.rpcMethods?.includes("initialize")).map((r) => r.sessionId));
      const called = sse.requests.filter((r) => r.rpcMethods?.includes("tools/call")).map((r) => r.sessionId);
      expect(called.every((id) => initialized.has(id))).toBe(true);
    } finally {
      await pool.close();
      await sse.close();
    }
  });
});

describe("an SSE session whose event stream ends during its handshake", () => {
  /** An SSE fixture whose next initialize, once `arm()` was called, waits until the event streams were ended. */
  async function endingOnce() {
    const options: Parameters<typeof startSseFixture>[0] = { name: "legacy", toolNames: ["echo"] };
    const sse = await startSseFixture(options);
    const arm = () => {
      let open!: () => void;
      options.initGate = new Promise<void>((resolve) => (open = resolve));
      const seen = sse.initializeCount();
      return (async () => {
        await sse.waitForRequest((r) => r.rpcMethods?.includes("initialize") === true && sse.initializeCount() > seen);
        await sse.endStreams();
        open();
      })();
    };
    return { sse, arm };
  }

  test("discovery starts it once more, transparently, and lists the tools", async () => {
    const { sse, arm } = await endingOnce();
    const ending = arm();
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const server = McpServerSchema.parse({ type: "sse", url: sse.url, session_init_timeout: 10 });
    try {
      const tools = await discoverServer({ serverName: "legacy", server, headers: async () => ({}), secrets: [] }, pool);
      await ending;
      expect(tools.map((t) => t.definition.name)).toEqual(["echo"]);
      expect(sse.initializeCount()).toBe(2);
    } finally {
      await pool.close();
      await sse.close();
    }
  });

  test("a call that needed a new session starts it once more (nothing of the call was sent), and is sent once", async () => {
    const { sse, arm } = await endingOnce();
    const configPath = await writeConfig(await makeTempDir("mcp-sse-handshake-"), {
      mcpServers: { legacy: { type: "sse", url: sse.url, headers_from_context: { headers: { "X-User": "user" } } } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      // A new header set: the call starts a session of its own, whose event stream ends during its handshake.
      const ending = arm();
      const message = await callThroughGraph(graph, "legacy_echo", { text: "sse-after" }, { context: { secrets: { user: "u-3" } } });
      await ending;
      expect([message.status, message.content]).toEqual(["success", "sse-after"]);
      expect(sse.requests.filter((r) => findToolCall([r], "sse-after"))).toHaveLength(1);
    } finally {
      await toolkit.close();
      await sse.close();
    }
  });
});

describe("an SSE session whose event stream ends during a tool call", () => {
  test("the call's ToolMessage says the connection closed and the call was not sent again; the next call works", async () => {
    const sse = await startSseFixture({ name: "legacy", toolNames: ["echo", "slow"] });
    const configPath = await writeConfig(await makeTempDir("mcp-sse-ended-"), { mcpServers: { legacy: { type: "sse", url: sse.url } } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      const running = callThroughGraph(graph, "legacy_slow", { ms: 60_000 });
      await sse.waitForRequest((r) => r.rpcMethods?.includes("tools/call") === true);
      await sse.endStreams();
      const message = await running;
      expect([message.status, message.content]).toEqual([
        "error",
        "MCP tool 'slow' on server 'legacy' failed: the connection to the server closed before it answered (it ended the session's " +
          "event stream). The call was not sent again; a new session serves the next call.",
      ]);
      expect(sse.requests.filter((r) => r.rpcMethods?.includes("tools/call"))).toHaveLength(1);
      expect((await callThroughGraph(graph, "legacy_echo", { text: "after" })).content).toBe("after");
    } finally {
      await toolkit.close();
      await sse.close();
    }
  });
});

describe("an SSE server whose stream URL redirects (a trailing slash)", () => {
  test("connects through the redirect: the stream watch does not take the followed redirect for a reconnect", async () => {
    const sse = await startSseFixture({ name: "mounted", toolNames: ["echo"], redirectStream: true });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    try {
      const lease = await pool.acquire("mounted", McpServerSchema.parse({ type: "sse", url: sse.url }), { headers: {}, initTimeoutMs: 5000 });
      try {
        expect(await lease.session.client.callTool({ name: "echo", arguments: { text: "through" } })).toMatchObject({ content: [{ text: "through" }] });
      } finally {
        lease.release();
      }
    } finally {
      await pool.close();
      await sse.close();
    }
  });
});

describe("a call running when the server forgets its session (expiry, restart)", () => {
  test("fails at once with a clear error, not at its timeout; it is not sent again and the next call works on a new session", async () => {
    const fx = await startHttpFixture({ name: "busy", toolNames: ["echo", "slow"] });
    await withOwnToolkit(fx, "busy", { tool_call_timeout: 600 }, async (ownGraph) => {
      const running = callThroughGraph(ownGraph, "busy_slow", { ms: 600_000 });
      const slow = await fx.waitForRequest((r) => r.rpcMethods?.includes("tools/call") === true);
      const inits = fx.initializeCount();
      await fx.forgetSessions();
      const failed = await running;
      expect(failed.status).toBe("error");
      expect(failed.content).toBe(
        "MCP tool 'slow' on server 'busy' failed: the server ended the call's response stream without an answer (it restarted, " +
          "expired the session or dropped the call). The call was not sent again; a new session serves the next call.",
      );
      expect(fx.requests.filter((r) => r.rpcMethods?.includes("tools/call"))).toHaveLength(1);
      const after = await callThroughGraph(ownGraph, "busy_echo", { text: "after" });
      expect(after.content).toBe("after");
      expect(fx.initializeCount()).toBe(inits + 1);
      // The next call went straight to a new session, not first to the forgotten one (which would answer 404).
      expect(findToolCall(fx.requests, "after")!.sessionId).not.toBe(slow.sessionId);
      expect(fx.requests.filter((r) => r.rpcMethods?.includes("tools/call"))).toHaveLength(2);
    });
  });

  test("on a server that can resume streams: the resumption it refuses (it forgot the session) fails the call at once too", async () => {
    const fx = await startHttpFixture({ name: "keeping", toolNames: ["echo", "slow"], resumable: true });
    await withOwnToolkit(fx, "keeping", { tool_call_timeout: 600 }, async (ownGraph) => {
      const running = callThroughGraph(ownGraph, "keeping_slow", { ms: 600_000 });
      await fx.waitForRequest((r) => r.rpcMethods?.includes("tools/call") === true);
      await fx.forgetSessions();
      const failed = await running;
      expect(failed.status).toBe("error");
      expect(failed.content).toContain("the server ended the call's response stream without an answer");
      // The client did try to resume from the last event before the call was given up.
      expect(fx.requests.some((r) => r.method === "GET" && r.headers["last-event-id"] !== undefined)).toBe(true);
      expect((await callThroughGraph(ownGraph, "keeping_echo", { text: "after" })).content).toBe("after");
    });
  });

  test.each([
    ["a redirect", { status: 307, location: "/mcp?resumed" }],
    ["a transient failure", { status: 503 }],
    ["a request timeout", { status: 408 }],
    ["too many requests", { status: 429 }],
  ])("a resumption answered first with %s is followed by the client and still gets the answer", async (_label, answer) => {
    const fx = await startHttpFixture({ name: "polling", toolNames: ["echo", "drop_stream"], resumable: true, resumeAnswerOnce: answer });
    await withOwnToolkit(fx, "polling", {}, async (ownGraph) => {
      const message = await callThroughGraph(ownGraph, "polling_drop_stream", { ms: 100 });
      expect(message.content).toBe("resumed");
      expect(fx.requests.filter((r) => r.method === "GET" && r.headers["last-event-id"] !== undefined).length).toBeGreaterThan(1);
    });
  });

  test("a stream the server can resume (it sent an event id) is left to the client, which reconnects and gets the answer", async () => {
    const fx = await startHttpFixture({ name: "polling", toolNames: ["echo", "drop_stream"], resumable: true });
    await withOwnToolkit(fx, "polling", {}, async (ownGraph) => {
      const message = await callThroughGraph(ownGraph, "polling_drop_stream", { ms: 100 });
      expect(message.content).toBe("resumed");
      // It was resumed: a GET with the last event id, not a second call.
      expect(fx.requests.some((r) => r.method === "GET" && r.headers["last-event-id"] !== undefined)).toBe(true);
      expect(fx.requests.filter((r) => r.rpcMethods?.includes("tools/call"))).toHaveLength(1);
    });
  });
});

describe("a server that answers calls with plain JSON (no SSE stream to watch)", () => {
  const jsonServer = () => startHttpFixture({ name: "json", toolNames: ["echo", "slow"], jsonResponse: true });
  const slowCall = (ms: number) => (r: RecordedRequest) =>
    r.rpcMethods?.includes("tools/call") === true && (r.body as { params: { arguments: { ms?: number } } }).params.arguments.ms === ms;

  test("a restart during a call (connections cut, sessions forgotten): one clear error, not sent again; the next call works on a new session", async () => {
    const fixture = await jsonServer();
    await withOwnToolkit(fixture, "json", { tool_call_timeout: 600 }, async (graph) => {
      const running = callThroughGraph(graph, "json_slow", { ms: 600_000 });
      const slow = await fixture.waitForRequest(slowCall(600_000));
      await fixture.restart();
      const failed = await running;
      expect([failed.status, failed.content]).toEqual([
        "error",
        "MCP tool 'slow' on server 'json' failed: the server closed the connection before it answered (it restarted or dropped " +
          "the call). The call was not sent again; a new session serves the next call.",
      ]);
      const after = await callThroughGraph(graph, "json_echo", { text: "after" });
      expect([after.status, after.content]).toEqual(["success", "after"]);
      expect(findToolCall(fixture.requests, "after")!.sessionId).not.toBe(slow.sessionId);
      expect(fixture.requests.filter(slowCall(600_000))).toHaveLength(1);
    });
  });

  test("a call given up (tool_call_timeout) leaves no request open on the server, call after call; the session keeps serving", async () => {
    const fixture = await jsonServer();
    await withOwnToolkit(fixture, "json", { tool_call_timeout: 0.2 }, async (graph) => {
      for (let i = 0; i < 3; i += 1) {
        const message = await callThroughGraph(graph, "json_slow", { ms: 600_000 + i });
        expect(message.content).toContain("tool_call_timeout");
        // The server never answers a cancelled request: only the client can end it.
        await fixture.responseClosed(await fixture.waitForRequest(slowCall(600_000 + i)));
        expect((await callThroughGraph(graph, "json_echo", { text: `after ${i}` })).content).toBe(`after ${i}`);
      }
    });
  });
});

describe("an SSE server that answers a call 404 on its session id (it forgot the session)", () => {
  test("a clear error, the call not sent again, the next call on a new session", async () => {
    const sse = await startSseFixture({ name: "remote", toolNames: ["echo"] });
    const proxy = await startProxy(sse.url);
    const configPath = await writeConfig(await makeTempDir("mcp-expiry-sse-404-"), {
      mcpServers: { remote: { type: "sse", url: proxy.url(new URL(sse.url).pathname) } },
    });
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await own.getTools());
      expect((await callThroughGraph(graph, "remote_echo", { text: "before" })).content).toBe("before");
      const inits = sse.initializeCount();
      let refused = false;
      proxy.rule = (r) => (r.rpcMethod === "tools/call" && !refused ? ((refused = true), sessionNotFound) : undefined);
      const failed = await callThroughGraph(graph, "remote_echo", { text: "during" });
      expect(failed.status).toBe("error");
      expect(String(failed.content)).toContain("no longer knows this MCP session");
      expect((await callThroughGraph(graph, "remote_echo", { text: "after" })).content).toBe("after");
      expect(sse.initializeCount()).toBe(inits + 1);
      expect(proxy.requests.filter((r) => r.rpcMethod === "tools/call" && (r.params?.arguments as { text?: string }).text === "during")).toHaveLength(1);
    } finally {
      await own.close();
      await proxy.close();
      await sse.close();
    }
  });
});

describe("a plain-JSON answer cut after its headers", () => {
  test("one clear error, not sent again; the session is dropped, so the next call starts a new one", async () => {
    const fixture = await startHttpFixture({ name: "json", toolNames: ["echo"], jsonResponse: true });
    const proxy = await startProxy(fixture.url);
    proxy.rule = (r) => (r.rpcMethod === "tools/call" && (r.params?.arguments as { text?: string }).text === "cut" ? "cut-body" : undefined);
    const configPath = await writeConfig(await makeTempDir("mcp-expiry-cut-"), { mcpServers: { json: { type: "http", url: proxy.url("/mcp") } } });
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await own.getTools());
      const inits = fixture.initializeCount();
      const cut = await callThroughGraph(graph, "json_echo", { text: "cut" });
      expect([cut.status, cut.content]).toEqual([
        "error",
        "MCP tool 'echo' on server 'json' failed: the server closed the connection before it answered (it restarted or dropped " +
          "the call). The call was not sent again; a new session serves the next call.",
      ]);
      const after = await callThroughGraph(graph, "json_echo", { text: "after" });
      expect([after.status, after.content]).toEqual(["success", "after"]);
      expect(fixture.initializeCount()).toBe(inits + 1);
      expect(proxy.requests.filter((r) => r.rpcMethod === "tools/call" && (r.params?.arguments as { text?: string }).text === "cut")).toHaveLength(1);
    } finally {
      await own.close();
      await proxy.close();
      await fixture.close();
    }
  });
});

describe("a plain-JSON listing cut after its headers (the server restarted as it answered)", () => {
  test("discovery re-initializes once, transparently, and lists the tools", async () => {
    const fixture = await startHttpFixture({ name: "json", toolNames: ["echo"], jsonResponse: true });
    const proxy = await startProxy(fixture.url);
    let cut = false;
    proxy.rule = (r) => (r.rpcMethod === "tools/list" && !cut ? ((cut = true), "cut-body") : undefined);
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const server = McpServerSchema.parse({ type: "http", url: proxy.url("/mcp"), session_init_timeout: 5 });
    try {
      const tools = await discoverServer({ serverName: "json", server, headers: async () => ({}), secrets: [] }, pool);
      expect(tools.map((t) => t.definition.name)).toEqual(["echo"]);
      expect(proxy.requests.filter((r) => r.rpcMethod === "initialize")).toHaveLength(2);
      expect(proxy.requests.filter((r) => r.rpcMethod === "tools/list")).toHaveLength(2);
    } finally {
      await pool.close();
      await proxy.close();
      await fixture.close();
    }
  });
});

describe("a server that forgets a session between its initialize and notifications/initialized", () => {
  test("discovery re-initializes once, transparently (the 404 is on the session's id)", async () => {
    const proxy = await startProxy(http.url);
    let forgotten = false;
    proxy.rule = (r) => (r.rpcMethod === "notifications/initialized" && !forgotten ? ((forgotten = true), sessionNotFound) : undefined);
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const server = McpServerSchema.parse({ type: "http", url: proxy.url("/mcp"), session_init_timeout: 5 });
    try {
      const tools = await discoverServer({ serverName: "remote", server, headers: async () => ({}), secrets: [] }, pool);
      expect(tools.map((t) => t.definition.name)).toEqual(["echo"]);
      expect(proxy.requests.filter((r) => r.rpcMethod === "initialize")).toHaveLength(2);
    } finally {
      await pool.close();
      await proxy.close();
    }
  });
});

describe("a call whose own new session the server forgets between initialize and notifications/initialized", () => {
  /** The fixture behind a proxy, one session per user (a header from the run's context), and a toolkit on it. */
  async function behindProxyPerUser() {
    const proxy = await startProxy(http.url);
    const configPath = await writeConfig(await makeTempDir("mcp-expiry-start-"), {
      mcpServers: { remote: { type: "http", url: proxy.url("/mcp"), headers_from_context: { headers: { "X-User": "user" } } } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    return { proxy, toolkit, graph: toolNodeGraph(await toolkit.getTools()) };
  }

  test("starts it again once, transparently (nothing of the call was sent), and the call is sent once", async () => {
    const { proxy, toolkit, graph } = await behindProxyPerUser();
    try {
      // A new header set: the call starts a session of its own, which the server forgets once, mid-handshake.
      let forgotten = false;
      proxy.rule = (r) => (r.rpcMethod === "notifications/initialized" && !forgotten ? ((forgotten = true), sessionNotFound) : undefined);
      const initsBefore = proxy.requests.filter((r) => r.rpcMethod === "initialize").length;
      const message = await callThroughGraph(graph, "remote_echo", { text: "handshake" }, { context: { secrets: { user: "u-1" } } });
      expect([message.status, message.content]).toEqual(["success", "handshake"]);
      expect(forgotten).toBe(true);
      expect(proxy.requests.filter((r) => r.rpcMethod === "initialize").length - initsBefore).toBe(2);
      expect(toolCallsSent("handshake")).toHaveLength(1);
    } finally {
      await toolkit.close();
      await proxy.close();
    }
  });

  test("a server that forgets it again gets no third start: the call fails with one clean line", async () => {
    const { proxy, toolkit, graph } = await behindProxyPerUser();
    try {
      proxy.rule = (r) => (r.rpcMethod === "notifications/initialized" ? sessionNotFound : undefined);
      const initsBefore = proxy.requests.filter((r) => r.rpcMethod === "initialize").length;
      const message = await callThroughGraph(graph, "remote_echo", { text: "never" }, { context: { secrets: { user: "u-2" } } });
      expect(message.status).toBe("error");
      expect(String(message.content)).toMatch(/^MCP tool 'echo' on server 'remote' failed: /);
      expect(String(message.content)).not.toMatch(/\n|\s{2}at /);
      expect(proxy.requests.filter((r) => r.rpcMethod === "initialize").length - initsBefore).toBe(2);
      expect(toolCallsSent("never")).toHaveLength(0);
    } finally {
      await toolkit.close();
      await proxy.close();
    }
  });
});

describe("a server that answers a session id it forgot with a plain-text 400 (the Python SDK's session manager)", () => {
  test("the call gets the clear error with its status and is not sent again; the next call works on a new session", async () => {
    const fixture = await startHttpFixture({ name: "py", toolNames: ["echo"] });
    const proxy = await startProxy(fixture.url);
    const configPath = await writeConfig(await makeTempDir("mcp-expiry-400-"), { mcpServers: { py: { type: "http", url: proxy.url("/mcp") } } });
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const ownGraph = toolNodeGraph(await own.getTools());
      expect((await callThroughGraph(ownGraph, "py_echo", { text: "before" })).content).toBe("before");
      const forgotten = proxy.requests.find((r) => r.headers["mcp-session-id"] !== undefined)!.headers["mcp-session-id"];
      proxy.rule = (r) =>
        r.headers["mcp-session-id"] === forgotten
          ? { status: 400, body: "Bad Request: No valid session ID provided", contentType: "text/plain; charset=utf-8" }
          : undefined;
      const inits = fixture.initializeCount();
      const failed = await callThroughGraph(ownGraph, "py_echo", { text: "lost" });
      expect(failed.status).toBe("error");
      expect(failed.content).toBe(
        "MCP tool 'echo' on server 'py' failed: the server no longer knows this MCP session (HTTP 400: it expired or the " +
          "server restarted). The call was not sent again; a new session serves the next call.",
      );
      expect((await callThroughGraph(ownGraph, "py_echo", { text: "after" })).content).toBe("after");
      expect(fixture.initializeCount()).toBe(inits + 1);
      expect(proxy.requests.filter((r) => r.rpcMethod === "tools/call" && (r.params?.arguments as { text?: string }).text === "lost")).toHaveLength(1);
    } finally {
      await own.close();
      await proxy.close();
      await fixture.close();
    }
  });
});
