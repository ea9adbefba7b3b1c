import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { readFile } from "node:fs/promises";
import * as path from "node:path";
import { ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolCalls, toolNodeGraph } from "../fixtures/graph";
import { TraceRecorder } from "../fixtures/trace";
import { findToolCall } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { stdioFixture } from "../fixtures/stdio";

let toolkit: McpToolkit;
let tools: Record<string, DynamicStructuredTool>;
let id = 0;

beforeAll(async () => {
  const dir = await makeTempDir("mcp-call-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo", "slow", "pid"] }), tool_call_timeout: 0.3 },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  tools = Object.fromEntries((await toolkit.getTools()).map((t) => [t.name, t]));
});
afterAll(async () => {
  await toolkit.close();
});

async function call(name: string, args: Record<string, unknown> = {}): Promise<ToolMessage> {
  return (await tools[name].invoke({ type: "tool_call", id: `c${++id}`, name, args })) as ToolMessage;
}

describe("the call path on a persistent stdio session", () => {
  test("calls share one child process", async () => {
    const first = (await call("local_pid")).content;
    expect((await call("local_pid")).content).toBe(first);
  });

  test("tool_call_timeout bounds a call with an error ToolMessage and keeps the session", async () => {
    const pid = (await call("local_pid")).content;
    const slow = await call("local_slow", { ms: 5000 });
    expect(slow.status).toBe("error");
    expect(slow.content).toMatch(/^MCP tool 'slow' on server 'local' failed: .*timed out/i);
    expect((await call("local_pid")).content).toBe(pid);
    expect((await call("local_slow", { ms: 10 })).content).toBe("slept 10");
  });

  test("a crashed server is replaced on a later call; the failed call is not replayed", async () => {
    const pid = Number((await call("local_pid")).content);
    process.kill(pid, "SIGKILL");
    const outcomes: ToolMessage[] = [];
    for (let attempt = 0; attempt < 20; attempt += 1) {
      const message = await call("local_pid");
      outcomes.push(message);
      if (message.status !== "error") break;
    }
    const last = outcomes.at(-1)!;
    expect(last.status).toBe("success");
    expect(Number(last.content)).not.toBe(pid);
    // at most the call that met the dead session failed; it was reported, not retried behind the caller's back
    expect(outcomes.filter((m) => m.status === "error").length).toBeLessThanOrEqual(1);
    expect((await call("local_echo", { text: "alive" })).content).toBe("alive");
  });
});

describe("an interceptor's own answer", () => {
  test("a ToolMessage from an interceptor is the tool's result in a ToolNode, as it is; the server gets no call", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const cache: McpToolInterceptor = async (request, next) =>
      request.args.text === "cached"
        ? new ToolMessage({
            content: [{ type: "text", text: "from the cache" }],
            artifact: { hit: true },
            status: "success",
            tool_call_id: request.runtime?.toolCallId ?? "",
            name: "cache",
          })
        : next(request);
    const dir = await makeTempDir("mcp-call-toolmessage-");
    const configPath = await writeConfig(dir, { mcpServers: { remote: { type: "http", url: fx.url } } });
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [cache] });
    try {
      const graph = toolNodeGraph(await own.getTools());
      const message = await callThroughGraph(graph, "remote_echo", { text: "cached" });
      expect(message.content).toEqual([{ type: "text", text: "from the cache" }]);
      expect(message.artifact).toEqual({ hit: true });
      expect(message.name).toBe("cache");
      expect(findToolCall(fx.requests, "cached")).toBeUndefined();
      expect((await callThroughGraph(graph, "remote_echo", { text: "not cached" })).content).toBe("not cached");
    } finally {
      await own.close();
      await fx.close();
    }
  });
});

describe("an interceptor failing on its own files", () => {
  test("the model sees the error's code and call, never the local path in Node's message", async () => {
    const missing = path.join(await makeTempDir("mcp-call-fs-"), "secrets", "users", "alice.json");
    const reading: McpToolInterceptor = async (request, next) => {
      await readFile(missing, "utf8");
      return next(request);
    };
    const dir = await makeTempDir("mcp-call-fs-config-");
    const configPath = await writeConfig(dir, { mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo"] }) } } });
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [reading] });
    try {
      const message = await callThroughGraph(toolNodeGraph(await own.getTools()), "local_echo", { text: "x" });
      expect(message.status).toBe("error");
      expect(message.content).toBe("MCP tool 'echo' on server 'local' failed: ENOENT: no such file or directory (open)");
    } finally {
      await own.close();
    }
  });
});

describe("a call failing as its run is cancelled", () => {
  test("what propagates is the run's abort reason, not an error text that may quote the call's secrets", async () => {
    const SECRET = "zz-abort-secret";
    const controller = new AbortController();
    let current = controller;
    const failing: McpToolInterceptor = async (request) => {
      current.abort(new Error("run cancelled"));
      throw new Error(`upstream refused key ${String((request.runtime?.context as { secrets: { api_key: string } }).secrets.api_key)}`);
    };
    const dir = await makeTempDir("mcp-call-cancelled-");
    const configPath = await writeConfig(dir, { mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo"] }) } } });
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [failing] });
    const traces: string[] = [];
    try {
      const graph = toolNodeGraph(await own.getTools());
      const run = graph.invoke(
        { messages: [toolCalls([{ name: "local_echo", args: { text: "x" } }])] },
        { context: { secrets: { api_key: SECRET } }, signal: controller.signal, callbacks: [new TraceRecorder(traces)] },
      );
      const err = await run.then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err).toBeInstanceOf(Error);
      expect(`${err?.message} ${err?.stack}`).not.toContain(SECRET);
      expect(traces.join("\n")).not.toContain(SECRET);

      // The same through the direct call API (durable-task submits use it): the run's reason, as it is.
      current = new AbortController();
      const direct = own.callTool({
        server: "local",
        tool: "echo",
        args: { text: "x" },
        runtime: { context: { secrets: { api_key: SECRET } }, signal: current.signal } as never,
        signal: current.signal,
      });
      const reason = await direct.then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(reason?.message).toBe("run cancelled");
      expect(reason).toBe(current.signal.reason);
    } finally {
      await own.close();
    }
  });
});
