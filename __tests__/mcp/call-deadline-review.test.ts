/**
 * The call's one deadline (CallDeadline) and the requests it carries: a request the server already answered is not
 * cancelled when the call ends later (an interceptor after `next` that overruns `tool_call_timeout`, or the run's
 * cancellation). Real HTTP fixture (recording
 * every request), real ToolNode graphs; interceptors that block on promises the test controls.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolCalls, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import type { HttpFixture, RecordedRequest } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const timeoutText = (tool: string, server: string, seconds: string) =>
  `MCP tool '${tool}' on server '${server}' failed: timed out after ${seconds}s without a result or progress (tool_call_timeout)`;

const isCancel = (r: RecordedRequest) => r.rpcMethods?.includes("notifications/cancelled") === true;
const isEchoOf = (text: string) => (r: RecordedRequest) =>
  r.rpcMethods?.includes("tools/call") === true && (r.body as { params: { arguments: { text?: string } } }).params.arguments.text === text;

describe("a request the server answered, when the call ends later", () => {
  let http: HttpFixture;
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  let mode: "pass" | "after" = "pass";
  let answered = deferred();
  let release = deferred();
  const interceptor: McpToolInterceptor = async (request, next) => {
    if (mode === "pass") return next(request);
    const result = await next(request);
    answered.resolve();
    await release.promise;
    return result;
  };
  beforeAll(async () => {
    http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const configPath = await writeConfig(await makeTempDir("mcp-deadline-review-"), {
      mcpServers: { remote: { type: "http", url: http.url, tool_call_timeout: 0.2 } },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [interceptor] });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterEach(() => {
    release.resolve();
    mode = "pass";
  });
  afterAll(async () => {
    await toolkit.close();
    await http.close();
  });

  /** A call after the one under test, on the same session: every request the first one sent was sent before it. */
  async function settle(marker: string): Promise<void> {
    mode = "pass";
    expect((await callThroughGraph(graph, "remote_echo", { text: marker })).content).toBe(marker);
    await http.waitForRequest(isEchoOf(marker));
  }

  test("an interceptor after `next` that overruns tool_call_timeout: the answered request is not cancelled", async () => {
    mode = "after";
    answered = deferred();
    release = deferred();
    const message = await callThroughGraph(graph, "remote_echo", { text: "answered" });
    expect({ status: message.status, content: message.content }).toEqual({ status: "error", content: timeoutText("echo", "remote", "0.2") });
    await answered.promise;
    release.resolve();
    await settle("after-timeout");
    expect(http.requests.filter(isCancel)).toEqual([]);
  });

  test("the run cancelled while an interceptor after `next` runs: the answered request is not cancelled", async () => {
    const cancelsBefore = http.requests.filter(isCancel).length;
    mode = "after";
    answered = deferred();
    release = deferred();
    const controller = new AbortController();
    const running = graph.invoke({ messages: [toolCalls([{ name: "remote_echo", args: { text: "answered-2" } }])] }, { signal: controller.signal });
    await answered.promise;
    controller.abort(new Error("run cancelled"));
    await expect(running).rejects.toThrow();
    release.resolve();
    await settle("after-cancel");
    expect(http.requests.filter(isCancel).slice(cancelsBefore)).toEqual([]);
  });
});

describe("a call whose run was cancelled before it started", () => {
  test("ends with the run's reason and sends nothing (the deadline stops inside its constructor)", async () => {
    const http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const configPath = await writeConfig(await makeTempDir("mcp-deadline-pre-aborted-"), {
      mcpServers: { remote: { type: "http", url: http.url, tool_call_timeout: 0.2, max_total_timeout: 1 } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      await toolkit.getTools();
      const controller = new AbortController();
      controller.abort(new Error("run cancelled early"));
      await expect(toolkit.callTool({ server: "remote", tool: "echo", args: { text: "early" }, signal: controller.signal })).rejects.toThrow("run cancelled early");
      // The next call goes through, and the cancelled one was never sent.
      expect(await toolkit.callTool({ server: "remote", tool: "echo", args: { text: "later" } })).toMatchObject({ content: [{ type: "text", text: "later" }] });
      expect(http.requests.filter(isEchoOf("early"))).toEqual([]);
    } finally {
      await toolkit.close();
      await http.close();
    }
  });
});
