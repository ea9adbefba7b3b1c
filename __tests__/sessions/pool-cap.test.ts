import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { MAX_TIMER_SECONDS } from "../../lib/shared/timers";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, type HttpFixture, type RecordedRequest } from "../fixtures/http-common";
import { startHttpFixture, type StreamableHttpFixtureOptions } from "../fixtures/http-server";
import { startSseFixture } from "../fixtures/sse-server";

const CAP = 5;
let http: HttpFixture;
let sse: HttpFixture;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  [http, sse] = await Promise.all([
    startHttpFixture({ name: "remote", toolNames: ["echo", "slow"] }),
    startSseFixture({ name: "events", toolNames: ["echo"] }),
  ]);
  const perUser = { headers_from_context: { headers: { "X-Api-Key": "api_key" } } };
  const configPath = await writeConfig(await makeTempDir("mcp-pool-cap-"), {
    mcpServers: {
      remote: { type: "http", url: http.url, ...perUser },
      events: { type: "sse", url: sse.url, ...perUser },
    },
  });
  // The longest idle time a timer holds: were it to overflow, every session would close right after its call
  // and the reuse checks below would see new initializations.
  toolkit = createMcpToolkit({
    configPath,
    env: {},
    logger: new RecordingLogger(),
    maxHttpSessionsPerServer: CAP,
    httpSessionIdleSeconds: MAX_TIMER_SECONDS,
  });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit?.close();
  await Promise.all([http?.close(), sse?.close()]);
});

const asUser = (key: string) => ({ context: { secrets: { api_key: key } } });

/** One echo call as the holder of `key`; returns the upstream session it ran on. */
async function echo(fixture: HttpFixture, server: string, key: string, marker: string): Promise<string> {
  const message = await callThroughGraph(graph, `${server}_echo`, { text: marker }, asUser(key));
  expect(message.content).toBe(marker);
  return findToolCall(fixture.requests, marker)!.sessionId!;
}

const discoverySession = (fixture: HttpFixture) => fixture.requests.find((r) => r.rpcMethods?.includes("tools/list"))!.sessionId!;
const isDelete = (sessionId: string) => (r: RecordedRequest) => r.method === "DELETE" && r.sessionId === sessionId;

/** Waits until the upstream session was terminated (DELETE answered) and every GET stream of it has closed. */
async function terminated(fixture: HttpFixture, sessionId: string): Promise<void> {
  await fixture.responseClosed(await fixture.waitForRequest(isDelete(sessionId)));
  await streamsClosed(fixture, sessionId);
}

async function streamsClosed(fixture: HttpFixture, sessionId: string): Promise<void> {
  const streams = fixture.requests.filter((r) => r.method === "GET" && r.sessionId === sessionId);
  await Promise.all(streams.map((r) => fixture.responseClosed(r)));
}

describe("live HTTP/SSE sessions per server are capped, least recently used first out", () => {
  test("20 users over HTTP: at most the cap stay live, the LRU ones are terminated, the latest is reused", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) ids.push(await echo(http, "remote", `key-${i}`, `lru-${i}`));

    // Using key-0 again makes it the most recently used; no new session for it.
    let initializations = http.initializeCount();
    expect(await echo(http, "remote", "key-0", "lru-0-again")).toBe(ids[0]);
    expect(http.initializeCount()).toBe(initializations);

    ids.push(await echo(http, "remote", "key-5", "lru-5"));
    await terminated(http, discoverySession(http));
    await terminated(http, ids[1]);
    expect(http.requests.some(isDelete(ids[0]))).toBe(false);
    expect(http.activeSessionIds()).toContain(ids[0]);

    for (let i = 6; i < 20; i += 1) ids.push(await echo(http, "remote", `key-${i}`, `lru-${i}`));
    const evicted = ids.slice(0, 15);
    const live = ids.slice(15);
    await Promise.all(evicted.map((id) => terminated(http, id)));
    expect(new Set(ids).size).toBe(20);
    expect(http.activeSessionIds().sort()).toEqual([...live].sort());
    expect(http.openStreams().filter((r) => !live.includes(r.sessionId!))).toEqual([]);
    expect(http.openStreams().length).toBeLessThanOrEqual(CAP);

    initializations = http.initializeCount();
    expect(await echo(http, "remote", "key-19", "lru-19-again")).toBe(ids[19]);
    expect(http.initializeCount()).toBe(initializations);
  });

  test("busy sessions are never closed under a call: the cap is exceeded while they run, restored when they finish", async () => {
    const before = http.activeSessionIds();
    expect(before.length).toBe(CAP);
    const keys = Array.from({ length: CAP + 1 }, (_, i) => `busy-${i}`);
    const messages = await Promise.all(keys.map((key) => callThroughGraph(graph, "remote_slow", { ms: 400 }, asUser(key))));
    expect(messages.map((m) => m.content)).toEqual(keys.map(() => "slept 400"));

    const busy = keys.map(
      (key) => http.requests.find((r) => r.rpcMethods?.includes("tools/call") && r.headers["x-api-key"] === key)!.sessionId!,
    );
    expect(new Set(busy).size).toBe(CAP + 1);
    await Promise.all(before.map((id) => terminated(http, id)));
    // One of the six goes once the calls are over, and the five others stay.
    const surplus = await http.waitForRequest((r) => r.method === "DELETE" && busy.includes(r.sessionId!));
    await http.responseClosed(surplus);
    await streamsClosed(http, surplus.sessionId!);
    expect(http.activeSessionIds().sort()).toEqual(busy.filter((id) => id !== surplus.sessionId).sort());
  });

  test("SSE sessions are capped too: the least recently used stream is closed", async () => {
    const ids: string[] = [];
    for (let i = 0; i <= CAP; i += 1) ids.push(await echo(sse, "events", `sse-key-${i}`, `sse-call-${i}`));
    const evicted = [discoverySession(sse), ids[0]];
    await Promise.all(evicted.map((id) => streamsClosed(sse, id)));
    expect(sse.activeSessionIds().sort()).toEqual(ids.slice(1).sort());
    expect(sse.openStreams().length).toBe(CAP);
  });
});

describe("room is made for a new header set only once its session is up", () => {
  test("a new user's session that never starts (session_init_timeout) closes no other user's idle session", async () => {
    // Read at each initialize, so later ones can be made to hang.
    const options: StreamableHttpFixtureOptions = { name: "remote", toolNames: ["echo", "slow"] };
    const server = await startHttpFixture(options);
    const configPath = await writeConfig(await makeTempDir("mcp-pool-cap-failed-"), {
      mcpServers: { remote: { type: "http", url: server.url, session_init_timeout: 0.5, headers_from_context: { headers: { "X-Api-Key": "api_key" } } } },
    });
    const kit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), maxHttpSessionsPerServer: 2, httpSessionIdleSeconds: MAX_TIMER_SECONDS });
    try {
      const capped = toolNodeGraph(await kit.getTools());
      const call = (key: string, text: string) => callThroughGraph(capped, "remote_echo", { text }, asUser(key));
      // Discovery's session and alice's fill the cap.
      expect((await call("alice-key", "alice-1")).content).toBe("alice-1");
      const alice = findToolCall(server.requests, "alice-1")!.sessionId!;
      const initializations = server.initializeCount();

      options.hangOnInitialize = true;
      const bob = await call("bob-key", "bob-1");
      expect(bob.status).toBe("error");
      expect(String(bob.content)).toContain("did not start within 0.5s (session_init_timeout)");
      options.hangOnInitialize = false;

      expect((await call("alice-key", "alice-2")).content).toBe("alice-2");
      expect(findToolCall(server.requests, "alice-2")!.sessionId).toBe(alice);
      expect(server.requests.some((r) => r.method === "DELETE")).toBe(false);
      expect(server.initializeCount()).toBe(initializations + 1); // bob's, which hung

      // Once a new session is up, the least recently used idle one makes room at once (discovery's), while the new
      // session's first call still runs.
      const carol = callThroughGraph(capped, "remote_slow", { ms: 600_000 }, asUser("carol-key"));
      carol.catch(() => undefined);
      await server.waitForRequest((r) => r.rpcMethods?.includes("tools/call") === true && r.headers["x-api-key"] === "carol-key");
      await terminated(server, discoverySession(server));
      expect(server.requests.some(isDelete(alice))).toBe(false);
    } finally {
      await kit.close();
      await server.close();
    }
  });
});
