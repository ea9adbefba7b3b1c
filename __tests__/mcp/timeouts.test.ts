import { afterAll, beforeAll, describe, expect, jest, test } from "@jest/globals";
import type { ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, MAX_TIMEOUT_SECONDS, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { callDeadlineLimits } from "../../lib/mcp/call";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, type HttpFixture, type HttpFixtureOptions } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { startSseFixture } from "../fixtures/sse-server";
import { stdioFixture } from "../fixtures/stdio";

let http: HttpFixture;
let sse: HttpFixture;
let toolkit: McpToolkit;
let tools: Record<string, DynamicStructuredTool>;
let id = 0;

beforeAll(async () => {
  [http, sse] = await Promise.all([
    startHttpFixture({ name: "remote", toolNames: ["echo", "slow", "ticker"] }),
    startSseFixture({ name: "events", toolNames: ["echo", "slow"] }),
  ]);
  const dir = await makeTempDir("mcp-timeouts-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      edge: {
        type: "stdio",
        ...stdioFixture({ name: "edge", toolNames: ["slow"] }),
        tool_call_timeout: MAX_TIMEOUT_SECONDS,
        max_total_timeout: MAX_TIMEOUT_SECONDS,
      },
      chatty: { type: "stdio", ...stdioFixture({ name: "chatty", toolNames: ["ticker", "pid"] }), tool_call_timeout: 0.5 },
      unbounded: { type: "stdio", ...stdioFixture({ name: "unbounded", toolNames: ["ticker"] }), tool_call_timeout: null },
      capped: { type: "http", url: http.url, tool_call_timeout: 0.5, max_total_timeout: 0.8 },
      remote: { type: "http", url: http.url, tool_call_timeout: 0.3 },
      patient: { type: "http", url: http.url, tool_call_timeout: null },
      events: { type: "sse", url: sse.url, tool_call_timeout: 0.3 },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  tools = Object.fromEntries((await toolkit.getTools()).map((t) => [t.name, t]));
});
afterAll(async () => {
  await toolkit?.close();
  await Promise.all([http?.close(), sse?.close()]);
});

async function call(name: string, args: Record<string, unknown> = {}): Promise<ToolMessage> {
  return (await tools[name].invoke({ type: "tool_call", id: `t${++id}`, name, args })) as ToolMessage;
}

describe("tool_call_timeout at the edge of a timer", () => {
  test("a timeout at the largest allowed value does not fire early", async () => {
    const message = await call("edge_slow", { ms: 300 });
    expect(message.status).toBe("success");
    expect(message.content).toBe("slept 300");
  });
});

describe("progress notifications extend a running call", () => {
  test("a call longer than tool_call_timeout succeeds while progress arrives more often than the timeout", async () => {
    const message = await call("chatty_ticker", { intervalMs: 50, durationMs: 1500 });
    expect(message.status).toBe("success");
    expect(message.content).toMatch(/^ticked \d+$/);
  });

  test("without progress the same call times out with a clear error, and the session stays usable", async () => {
    const pid = (await call("chatty_pid")).content;
    const silent = await call("chatty_ticker", { intervalMs: 1500, durationMs: 1500 });
    expect(silent.status).toBe("error");
    expect(silent.content).toBe(
      "MCP tool 'ticker' on server 'chatty' failed: timed out after 0.5s without a result or progress (tool_call_timeout)",
    );
    // A tick count depends on timer granularity; the pid and a zero-length run do not.
    expect((await call("chatty_ticker", { intervalMs: 10, durationMs: 0 })).content).toBe("ticked 0");
    expect((await call("chatty_pid")).content).toBe(pid);
  });

  test("max_total_timeout stops a chatty call however often it reports progress", async () => {
    const message = await call("capped_ticker", { intervalMs: 50, durationMs: 5000 });
    expect(message.status).toBe("error");
    expect(message.content).toBe(
      "MCP tool 'ticker' on server 'capped' failed: timed out after 0.8s in total (max_total_timeout, which progress does not extend)",
    );
    expect((await call("capped_echo", { text: "after-cap" })).content).toBe("after-cap");
  });
});

describe("tool_call_timeout: null", () => {
  test("resolves to no bound of ours; an absent field to the documented default", () => {
    const parse = (server: Record<string, unknown>) => McpServerSchema.parse({ command: "x", ...server });
    expect(callDeadlineLimits(parse({ tool_call_timeout: null }))).toEqual({ timeoutMs: null, maxTotalMs: null });
    expect(callDeadlineLimits(parse({}))).toEqual({ timeoutMs: 60_000, maxTotalMs: null });
    expect(callDeadlineLimits(parse({ tool_call_timeout: 2, max_total_timeout: 5 }))).toEqual({ timeoutMs: 2000, maxTotalMs: 5000 });
  });

  test("no timer of ours or the SDK's (whose default is 60 s) ends the call: ten days pass on the clock mid-call", async () => {
    let firstTick!: () => void;
    const ticked = new Promise<void>((resolve) => (firstTick = resolve));
    const runtime = { writer: () => firstTick() } as never;
    // Only this process's timers are fake; the stdio server ticks in real time.
    jest.useFakeTimers({ doNotFake: ["nextTick", "queueMicrotask", "setImmediate", "Date", "hrtime", "performance"] });
    try {
      const outcome = toolkit.callTool({ server: "unbounded", tool: "ticker", args: { intervalMs: 50, durationMs: 300 }, runtime });
      outcome.catch(() => undefined);
      await ticked;
      jest.advanceTimersByTime(10 * 24 * 3600 * 1000);
      const result = (await outcome) as CallToolResult;
      expect(result.content).toEqual([{ type: "text", text: expect.stringMatching(/^ticked \d+$/) }]);
    } finally {
      jest.useRealTimers();
    }
  });
});

describe("tool_call_timeout over HTTP and SSE", () => {
  test.each([
    ["remote", () => http],
    ["events", () => sse],
  ])("%s: a call past the timeout is a clear error ToolMessage; the next call works on the same session", async (server, fixture) => {
    const slow = await call(`${server}_slow`, { ms: 5000 });
    expect(slow.status).toBe("error");
    expect(slow.content).toBe(`MCP tool 'slow' on server '${server}' failed: timed out after 0.3s without a result or progress (tool_call_timeout)`);
    const marker = `${server}-after-timeout`;
    const before = fixture().initializeCount();
    expect((await call(`${server}_echo`, { text: marker })).content).toBe(marker);
    expect(fixture().initializeCount()).toBe(before);
    const slowCall = fixture().requests.find(
      (r) => r.rpcMethods?.includes("tools/call") && (r.body as { params: { name: string } }).params.name === "slow",
    );
    expect(findToolCall(fixture().requests, marker)?.sessionId).toBe(slowCall?.sessionId);
  });
});

describe("a run cancelled during a call", () => {
  test("the call stops at once, the server is told to cancel it, and the session serves the next call", async () => {
    const controller = new AbortController();
    const ms = 60_000 + ++id; // tells this call apart from the other tests' slow calls
    const isThisCall = (r: { rpcMethods?: string[]; body?: unknown }) =>
      r.rpcMethods?.includes("tools/call") === true && (r.body as { params: { arguments: { ms?: number } } }).params.arguments.ms === ms;
    const running = tools.patient_slow.invoke({ type: "tool_call", id: `t${id}`, name: "patient_slow", args: { ms } }, { signal: controller.signal });
    const sent = await http.waitForRequest(isThisCall);
    controller.abort(new Error("run cancelled"));
    await expect(running).rejects.toThrow("run cancelled");
    const requestId = (sent.body as { id: number }).id;
    // Request ids count per session: the cancellation is the one for this request on this session.
    await http.waitForRequest(
      (r) =>
        r.rpcMethods?.includes("notifications/cancelled") === true &&
        r.sessionId === sent.sessionId &&
        (r.body as { params: { requestId: number } }).params.requestId === requestId,
    );
    const marker = "patient-after-cancel";
    expect((await call("patient_echo", { text: marker })).content).toBe(marker);
    expect(findToolCall(http.requests, marker)?.sessionId).toBe(sent.sessionId);
  });
});

describe("session_init_timeout on a call that needs a new session", () => {
  test("the call says the session did not start in time (not that the tool timed out), and was not sent", async () => {
    // Read at each initialize: discovery's session starts, the one for the user's own headers never does.
    const options: HttpFixtureOptions = { name: "starting", toolNames: ["echo"] };
    const fx = await startHttpFixture(options);
    const configPath = await writeConfig(await makeTempDir("mcp-timeouts-init-"), {
      mcpServers: { starting: { type: "http", url: fx.url, session_init_timeout: 0.3, headers_from_context: { headers: { "X-Api-Key": "api_key" } } } },
    });
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const [echo] = await own.getTools();
      options.hangOnInitialize = true;
      const message = (await echo.invoke(
        { type: "tool_call", id: "init-1", name: echo.name, args: { text: "never sent" } },
        { context: { secrets: { api_key: "k-1" } } },
      )) as ToolMessage;
      expect(message.status).toBe("error");
      expect(message.content).toBe("MCP tool 'echo' on server 'starting' was not called: its MCP session did not start within 0.3s (session_init_timeout)");
      expect(findToolCall(fx.requests, "never sent")).toBeUndefined();
    } finally {
      await own.close();
      await fx.close();
    }
  });
});

