/**
 * One long-lived HTTP (and SSE) session through many calls: the session's abort signal must not collect a
 * listener per request (Node's fetch holds one until the request is garbage-collected, and warns only past 1,500),
 * and aborting it must still end a request in flight. The global fetch is observed (not replaced) to see which
 * signal each request went out with.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { getEventListeners } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { fetchWithOwnSignal } from "../../lib/sessions/request-signal";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import type { HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { startSseFixture } from "../fixtures/sse-server";

const CALLS = 40;

describe("many calls on one session", () => {
  let http: HttpFixture;
  let sse: HttpFixture;
  let toolkit: McpToolkit;
  const realFetch = globalThis.fetch;
  const signals: (AbortSignal | null | undefined)[] = [];
  beforeAll(async () => {
    [http, sse] = await Promise.all([startHttpFixture({ name: "remote", toolNames: ["echo"] }), startSseFixture({ name: "legacy", toolNames: ["echo"] })]);
    const dir = await makeTempDir("request-signal-");
    const configPath = await writeConfig(dir, { mcpServers: { remote: { type: "http", url: http.url }, legacy: { type: "sse", url: sse.url } } });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    globalThis.fetch = (input, init) => {
      signals.push(init?.signal);
      return realFetch(input, init);
    };
  });
  afterAll(async () => {
    globalThis.fetch = realFetch;
    await toolkit.close();
    await Promise.all([http.close(), sse.close()]);
  });

  test.each(["remote", "legacy"])("%s: every request goes out with a signal of its own", async (server) => {
    const graph = toolNodeGraph(await toolkit.getTools());
    signals.length = 0;
    for (let i = 0; i < CALLS; i += 1) {
      expect((await callThroughGraph(graph, `${server}_echo`, { text: `n${i}` })).content).toBe(`n${i}`);
    }
    const given = signals.filter((signal) => signal != null);
    expect(given.length).toBeGreaterThanOrEqual(CALLS);
    expect(new Set(given).size).toBe(given.length);
    for (const signal of given) expect(getEventListeners(signal!, "abort").length).toBeLessThanOrEqual(1);
  });
});

describe("fetchWithOwnSignal", () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === "/hang") return; // never answers
      res.end("ok");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  test("the shared signal holds no listener after requests; aborting it still ends a request in flight", async () => {
    const session = new AbortController();
    for (let i = 0; i < 20; i += 1) expect(await (await fetchWithOwnSignal(`${url}/ok`, { signal: session.signal })).text()).toBe("ok");
    expect(getEventListeners(session.signal, "abort")).toHaveLength(0);

    const pending = fetchWithOwnSignal(`${url}/hang`, { signal: session.signal });
    session.abort(new Error("session closed"));
    await expect(pending).rejects.toThrow("session closed");
    // Without a signal the request goes out unchanged.
    expect(await (await fetchWithOwnSignal(`${url}/ok`)).text()).toBe("ok");
  });
});
