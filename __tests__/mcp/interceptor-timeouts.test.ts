/**
 * `tool_call_timeout` bounds a tool call as a whole (SPEC §2.1, §5.2), as the agent's tool node sees it: the
 * interceptors before and after `next`, every attempt they make, and the run's cancellation while one of them runs.
 * Real children and HTTP fixtures, real ToolNode graphs; interceptors that never settle, so nothing depends on timing.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolCalls, toolMessagesOf, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import type { HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { stdioFixture } from "../fixtures/stdio";

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const NEVER = new Promise<never>(() => undefined);

const timeoutText = (tool: string, server: string, seconds: string) =>
  `MCP tool '${tool}' on server '${server}' failed: timed out after ${seconds}s without a result or progress (tool_call_timeout)`;

describe("an interceptor that never settles", () => {
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  let mode: "before" | "after" | "pass" = "pass";
  let entered = deferred();
  let release = deferred();
  let returned = deferred<string>();
  const hang: McpToolInterceptor = async (request, next) => {
    if (mode === "pass") return next(request);
    entered.resolve();
    if (mode === "before") {
      await release.promise;
      try {
        return await next(request);
      } finally {
        returned.resolve("before");
      }
    }
    await next(request);
    await release.promise;
    // What an interceptor still running after its call ended hands back: it must reach no state.
    returned.resolve("after");
    return new Command({ update: { messages: [new ToolMessage({ content: "late", tool_call_id: "late", name: "late" })] } });
  };
  beforeAll(async () => {
    const configPath = await writeConfig(await makeTempDir("mcp-icpt-hang-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo"] }), tool_call_timeout: 0.2 } },
    });
    const dataDir = await makeTempDir("mcp-icpt-hang-data-");
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, interceptors: [hang] });
    graph = toolNodeGraph(await toolkit.getTools(), new MemorySaver());
  });
  afterAll(async () => {
    release.resolve();
    await toolkit.close();
  });

  test.each(["before", "after"] as const)("hung %s `next`: the tool node gets the timeout's error ToolMessage, and the late outcome reaches no state", async (where) => {
    mode = where;
    entered = deferred();
    release = deferred();
    returned = deferred<string>();
    const run = { context: { user_id: "u" }, configurable: { thread_id: `hang-${where}` } };
    try {
      const message = await callThroughGraph(graph, "local_echo", { text: "hi" }, run);
      expect({ status: message.status, content: message.content }).toEqual({ status: "error", content: timeoutText("echo", "local", "0.2") });
    } finally {
      release.resolve();
    }
    expect(await returned.promise).toBe(where);
    const state = await graph.getState(run);
    const contents = toolMessagesOf(state.values.messages as BaseMessage[]).map((m) => m.content);
    expect(contents).toEqual([timeoutText("echo", "local", "0.2")]);
    // The session is fine: the next call goes through.
    mode = "pass";
    expect((await callThroughGraph(graph, "local_echo", { text: "again" }, { ...run, configurable: { thread_id: `next-${where}` } })).content).toBe("again");
  });
});

describe("the run cancelled while an interceptor runs", () => {
  let toolkit: McpToolkit;
  let entered = deferred();
  const hang: McpToolInterceptor = async () => {
    entered.resolve();
    return NEVER;
  };
  beforeAll(async () => {
    const configPath = await writeConfig(await makeTempDir("mcp-icpt-cancel-"), {
      // No bound of ours: only the cancellation can end the call.
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo"] }), tool_call_timeout: null } },
    });
    const dataDir = await makeTempDir("mcp-icpt-cancel-data-");
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, interceptors: [hang] });
  });
  afterAll(async () => {
    await toolkit.close();
  });

  test("the tool's call ends with the run's abort reason", async () => {
    entered = deferred();
    const [echo] = await toolkit.getTools();
    const controller = new AbortController();
    const running = echo.invoke({ type: "tool_call", id: "c1", name: echo.name, args: { text: "x" } }, { signal: controller.signal });
    await entered.promise;
    controller.abort(new Error("run cancelled"));
    await expect(running).rejects.toThrow("run cancelled");
  });

  test("in a graph: the run ends with the cancellation", async () => {
    entered = deferred();
    const graph = toolNodeGraph(await toolkit.getTools());
    const controller = new AbortController();
    const running = graph.invoke(
      { messages: [toolCalls([{ name: "local_echo", args: { text: "x" } }])] },
      { signal: controller.signal, context: { user_id: "u" }, configurable: { thread_id: "cancel" } },
    );
    await entered.promise;
    controller.abort(new Error("run cancelled"));
    await expect(running).rejects.toThrow();
  });
});

describe("an interceptor retrying through `next`", () => {
  let http: HttpFixture;
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  let finished = deferred<string[]>();
  // Retries a failed attempt twice more, as a retry interceptor does; notes how each attempt ended.
  const retry: McpToolInterceptor = async (request, next) => {
    const attempts: string[] = [];
    let last: unknown;
    for (let i = 0; i < 3; i++) {
      try {
        const result = await next(request);
        attempts.push("ok");
        finished.resolve(attempts);
        return result;
      } catch (err) {
        attempts.push((err as Error).message);
        last = err;
      }
    }
    finished.resolve(attempts);
    throw last;
  };
  beforeAll(async () => {
    http = await startHttpFixture({ name: "remote", toolNames: ["echo", "slow"] });
    const configPath = await writeConfig(await makeTempDir("mcp-icpt-retry-"), {
      mcpServers: { remote: { type: "http", url: http.url, tool_call_timeout: 0.2 } },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [retry] });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit.close();
    await http.close();
  });

  test("the attempts share the call's one bound: after it ran out, no attempt is sent again", async () => {
    finished = deferred<string[]>();
    const ms = 60_000 + 17; // tells this call apart
    const message = await callThroughGraph(graph, "remote_slow", { ms });
    expect({ status: message.status, content: message.content }).toEqual({ status: "error", content: timeoutText("slow", "remote", "0.2") });
    expect(await finished.promise).toEqual([timeoutText("slow", "remote", "0.2"), timeoutText("slow", "remote", "0.2"), timeoutText("slow", "remote", "0.2")]);
    const sent = http.requests.filter(
      (r) => r.rpcMethods?.includes("tools/call") === true && (r.body as { params: { arguments: { ms?: number } } }).params.arguments.ms === ms,
    );
    expect(sent).toHaveLength(1);
  });

  test("an attempt that got its answer leaves the next call a full bound of its own", async () => {
    finished = deferred<string[]>();
    expect((await callThroughGraph(graph, "remote_echo", { text: "after" })).content).toBe("after");
    expect(await finished.promise).toEqual(["ok"]);
  });
});

describe("what tool_call_timeout leaves alone", () => {
  test("an interceptor handling the server's timeout still can (a fallback answer)", async () => {
    const fallback: McpToolInterceptor = async (request, next) => {
      try {
        return await next(request);
      } catch {
        return { content: [{ type: "text", text: "cached answer" }] };
      }
    };
    const configPath = await writeConfig(await makeTempDir("mcp-icpt-fallback-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["slow"] }), tool_call_timeout: 0.2 } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-icpt-fallback-data-"), interceptors: [fallback] });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      const message = await callThroughGraph(graph, "local_slow", { ms: 60_000 }, { context: { user_id: "u" }, configurable: { thread_id: "fb" } });
      expect({ status: message.status, content: message.content }).toEqual({ status: "success", content: "cached answer" });
    } finally {
      await toolkit.close();
    }
  });

  test("a new session's start is bounded by session_init_timeout, not by tool_call_timeout", async () => {
    // Each child takes longer to start than the call's bound; its start is not the call's time.
    const configPath = await writeConfig(await makeTempDir("mcp-icpt-start-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo"], initDelayMs: 600 }), tool_call_timeout: 0.2 } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-icpt-start-data-") });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      const message = await callThroughGraph(graph, "local_echo", { text: "started" }, { context: { user_id: "u" }, configurable: { thread_id: "new-child" } });
      expect({ status: message.status, content: message.content }).toEqual({ status: "success", content: "started" });
    } finally {
      await toolkit.close();
    }
  });
});
