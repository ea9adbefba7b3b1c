/**
 * Streamable HTTP calls whose answer stream ends without the answer, and calls the client gave up: a call the server
 * dropped fails at once, also when the client's tries to resume its stream are spent; a call given up (the run
 * cancelled, its deadline), or answered with a JSON-RPC error, leaves no stream open on the server and is not resumed.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import type { ToolMessage } from "@langchain/core/messages";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { LostCallWatch, RECONNECTION } from "../../lib/sessions/lost-calls";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolCalls, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import type { RecordedRequest } from "../fixtures/http-common";
import { startHttpFixture, type StreamableHttpFixture } from "../fixtures/http-server";
import { waitUntil } from "../fixtures/processes";

const LOST = "the server ended the call's response stream without an answer";

let fx: StreamableHttpFixture | undefined;
let toolkit: McpToolkit | undefined;
afterEach(async () => {
  await toolkit?.close();
  await fx?.close();
  toolkit = undefined;
  fx = undefined;
});

async function graphOn(fixture: StreamableHttpFixture, name: string, extra: Record<string, unknown> = {}): Promise<ToolNodeGraph> {
  const configPath = await writeConfig(await makeTempDir("mcp-lost-calls-"), { mcpServers: { [name]: { type: "http", url: fixture.url, ...extra } } });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  return toolNodeGraph(await toolkit.getTools());
}

const isCallWith = (ms: number) => (r: RecordedRequest) =>
  r.rpcMethods?.includes("tools/call") === true && (r.body as { params: { arguments: { ms?: number } } }).params.arguments.ms === ms;

const isCancellationOf = (call: RecordedRequest) => (r: RecordedRequest) =>
  r.rpcMethods?.includes("notifications/cancelled") === true &&
  (r.body as { params: { requestId: unknown } }).params.requestId === (call.body as { id: unknown }).id;

describe("a call whose stream the server can resume, when the server goes away for good", () => {
  test("fails as a lost call once the client's tries to resume are spent, not at its tool_call_timeout", async () => {
    fx = await startHttpFixture({ name: "gone", toolNames: ["echo", "ticker"], resumable: true });
    const graph = await graphOn(fx, "gone", { tool_call_timeout: 30 });
    const stream = await graph.stream(
      { messages: [toolCalls([{ name: "gone_ticker", args: { intervalMs: 20, durationMs: 600_000 } }])] },
      { streamMode: ["custom", "updates"] },
    );
    const events = stream[Symbol.asyncIterator]();
    // A progress event: the call's stream is up and the client holds an event id to resume from.
    expect(((await events.next()).value as [string, { type?: string }])[1].type).toBe("mcp_progress");
    await fx.close(); // a crash or a deploy: nothing answers on its port any more
    let message: ToolMessage | undefined;
    for (let next = await events.next(); !next.done; next = await events.next()) {
      const [mode, chunk] = next.value as [string, { tools?: { messages: ToolMessage[] } }];
      if (mode === "updates" && chunk.tools) message = chunk.tools.messages[0];
    }
    expect(message?.status).toBe("error");
    expect(message?.content).toContain(LOST);
  }, 40_000);
});

describe("requests answered", () => {
  test.each([false, true])("leave nothing tracked, answers in plain JSON: %s (an unknown tool's error result too)", async (jsonResponse) => {
    fx = await startHttpFixture({ name: "answered", toolNames: ["echo"], jsonResponse });
    const { client, watch } = await watchedClient(fx, {});
    try {
      for (const text of ["a", "b", "c"]) expect((await client.callTool({ name: "echo", arguments: { text } })).content).toEqual([{ type: "text", text }]);
      await expect(client.callTool({ name: "no_such_tool", arguments: {} })).resolves.toMatchObject({ isError: true });
      expect(watch.tracked).toBe(0);
    } finally {
      await client.close();
    }
  });
});

describe("requests answered with a JSON-RPC error on a server whose streams can be resumed", () => {
  test("leave no resumed stream open: the SDK resumes an error answer's stream, which the server would hold for the session's life", async () => {
    fx = await startHttpFixture({ name: "erring", toolNames: ["echo", "rpc_error"], resumable: true });
    const fixture = fx;
    const { client, network, watch, resumed } = await watchedClient(fixture, {});
    try {
      const calls = 5;
      for (let i = 0; i < calls; i += 1) {
        await expect(client.callTool({ name: "rpc_error", arguments: {} })).rejects.toThrow("sign in at the server first");
      }
      // The SDK resumes each answered stream from its last event id (after its reconnection delay).
      expect(await waitUntil(() => resumed.length === calls)).toBe(true);
      expect(resumed).toEqual(Array(calls).fill(405));
      expect(network.filter(isResumption)).toEqual([]);
      expect(fixture.openStreams().filter((r) => r.headers["last-event-id"] !== undefined)).toEqual([]);
      expect((await client.callTool({ name: "echo", arguments: { text: "after" } })).content).toEqual([{ type: "text", text: "after" }]);
      expect(watch.tracked).toBe(0);
    } finally {
      await client.close();
    }
  });
});

describe("a call the client gave up", () => {
  test.each([
    ["a server that cannot resume streams", false],
    ["a server that can resume streams", true],
  ])("on %s leaves no answer stream open, call after call, and the session keeps serving", async (_label, resumable) => {
    fx = await startHttpFixture({ name: "lag", toolNames: ["echo", "ticker"], resumable });
    const fixture = fx;
    const graph = await graphOn(fixture, "lag");
    const calls: RecordedRequest[] = [];
    for (let i = 0; i < 3; i += 1) {
      const durationMs = 600_000 + i;
      const controller = new AbortController();
      const stream = await graph.stream(
        { messages: [toolCalls([{ name: "lag_ticker", args: { intervalMs: 20, durationMs } }])] },
        { streamMode: ["custom"], signal: controller.signal },
      );
      const events = stream[Symbol.asyncIterator]();
      // Progress came back on the call's stream: it is open and being read.
      expect(((await events.next()).value as [string, { type?: string }])[1].type).toBe("mcp_progress");
      const call = await fixture.waitForRequest(
        (r) => r.rpcMethods?.includes("tools/call") === true && (r.body as { params: { arguments: { durationMs?: number } } }).params.arguments.durationMs === durationMs,
      );
      calls.push(call);
      controller.abort(new Error("run cancelled"));
      await expect(drain(events)).rejects.toThrow("run cancelled");
      await fixture.waitForRequest(isCancellationOf(call));
      // Closed by the client: the server does not answer a cancelled request, so it would hold the stream forever.
      await fixture.responseClosed(call);
      expect((await callThroughGraph(graph, "lag_echo", { text: `after ${i}` })).content).toBe(`after ${i}`);
    }
    expect(fixture.requests.filter((r) => r.rpcMethods?.includes("tools/call"))).toHaveLength(calls.length + 3);
    expect(fixture.openStreams().filter((r) => r.headers["last-event-id"] !== undefined)).toEqual([]);
  });

  test.each([
    ["before it reaches the watch", "outer"],
    ["while it is on its way to the server", "network"],
  ] as const)(
    "whose stream ended with an event id is not resumed when the client's resumption comes %s",
    async (_label, held) => {
      fx = await startHttpFixture({ name: "keeping", toolNames: ["echo", "drop_stream"], resumable: true });
      const fixture = fx;
      const resumption = gate();
      const { client, network, watch } = await watchedClient(fixture, {
        outer: async (init) => {
          if (held === "outer" && isResumption(init)) await resumption.held();
        },
        network: async (init) => {
          if (held === "network" && isResumption(init)) await resumption.held();
        },
      });
      try {
        // The server ends the call's stream after its first event; the client resumes it from that event's id.
        await giveUpWhenHeld(client, fixture, "drop_stream", resumption);
        expect((await client.callTool({ name: "echo", arguments: { text: "after" } })).content).toEqual([{ type: "text", text: "after" }]);
        if (held === "outer") {
          expect(network.filter(isResumption)).toEqual([]);
        } else {
          // It reached the server: its stream, opened before the answer came back here, is closed unread.
          const resumed = await fixture.waitForRequest((r) => r.method === "GET" && r.headers["last-event-id"] !== undefined);
          await fixture.responseClosed(resumed);
        }
        expect(fixture.openStreams().filter((r) => r.headers["last-event-id"] !== undefined)).toEqual([]);
        expect(watch.tracked).toBe(0);
      } finally {
        await client.close();
      }
    },
  );

  test("whose resumption, on its way when the call was given up, then fails on the network: the client's next try is answered here and nothing stays held", async () => {
    fx = await startHttpFixture({ name: "keeping", toolNames: ["echo", "drop_stream"], resumable: true });
    const fixture = fx;
    const resumption = gate();
    let failed = false;
    const { client, watch, resumed } = await watchedClient(fixture, {
      network: async (init) => {
        if (!isResumption(init) || failed) return;
        await resumption.held();
        failed = true;
        throw new TypeError("fetch failed");
      },
    });
    try {
      await giveUpWhenHeld(client, fixture, "drop_stream", resumption);
      // The SDK tries once more after the failure: that try is answered by the watch (no stream offered), unsent.
      expect(await waitUntil(() => resumed.includes(405))).toBe(true);
      expect(fixture.requests.filter((r) => r.method === "GET" && r.headers["last-event-id"] !== undefined)).toEqual([]);
      expect((await client.callTool({ name: "echo", arguments: { text: "after" } })).content).toEqual([{ type: "text", text: "after" }]);
      expect(watch.tracked).toBe(0);
    } finally {
      await client.close();
    }
  });

  test.each([
    ["it arrives", "arrives"],
    ["its request fails", "fails"],
  ] as const)("given up before its response arrived, then %s: nothing is left open or held", async (_label, then) => {
    fx = await startHttpFixture({ name: "lag", toolNames: ["echo", "slow"] });
    const fixture = fx;
    const post = gate();
    const isCall = (init: RequestInit | undefined) => typeof init?.body === "string" && init.body.includes('"tools/call"') && init.body.includes('"slow"');
    const { client, watch } = await watchedClient(fixture, {
      network: async (init) => {
        if (!isCall(init)) return;
        await post.held();
        if (then === "fails") throw new TypeError("fetch failed");
        // Already on the wire: the watch's abort no longer stops it, its response comes.
        return { ...init, signal: undefined };
      },
    });
    try {
      await giveUpWhenHeld(client, fixture, "slow", post);
      if (then === "arrives") await fixture.responseClosed(await fixture.waitForRequest(isCallWith(600_000)));
      expect((await client.callTool({ name: "echo", arguments: { text: "after" } })).content).toEqual([{ type: "text", text: "after" }]);
      expect(watch.tracked).toBe(0);
    } finally {
      await client.close();
    }
  });
});

/** A GET the SDK sends to resume a stream from an event id. */
const isResumption = (init: RequestInit | undefined) => init?.method === "GET" && new Headers(init.headers).has("last-event-id");

async function drain(events: AsyncIterator<unknown>): Promise<void> {
  for (let next = await events.next(); !next.done; next = await events.next());
}

interface Gate {
  held: () => Promise<void>;
  reached: Promise<void>;
  release: () => void;
}

/** A point a request waits at: `reached` once one arrives, which goes on when `release()` is called. */
function gate(): Gate {
  let arrived!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((resolve) => (arrived = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  return {
    held: () => {
      arrived();
      return released;
    },
    reached,
    release,
  };
}

/**
 * Calls `tool` (`ms: 600_000`) and gives it up once a request of it reached `held`: the SDK rejects the call and sends
 * `notifications/cancelled`; then `held` lets its request go on.
 */
async function giveUpWhenHeld(client: Client, fixture: StreamableHttpFixture, tool: string, held: Gate): Promise<void> {
  const controller = new AbortController();
  const running = client.callTool({ name: tool, arguments: { ms: 600_000 } }, undefined, { signal: controller.signal });
  await held.reached;
  controller.abort(new Error("given up"));
  await expect(running).rejects.toThrow("given up");
  await fixture.waitForRequest((r) => r.rpcMethods?.includes("notifications/cancelled") === true);
  held.release();
}

/**
 * A bare SDK client on the lost-call watch, as the pool builds it, with two points to hold a request at: `outer`, as
 * the SDK hands it to the watch, and `network`, as the watch passes it on to the server. `network` lists what reached it.
 */
async function watchedClient(
  fixture: StreamableHttpFixture,
  hold: { outer?: (init: RequestInit | undefined) => Promise<void>; network?: (init: RequestInit | undefined) => Promise<RequestInit | void> },
): Promise<{ client: Client; network: RequestInit[]; watch: LostCallWatch; resumed: number[] }> {
  const watch = new LostCallWatch();
  const network: RequestInit[] = [];
  const resumed: number[] = [];
  const watched = watch.fetch(async (input, init) => {
    network.push(init ?? {});
    return fetch(input, (await hold.network?.(init)) ?? init);
  });
  const transport = new StreamableHTTPClientTransport(new URL(fixture.url), {
    reconnectionOptions: RECONNECTION,
    fetch: async (input, init) => {
      await hold.outer?.(init);
      const response = await watched(input, init);
      if (isResumption(init)) resumed.push(response.status);
      return response;
    },
  });
  watch.attach(transport);
  const client = new Client({ name: "test", version: "0" });
  await client.connect(transport);
  return { client, network, watch, resumed };
}
