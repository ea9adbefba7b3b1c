/**
 * `watchForgottenSession` at its edges: a 404 on a session's event stream while the server still serves the session's
 * calls (another instance behind a load balancer), with a call running on it, on a session the pool already replaced,
 * and while the session's DELETE is on its way. The server's 404 body never reaches a log line.
 */
import { describe, expect, test } from "@jest/globals";
import type { ServerResponse } from "node:http";
import { createMcpToolkit, McpServerSchema, RecordingLogger } from "../../lib";
import { discoverServer } from "../../lib/mcp/discovery";
import { SessionPool } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { startHttpFixture } from "../fixtures/http-server";
import { startProxy, type ProxiedRequest } from "../fixtures/proxy";
import { waitUntil } from "../fixtures/processes";

const NOT_FOUND = JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found SECRET-BODY-TEXT" }, id: null });
const sessionOf = (r: ProxiedRequest) => r.headers["mcp-session-id"] as string | undefined;

/** Event streams through the proxy: the first GET of each session is served; later ones go to `onLater`. */
function streams(onLater: (res: ServerResponse, forward: () => void, r: ProxiedRequest) => void) {
  const open = new Map<string, ServerResponse>();
  return {
    open,
    rule: (r: ProxiedRequest) => {
      const id = sessionOf(r);
      if (r.method !== "GET" || id === undefined) return undefined;
      return (res: ServerResponse, forward: () => void) => {
        if (open.has(id)) return onLater(res, forward, r);
        open.set(id, res);
        forward();
      };
    },
  };
}

function notFound(res: ServerResponse): void {
  res.writeHead(404, { "Content-Type": "application/json" });
  res.end(NOT_FOUND);
}

describe("a 404 on the event stream of a session with a call running", () => {
  test("the call finishes on it; the session ends after it; the replacement is never ended by the old stream's 404s", async () => {
    let answer!: (text: string) => void;
    const held = new Promise<string>((resolve) => (answer = resolve));
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"], extraTools: [{ name: "hold", respond: () => held }] });
    const proxy = await startProxy(fx.url);
    const s = streams((res) => notFound(res));
    proxy.rule = s.rule;
    const logger = new RecordingLogger();
    const configPath = await writeConfig(await makeTempDir("mcp-forgotten-busy-"), { mcpServers: { remote: { type: "http", url: proxy.url("/mcp") } } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      const running = callThroughGraph(graph, "remote_hold", {});
      expect(await waitUntil(() => fx.requests.some((r) => r.rpcMethods?.includes("tools/call")))).toBe(true);
      const first = fx.requests.find((r) => r.rpcMethods?.includes("tools/call"))!.sessionId!;
      expect(await waitUntil(() => s.open.has(first))).toBe(true);
      // The stream ends (a proxy's idle timeout); the SDK reconnects and meets 404 while the session still works.
      s.open.get(first)!.end();
      expect(await waitUntil(() => logger.messages("debug").some((m) => m.includes("no longer knows a session")))).toBe(true);
      // A call after it goes to a new session while the first call still runs.
      expect((await callThroughGraph(graph, "remote_echo", { text: "next" })).content).toBe("next");
      const second = fx.requests.find((r) => r.rpcMethods?.includes("tools/call") && (r.body as { params?: { name?: string } }).params?.name === "echo")!.sessionId!;
      expect(second).not.toBe(first);
      // The old transport's retry of its stream (the SDK tries again) meets 404 too: the replacement stays.
      expect(await waitUntil(() => proxy.requests.filter((r) => r.method === "GET" && sessionOf(r) === first).length >= 3, 10_000)).toBe(true);
      // Not ended under its running call.
      expect(proxy.requests.some((r) => r.method === "DELETE" && sessionOf(r) === first)).toBe(false);
      answer("held answer");
      expect((await running).content).toBe("held answer");
      expect(await waitUntil(() => proxy.requests.some((r) => r.method === "DELETE" && sessionOf(r) === first))).toBe(true);
      expect((await callThroughGraph(graph, "remote_echo", { text: "again" })).content).toBe("again");
      expect(proxy.requests.some((r) => r.method === "DELETE" && sessionOf(r) === second)).toBe(false);
      expect(fx.initializeCount()).toBe(2);
      expect(logger.lines.map((l) => l.message).join("\n")).not.toContain("SECRET-BODY-TEXT");
    } finally {
      answer("late");
      await toolkit.close();
      await proxy.close();
      await fx.close();
    }
  });
});

describe("a 404 on the event stream while the session is being closed", () => {
  test("its DELETE still on the way: no second close, no log line", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const proxy = await startProxy(fx.url);
    const s = streams((res) => notFound(res));
    let deleting: (() => void) | undefined;
    proxy.rule = (r) => (r.method === "DELETE" ? (_res: ServerResponse, forward: () => void) => void (deleting = forward) : s.rule(r));
    const logger = new RecordingLogger();
    const pool = new SessionPool(logger, { httpIdleMs: null, sessionDeleteTimeoutMs: 60_000 });
    const server = McpServerSchema.parse({ type: "http", url: proxy.url("/mcp") });
    try {
      expect((await discoverServer({ serverName: "remote", server, headers: async () => ({}), secrets: [] }, pool)).map((t) => t.definition.name)).toEqual(["echo"]);
      const id = fx.activeSessionIds()[0];
      expect(await waitUntil(() => s.open.has(id))).toBe(true);
      const closing = pool.close();
      expect(await waitUntil(() => deleting !== undefined)).toBe(true);
      // The stream ends while the DELETE waits: the SDK reconnects (404), then tries once more, which tells the first
      // 404 was handled.
      s.open.get(id)!.end();
      expect(await waitUntil(() => proxy.requests.filter((r) => r.method === "GET" && sessionOf(r) === id).length >= 3, 10_000)).toBe(true);
      deleting!();
      await closing;
      expect(proxy.requests.filter((r) => r.method === "DELETE")).toHaveLength(1);
      expect(logger.messages().filter((m) => m.includes("no longer knows"))).toEqual([]);
    } finally {
      deleting?.();
      await pool.close();
      await proxy.close();
      await fx.close();
    }
  });
});
