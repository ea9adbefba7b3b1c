import { describe, expect, test } from "@jest/globals";
import type { ToolMessage } from "@langchain/core/messages";
import { createMcpToolkit, RecordingLogger, type McpToolkit, type McpToolkitOptions } from "../../lib";
import { MAX_TIMER_SECONDS } from "../../lib/shared/timers";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, type RecordedRequest } from "../fixtures/http-common";
import { startHttpFixture, type StreamableHttpFixtureOptions } from "../fixtures/http-server";
import { startSseFixture, type SseFixtureOptions } from "../fixtures/sse-server";

const asUser = (key: string) => ({ context: { secrets: { api_key: key } } });
const isDelete = (sessionId: string) => (r: RecordedRequest) => r.method === "DELETE" && r.sessionId === sessionId;

/** A toolkit on one server whose sessions are per user (`X-Api-Key` from the run's `api_key` secret). */
async function perUserToolkit(
  name: string,
  server: { type: "http" | "sse"; url: string } & Record<string, unknown>,
  options: Omit<McpToolkitOptions, "configPath" | "env" | "logger"> = {},
): Promise<McpToolkit> {
  const configPath = await writeConfig(await makeTempDir(`mcp-review-${name}-`), {
    mcpServers: { [name]: { ...server, headers_from_context: { headers: { "X-Api-Key": "api_key" } } } },
  });
  return createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), ...options });
}

describe("the HTTP cap counts sessions that are up, not creations still under way", () => {
  test("a creation cancelled while another user's session comes up costs no third user its idle session", async () => {
    // Read at each initialize, so one user's can be made to hang.
    const options: StreamableHttpFixtureOptions = { name: "remote", toolNames: ["echo", "slow"] };
    const server = await startHttpFixture(options);
    const kit = await perUserToolkit("remote", { type: "http", url: server.url }, { maxHttpSessionsPerServer: 2, httpSessionIdleSeconds: MAX_TIMER_SECONDS });
    try {
      const graph = toolNodeGraph(await kit.getTools());
      const call = (key: string, text: string, signal?: AbortSignal) =>
        callThroughGraph(graph, "remote_echo", { text }, { ...asUser(key), ...(signal ? { signal } : {}) });
      // Discovery's session and alice's fill the cap.
      expect((await call("alice-key", "alice-1")).content).toBe("alice-1");
      const alice = findToolCall(server.requests, "alice-1")!.sessionId!;

      // Bob's session does not start (its initialize hangs) ...
      options.hangOnInitialize = true;
      const bobRun = new AbortController();
      const bob = call("bob-key", "bob-1", bobRun.signal);
      bob.catch(() => undefined);
      await server.waitForRequest((r) => r.rpcMethods?.includes("initialize") === true && r.headers["x-api-key"] === "bob-key");
      options.hangOnInitialize = false;

      // ... while carol's comes up: it makes room for itself (discovery's session goes), not for bob's as well.
      expect((await call("carol-key", "carol-1")).content).toBe("carol-1");
      // Bob's run is cancelled: his creation, abandoned, must close nothing.
      bobRun.abort();
      await expect(bob).rejects.toBeDefined();

      // Two live sessions at most: carol's and alice's. Alice's must still be the one her next call uses.
      expect((await call("alice-key", "alice-2")).content).toBe("alice-2");
      expect(findToolCall(server.requests, "alice-2")!.sessionId).toBe(alice);
      expect(server.requests.some(isDelete(alice))).toBe(false);
    } finally {
      await kit.close();
      await server.close();
    }
  });
});

describe("one header set, concurrent first calls", () => {
  test("share one creation; the creator's cancellation leaves the others' wait and the session intact", async () => {
    let open!: () => void;
    const options: StreamableHttpFixtureOptions = { name: "remote", toolNames: ["echo"] };
    const server = await startHttpFixture(options);
    // Innermost: by the time `next` returns, the call waits in the pool (acquire counts it synchronously).
    let joined = 0;
    let allJoined!: () => void;
    const everyoneWaits = new Promise<void>((resolve) => (allJoined = resolve));
    const kit = await perUserToolkit("remote", { type: "http", url: server.url }, {
      interceptors: [
        (request, next) => {
          const sent = next(request);
          if (++joined === 11) allJoined();
          return sent;
        },
      ],
    });
    try {
      const graph = toolNodeGraph(await kit.getTools());
      const before = server.initializeCount();
      options.initGate = new Promise<void>((resolve) => (open = resolve));
      const creator = new AbortController();
      const first = callThroughGraph(graph, "remote_echo", { text: "first" }, { ...asUser("erin-key"), signal: creator.signal }).catch((e: unknown) => e);
      await server.waitForRequest((r) => r.rpcMethods?.includes("initialize") === true && r.headers["x-api-key"] === "erin-key");
      const others = Array.from({ length: 10 }, (_, i) => callThroughGraph(graph, "remote_echo", { text: `o${i}` }, asUser("erin-key")));
      await everyoneWaits;
      creator.abort();
      await first;
      open();
      const messages = await Promise.all(others);
      expect(messages.map((m) => m.content)).toEqual(others.map((_, i) => `o${i}`));
      expect(server.initializeCount()).toBe(before + 1);
      const ids = new Set(messages.map((_, i) => findToolCall(server.requests, `o${i}`)!.sessionId));
      expect(ids.size).toBe(1);
    } finally {
      await kit.close();
      await server.close();
    }
  });
});

describe("SSE: toolkit.close() while a call's session is initializing", () => {
  test("leaves no server-side session and no open stream", async () => {
    let open!: () => void;
    const options: SseFixtureOptions = { name: "events", toolNames: ["echo"] };
    const server = await startSseFixture(options);
    const kit = await perUserToolkit("events", { type: "sse", url: server.url });
    try {
      const graph = toolNodeGraph(await kit.getTools());
      options.initGate = new Promise<void>((resolve) => (open = resolve));
      const call = callThroughGraph(graph, "events_echo", { text: "x" }, asUser("dave-key")).catch((err: unknown) => err);
      const init = await server.waitForRequest((r) => r.rpcMethods?.includes("initialize") === true && r.headers["x-api-key"] === "dave-key");
      const closed = kit.close();
      open();
      await closed;
      await call;
      await server.responseClosed(init);
      const streams = server.requests.filter((r) => r.method === "GET");
      await Promise.all(streams.map((r) => server.responseClosed(r)));
      expect(server.activeSessionIds()).toEqual([]);
      expect(server.openStreams()).toEqual([]);
    } finally {
      await kit.close();
      await server.close();
    }
  });
});

describe("streamable HTTP: a call's session given up while the server holds its initialize", () => {
  test.each(["toolkit.close()", "the run's cancellation", "its session_init_timeout"])(
    "%s: the caller hears at once; the session the server creates just after is ended (DELETE), not left open",
    async (how) => {
      let open!: () => void;
      const options: StreamableHttpFixtureOptions = { name: "remote", toolNames: ["echo"] };
      const server = await startHttpFixture(options);
      const timeout = how === "its session_init_timeout" ? { session_init_timeout: 0.3 } : {};
      const kit = await perUserToolkit("remote", { type: "http", url: server.url, ...timeout });
      try {
        const graph = toolNodeGraph(await kit.getTools());
        const discovery = server.activeSessionIds();
        options.initGate = new Promise<void>((resolve) => (open = resolve));
        const run = new AbortController();
        const call = callThroughGraph(graph, "remote_echo", { text: "x" }, { ...asUser("erin-key"), signal: run.signal }).catch((err: unknown) => err);
        await server.waitForRequest((r) => r.rpcMethods?.includes("initialize") === true && r.headers["x-api-key"] === "erin-key");
        const closed = how === "toolkit.close()" ? kit.close() : Promise.resolve();
        if (how === "the run's cancellation") run.abort();
        const outcome = await call;
        if (how === "its session_init_timeout") expect(String((outcome as ToolMessage).content)).toContain("session_init_timeout");
        // The server answers the initialize only now, creating the session nobody waits for any more.
        open();
        await closed;
        if (how === "toolkit.close()") {
          expect(server.activeSessionIds()).toEqual([]);
        } else {
          await server.waitForRequest((r) => r.method === "DELETE" && r.headers["x-api-key"] === "erin-key");
          expect(server.activeSessionIds()).toEqual(discovery);
        }
        expect(server.requests.some((r) => r.rpcMethods?.includes("tools/call") === true && r.headers["x-api-key"] === "erin-key")).toBe(false);
      } finally {
        open?.();
        await kit.close();
        await server.close();
      }
    },
  );
});
