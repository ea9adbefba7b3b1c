/**
 * The call's one deadline (CallDeadline) over attempts sent at once, session starts and the path translation after
 * the call: a start holds the count off only while it is all the call waits for, `max_total_timeout` ends a call
 * whose session is still starting, a hung translation is cut as a hung walk is, and each request in flight has a
 * signal of its own. Real HTTP fixtures (recording every request) and stdio children, real ToolNode graphs;
 * initializes held on gates and a libuv pool held on FIFOs that the test opens, so nothing depends on timing.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { mkdir, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { BusyPool } from "../fixtures/busy-pool";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import type { RecordedRequest } from "../fixtures/http-common";
import { startHttpFixture, type StreamableHttpFixture } from "../fixtures/http-server";
import { stdioFixture } from "../fixtures/stdio";

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * An `initGate` the test closes and opens again: the fixture reads `then` at each `initialize`, so discovery passes,
 * and the session a call starts waits while `close()` holds it.
 */
class Gate {
  private current: Promise<unknown> = Promise.resolve();
  private opener: (() => void) | undefined;
  readonly gate = { then: (ok: () => unknown, failed: () => unknown) => this.current.then(ok, failed) } as unknown as Promise<unknown>;
  close(): void {
    const held = deferred();
    this.current = held.promise;
    this.opener = held.resolve;
  }
  open(): void {
    this.opener?.();
    this.current = Promise.resolve();
  }
}

const timeoutText = (tool: string, server: string, seconds: string) =>
  `MCP tool '${tool}' on server '${server}' failed: timed out after ${seconds}s without a result or progress (tool_call_timeout)`;
const maxTotalText = (tool: string, server: string, seconds: string) =>
  `MCP tool '${tool}' on server '${server}' failed: timed out after ${seconds}s in total (max_total_timeout, which progress does not extend)`;

const isCancel = (r: RecordedRequest) => r.rpcMethods?.includes("notifications/cancelled") === true;
const cancelledId = (r: RecordedRequest) => (r.body as { params: { requestId: unknown } }).params.requestId;
const isSlowOf = (ms: number) => (r: RecordedRequest) =>
  r.rpcMethods?.includes("tools/call") === true && (r.body as { params: { arguments: { ms?: number } } }).params.arguments.ms === ms;
const idOf = (r: RecordedRequest) => (r.body as { id: unknown }).id;

describe("attempts sent at once, and a session that starts for one of them", () => {
  let http: StreamableHttpFixture;
  const gate = new Gate();
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  /** How the interceptor sends the call: once, or twice at once (`ms` of the second attempt, its headers or not). */
  let mode: { second?: { ms: number; header?: string }; settled?: boolean } = {};
  let bothSettled = deferred();
  const interceptor: McpToolInterceptor = async (request, next) => {
    const second = mode.second;
    if (second === undefined) return next(request);
    const other = request.override({
      args: { ms: second.ms },
      headers: second.header === undefined ? request.headers : { ...request.headers, "X-Attempt": second.header },
    });
    if (!mode.settled) {
      const [first] = await Promise.all([next(request), next(other)]);
      return first;
    }
    // Waits for both attempts however the first ends.
    const [first] = await Promise.allSettled([next(request), next(other)]);
    bothSettled.resolve();
    if (first.status === "rejected") throw first.reason;
    return first.value;
  };
  beforeAll(async () => {
    http = await startHttpFixture({ name: "remote", toolNames: ["slow"], initGate: gate.gate });
    const configPath = await writeConfig(await makeTempDir("mcp-deadline-attempts-"), {
      mcpServers: {
        remote: { type: "http", url: http.url, tool_call_timeout: 0.2, session_init_timeout: 120 },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [interceptor] });
    graph = toolNodeGraph(await toolkit.getTools());
    // The session of the static headers exists (the first attempts need no start).
    expect((await callThroughGraph(graph, "remote_slow", { ms: 0 })).content).toBe("slept 0");
  });
  afterAll(async () => {
    gate.open();
    await toolkit.close();
    await http.close();
  });

  test("a session starting for one attempt does not hold off tool_call_timeout for another attempt in flight", async () => {
    const initializes = http.initializeCount();
    gate.close();
    try {
      mode = { second: { ms: 0, header: "start-1" } };
      const message = await callThroughGraph(graph, "remote_slow", { ms: 60_000 + 1 });
      expect({ status: message.status, content: message.content }).toEqual({ status: "error", content: timeoutText("slow", "remote", "0.2") });
      // It ended while the other attempt's session was still starting (its initialize held on the gate).
      expect(http.initializeCount()).toBe(initializes + 1);
      expect(http.requests.filter(isSlowOf(0)).filter((r) => r.headers["x-attempt"] === "start-1")).toEqual([]);
    } finally {
      mode = {};
      gate.open();
    }
  });

  test("an interceptor waiting for both attempts: once the one in flight timed out, the call does not wait for the other's start", async () => {
    const initializes = http.initializeCount();
    gate.close();
    try {
      mode = { second: { ms: 0, header: "start-3" }, settled: true };
      bothSettled = deferred();
      const message = await callThroughGraph(graph, "remote_slow", { ms: 60_000 + 3 });
      expect({ status: message.status, content: message.content }).toEqual({ status: "error", content: timeoutText("slow", "remote", "0.2") });
      expect(http.initializeCount()).toBe(initializes + 1);
    } finally {
      mode = {};
      gate.open();
    }
    // The start goes on (for the session's next users), and the attempt that waited for it is not sent.
    await bothSettled.promise;
    expect(http.requests.filter(isSlowOf(0)).filter((r) => r.headers["x-attempt"] === "start-3")).toEqual([]);
  });

  test("max_total_timeout ends a call whose session is still starting", async () => {
    gate.close();
    try {
      // The call's only attempt needs a session of its own (other headers), held on the gate past max_total_timeout.
      const starting: McpToolInterceptor = async (request, next) => next(request.override({ headers: { ...request.headers, "X-Attempt": "start-2" } }));
      const configPath = await writeConfig(await makeTempDir("mcp-deadline-start-cap-"), {
        mcpServers: { capped: { type: "http", url: http.url, tool_call_timeout: 60, max_total_timeout: 0.3, session_init_timeout: 120 } },
      });
      const capped = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [starting] });
      try {
        gate.open();
        const cappedGraph = toolNodeGraph(await capped.getTools());
        gate.close();
        const message = await callThroughGraph(cappedGraph, "capped_slow", { ms: 0 });
        expect({ status: message.status, content: message.content }).toEqual({ status: "error", content: maxTotalText("slow", "capped", "0.3") });
      } finally {
        gate.open();
        await capped.close();
      }
    } finally {
      gate.open();
    }
  });

  test("attempts in flight at once: the one answered is not cancelled when the other is", async () => {
    mode = { second: { ms: 0 } };
    const slow = 60_000 + 2;
    const from = http.requests.length;
    try {
      const message = await callThroughGraph(graph, "remote_slow", { ms: slow });
      expect({ status: message.status, content: message.content }).toEqual({ status: "error", content: timeoutText("slow", "remote", "0.2") });
    } finally {
      mode = {};
    }
    const slowRequest = await http.waitForRequest(isSlowOf(slow));
    await http.waitForRequest((r) => isCancel(r) && cancelledId(r) === idOf(slowRequest));
    // A call after it on the same session: every notification the first one sent came before.
    const marker = 17;
    expect((await callThroughGraph(graph, "remote_slow", { ms: marker })).content).toBe(`slept ${marker}`);
    const session = slowRequest.sessionId;
    const requests = http.requests.slice(from).filter((r) => r.sessionId === session);
    const answered = requests.filter(isSlowOf(0)).map(idOf);
    const cancelled = requests.filter(isCancel).map(cancelledId);
    expect(answered).toHaveLength(1);
    expect(cancelled).toEqual([idOf(slowRequest)]);
    expect(answered.some((id) => cancelled.includes(id))).toBe(false);
  });
});

describe("path translation after the call, on a hung file system", () => {
  let fifos: string[];
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  let dataDir: string;
  let held: BusyPool | undefined;
  let hold = false;
  /** Aborted once the server answered (a run cancelled then), when set. */
  let cancelAfterAnswer: AbortController | undefined;
  // Once the server answered, every thread of libuv's pool blocks: the translation's realpath/stat wait behind them.
  const holdPool: McpToolInterceptor = async (request, next) => {
    const result = await next(request);
    if (hold) held = BusyPool.hold(fifos);
    cancelAfterAnswer?.abort(new Error("run cancelled"));
    return result;
  };
  beforeAll(async () => {
    fifos = await BusyPool.fifos("mcp-deadline-pool-");
    dataDir = await makeTempDir("mcp-deadline-paths-data-");
    const configPath = await writeConfig(await makeTempDir("mcp-deadline-paths-"), {
      mcpServers: {
        local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo"] }), tool_call_timeout: 0.2 },
        capped: { type: "stdio", ...stdioFixture({ name: "capped", toolNames: ["echo"] }), tool_call_timeout: null, max_total_timeout: 0.3 },
        untimed: { type: "stdio", ...stdioFixture({ name: "untimed", toolNames: ["echo"] }), tool_call_timeout: null, max_total_timeout: 10 },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, interceptors: [holdPool] });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await held?.release();
    await toolkit.close();
  });

  async function workspaceFile(thread: string): Promise<string> {
    const workspace = path.join(dataDir, "threads", thread, "user-data", "workspace");
    await mkdir(workspace, { recursive: true });
    const file = path.join(workspace, "report.txt");
    await writeFile(file, "r");
    return file;
  }

  test("tool_call_timeout cuts it: the result comes back untranslated, with a note", async () => {
    const file = await workspaceFile("t-count");
    const run = { context: { user_id: "u" }, configurable: { thread_id: "t-count" } };
    // The child started and translation works while the file system answers.
    expect((await callThroughGraph(graph, "local_echo", { text: file }, run)).content).toBe("/mnt/user-data/workspace/report.txt");
    hold = true;
    try {
      const message = await callThroughGraph(graph, "local_echo", { text: file }, run);
      expect({ status: message.status, content: message.content }).toEqual({ status: "success", content: file });
      expect(message.artifact).toEqual({ note: "paths not translated: the file system did not answer within tool_call_timeout" });
    } finally {
      hold = false;
      await held?.release();
      held = undefined;
    }
  }, 20_000);

  test("max_total_timeout ends the call", async () => {
    // The session discovery started (the default thread's): a start of its own would not fit in max_total_timeout.
    const file = await workspaceFile("default");
    const run = {};
    expect((await callThroughGraph(graph, "capped_echo", { text: file }, run)).content).toBe("/mnt/user-data/workspace/report.txt");
    hold = true;
    try {
      const message = await callThroughGraph(graph, "capped_echo", { text: file }, run);
      expect({ status: message.status, content: message.content }).toEqual({ status: "error", content: maxTotalText("echo", "capped", "0.3") });
    } finally {
      hold = false;
      await held?.release();
      held = undefined;
    }
  }, 20_000);

  test("a run cancelled meanwhile: the answer reaches the caller untranslated at once, not when max_total_timeout ends the call", async () => {
    // A durable submit's caller needs the answer to cancel the job it started (see call-deadline-review.test.ts).
    const file = await workspaceFile("t-cancel");
    const scope = { userId: "u", threadId: "t-cancel" };
    const call = (signal?: AbortSignal) => toolkit.callTool({ server: "untimed", tool: "echo", args: { text: file }, scope, signal });
    expect(await call()).toEqual({ content: [{ type: "text", text: "/mnt/user-data/workspace/report.txt" }] });
    hold = true;
    cancelAfterAnswer = new AbortController();
    try {
      expect(await call(cancelAfterAnswer.signal)).toEqual({ content: [{ type: "text", text: file }] });
    } finally {
      hold = false;
      cancelAfterAnswer = undefined;
      await held?.release();
      held = undefined;
    }
  }, 30_000);
});

describe("max_total_timeout while a stdio child starts", () => {
  test("ends the call at the bound, the child's start bounded by session_init_timeout alone", async () => {
    // Each child answers `initialize` 1.5 s after it starts: longer than the call's max_total_timeout.
    const configPath = await writeConfig(await makeTempDir("mcp-deadline-spawn-cap-"), {
      mcpServers: {
        local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo"], initDelayMs: 1500 }), tool_call_timeout: 60, max_total_timeout: 0.3 },
      },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-deadline-spawn-cap-data-") });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      const message = await callThroughGraph(graph, "local_echo", { text: "x" }, { context: { user_id: "u" }, configurable: { thread_id: "new-child" } });
      expect({ status: message.status, content: message.content }).toEqual({ status: "error", content: maxTotalText("echo", "local", "0.3") });
    } finally {
      await toolkit.close();
    }
  }, 20_000);
});
