/**
 * A streamable HTTP session whose server forgot it while it was idle (an expiry, a restart): the SDK reconnects the
 * session's event stream (GET), and the server's 404 on the session's id says so before any call is sent on it. The
 * session leaves the pool then, so the next call of each header set starts a new one instead of failing.
 */
import { describe, expect, test } from "@jest/globals";
import type { ServerResponse } from "node:http";
import { createMcpToolkit, RecordingLogger } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { findToolCall, type RecordedRequest } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { startProxy } from "../fixtures/proxy";
import { waitUntil } from "../fixtures/processes";

const asUser = (key: string) => ({ context: { secrets: { api_key: key } } });
const textOf = (r: RecordedRequest) => (r.body as { params?: { arguments?: { text?: unknown } } }).params?.arguments?.text;
const NOT_FOUND = JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null });
const USERS = Array.from({ length: 20 }, (_, i) => `user-key-${String(i).padStart(4, "0")}`);

describe("a server that forgot 20 users' idle sessions, and said so on their event streams", () => {
  test("each header set's next call starts one new session and works; nothing is sent twice", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const configPath = await writeConfig(await makeTempDir("mcp-forgotten-stream-"), {
      mcpServers: { remote: { type: "http", url: fx.url, headers_from_context: { headers: { "X-Api-Key": "api_key" } } } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      const first = await Promise.all(USERS.map((key, i) => callThroughGraph(graph, "remote_echo", { text: `first-${i}` }, asUser(key))));
      expect(first.map((m) => m.content)).toEqual(USERS.map((_, i) => `first-${i}`));
      const ids = USERS.map((_, i) => findToolCall(fx.requests, `first-${i}`)!.sessionId!);
      // Each session's event stream is open (the SDK opens it once the session is initialized).
      await waitUntil(() => ids.every((id) => fx.openStreams().some((r) => r.sessionId === id)));
      const inits = fx.initializeCount();
      const since = fx.requests.length;

      await fx.forgetSessions();
      // The SDK reconnects each stream; the server answers 404 on its id. The pool ends each of those sessions then.
      const refused = (id: string) => (r: RecordedRequest) => r.method === "GET" && r.sessionId === id && fx.requests.indexOf(r) >= since;
      await Promise.all(ids.map((id) => fx.waitForRequest(refused(id), 10_000)));
      const ended = await waitUntil(() => ids.every((id) => fx.requests.some((r) => r.method === "DELETE" && r.sessionId === id)));
      expect(ended).toBe(true);

      const next = await Promise.all(USERS.map((key, i) => callThroughGraph(graph, "remote_echo", { text: `next-${i}` }, asUser(key))));
      expect(next.map((m) => [m.status, m.content])).toEqual(USERS.map((_, i) => ["success", `next-${i}`]));
      expect(fx.initializeCount()).toBe(inits + USERS.length);
      for (let i = 0; i < USERS.length; i += 1) {
        expect(fx.requests.filter((r) => r.rpcMethods?.includes("tools/call") && textOf(r) === `next-${i}`)).toHaveLength(1);
      }
    } finally {
      await toolkit.close();
      await fx.close();
    }
  });
});

describe("a server that answers 404 to every event stream (it offers none)", () => {
  test("keeps its session: the calls share the one discovery initialized, and none is ended", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const proxy = await startProxy(fx.url);
    let refused!: () => void;
    const streamRefused = new Promise<void>((resolve) => (refused = resolve));
    proxy.rule = (r) =>
      r.method === "GET"
        ? (res: ServerResponse) => {
            res.writeHead(404, { "Content-Type": "application/json" });
            res.end(NOT_FOUND, () => refused());
          }
        : undefined;
    const configPath = await writeConfig(await makeTempDir("mcp-no-streams-"), { mcpServers: { remote: { type: "http", url: proxy.url("/mcp") } } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      expect((await callThroughGraph(graph, "remote_echo", { text: "one" })).content).toBe("one");
      // The stream's 404 has been answered before the second call is sent.
      await streamRefused;
      expect((await callThroughGraph(graph, "remote_echo", { text: "two" })).content).toBe("two");
      expect(fx.initializeCount()).toBe(1);
      expect(proxy.requests.some((r) => r.method === "DELETE")).toBe(false);
    } finally {
      await toolkit.close();
      await proxy.close();
      await fx.close();
    }
  });
});
