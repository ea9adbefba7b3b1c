/**
 * Calls and sessions across a config reload: a call still in its interceptors when the tools reload goes on in the
 * new generation when its server's connection settings are unchanged, and is refused unsent otherwise; close() also
 * closes sessions that earlier generations still had busy; a reload that fails gives old tools an error message.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { randomUUID } from "node:crypto";
import * as path from "node:path";
import { readFile, rm, writeFile } from "node:fs/promises";
import type { ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createMcpToolkit, McpToolCallError, RecordingLogger, ToolkitClosedError, type McpToolInterceptor } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, type HttpFixture } from "../fixtures/http-common";
import { startHttpFixture, type StreamableHttpFixtureOptions } from "../fixtures/http-server";
import { stdioFixture } from "../fixtures/stdio";
import { alive, pidsWithMarker, waitUntil } from "../fixtures/processes";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";

let http: HttpFixture;
beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
});
afterAll(async () => {
  await http.close();
});

/** An interceptor that holds the calls whose text is `held` until `release()`; `entered` settles when one arrives. */
function holding() {
  let entered!: () => void;
  let release!: () => void;
  const state = {
    entered: new Promise<void>((resolve) => (entered = resolve)),
    gate: new Promise<void>((resolve) => (release = resolve)),
    release: () => release(),
  };
  const interceptor: McpToolInterceptor = async (request, next) => {
    if (request.args.text === "held") {
      entered();
      await state.gate;
    }
    return next(request);
  };
  return { state, interceptor };
}

const invoke = (tool: DynamicStructuredTool, text: string, id: string) =>
  tool.invoke({ type: "tool_call", id, name: tool.name, args: { text } }) as Promise<ToolMessage>;

describe("a call still in its interceptors when the tools reload", () => {
  test("the server's connection settings are unchanged (a description edit): it goes on in the new generation", async () => {
    const { state, interceptor } = holding();
    const file = await writeConfig(await makeTempDir("mcp-reload-"), { mcpServers: { remote: { type: "http", url: http.url } } });
    const toolkit = createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger(), interceptors: [interceptor] });
    try {
      const [echo] = await toolkit.getTools();
      const call = invoke(echo, "held", "r1");
      await state.entered;
      await writeFile(file, JSON.stringify({ mcpServers: { remote: { type: "http", url: http.url, description: "edited" } } }));
      await toolkit.getTools();
      state.release();
      const message = await call;
      expect(message.status).toBe("success");
      expect(message.content).toBe("held");
    } finally {
      await toolkit.close();
    }
  });

  test("its connection settings changed (a new header): it is refused with a clear error and never sent", async () => {
    const { state, interceptor } = holding();
    const file = await writeConfig(await makeTempDir("mcp-reload-"), { mcpServers: { remote: { type: "http", url: http.url } } });
    const toolkit = createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger(), interceptors: [interceptor] });
    try {
      const [echo] = await toolkit.getTools();
      const marker = `held`;
      const sentBefore = http.requests.filter((r) => findToolCall([r], marker)).length;
      const call = invoke(echo, marker, "r2");
      await state.entered;
      await writeFile(file, JSON.stringify({ mcpServers: { remote: { type: "http", url: http.url, headers: { "X-New": "1" } } } }));
      await toolkit.getTools();
      state.release();
      const message = await call;
      expect(message.status).toBe("error");
      expect(message.content).toBe(
        "MCP tool 'echo' on server 'remote' was not called: the server's configuration changed while the call was being prepared; call it again",
      );
      expect(http.requests.filter((r) => findToolCall([r], marker)).length).toBe(sentBefore);
    } finally {
      await toolkit.close();
    }
  });
});

describe("a call whose session is still starting when the tools reload", () => {
  test("its server was removed from the config: the call is refused, not sent on the retired generation's new child", async () => {
    const dir = await makeTempDir("mcp-reload-starting-");
    const gate = path.join(dir, "gate");
    await writeFile(gate, "");
    const marker = `reload-starting-${randomUUID()}`;
    const launch = stdioFixture({ name: "gone", toolNames: ["pid"] });
    // A child that becomes the MCP server only once the gate file exists.
    const script = `while [ ! -e "$1" ]; do sleep 0.02; done; exec "$2" "$3" "$4" "$5" "$0"`;
    const server = { type: "stdio", command: "sh", args: ["-c", script, marker, gate, launch.command, ...launch.args], env: launch.env };
    const configPath = await writeConfig(dir, { mcpServers: { gone: server } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-reload-starting-data-") });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      expect(pidsWithMarker(marker)).toHaveLength(1); // discovery's child
      await rm(gate);
      const call = callThroughGraph(graph, "gone_pid", {}, { context: { user_id: "u" }, configurable: { thread_id: "t" } });
      // The thread's child waits at the gate: the call waits for its session, nothing sent yet.
      expect(await waitUntil(() => pidsWithMarker(marker).length === 2, 30_000)).toBe(true);
      await writeFile(configPath, JSON.stringify({ mcpServers: {} }));
      expect(await toolkit.getTools()).toEqual([]);
      await writeFile(gate, "");
      const message = await call;
      expect({ status: message.status, content: message.content }).toEqual({
        status: "error",
        content: "MCP tool 'pid' on server 'gone' was not called: the server's configuration changed while the call was being prepared; call it again",
      });
    } finally {
      await writeFile(gate, "");
      await toolkit.close();
    }
  });
});

describe("close() while the tools load", () => {
  test.each([
    ["while its child starts", true],
    ["before discovery began", false],
  ])("a server that never answers initialize (no session_init_timeout), closed %s: close() ends the load and any child", async (_label, started) => {
    const marker = `close-loading-${randomUUID()}`;
    const launch = stdioFixture({ name: "hung", mode: "hang" });
    const configPath = await writeConfig(await makeTempDir("mcp-close-loading-"), {
      mcpServers: { hung: { type: "stdio", ...launch, args: [...launch.args, marker], session_init_timeout: null } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-close-loading-data-") });
    const loading = toolkit.getTools();
    loading.catch(() => undefined);
    if (started) expect(await waitUntil(() => pidsWithMarker(marker).length === 1)).toBe(true);
    try {
      await toolkit.close();
      expect(pidsWithMarker(marker)).toEqual([]);
      await expect(loading).rejects.toBeInstanceOf(ToolkitClosedError);
    } finally {
      for (const pid of pidsWithMarker(marker)) process.kill(pid, "SIGKILL");
    }
  });
});

describe("a call still in its interceptors when the toolkit closes or its new configuration cannot be loaded", () => {
  test("close(): the call rejects with ToolkitClosedError (nothing tells the model to call again a toolkit that is gone)", async () => {
    const { state, interceptor } = holding();
    const file = await writeConfig(await makeTempDir("mcp-reload-"), { mcpServers: { remote: { type: "http", url: http.url } } });
    const toolkit = createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger(), interceptors: [interceptor] });
    const [echo] = await toolkit.getTools();
    const sentBefore = http.requests.filter((r) => findToolCall([r], "held")).length;
    const call = invoke(echo, "held", "k1");
    await state.entered;
    await toolkit.close();
    state.release();
    await expect(call).rejects.toBeInstanceOf(ToolkitClosedError);
    expect(http.requests.filter((r) => findToolCall([r], "held")).length).toBe(sentBefore);
  });

  test("a configuration that cannot be loaded: the call says so, not that the server's configuration changed", async () => {
    const { state, interceptor } = holding();
    const dir = await makeTempDir("mcp-reload-");
    const file = await writeConfig(dir, { mcpServers: { remote: { type: "http", url: http.url } } });
    const logger = new RecordingLogger();
    const toolkit = createMcpToolkit({ configPath: file, env: {}, logger, interceptors: [interceptor] });
    try {
      const [echo] = await toolkit.getTools();
      const call = invoke(echo, "held", "k2");
      await state.entered;
      await writeFile(file, '{ "mcpServers": { "remote": ');
      await expect(toolkit.getTools()).rejects.toThrow();
      state.release();
      const message = await call;
      expect(message.status).toBe("error");
      expect(message.content).toBe("MCP tool 'echo' was not called: the MCP configuration could not be loaded (see the logs)");
      expect(String(message.content)).not.toContain(dir);
      expect(logger.lines.map((l) => l.message)).toContainEqual(expect.stringContaining("could not be reloaded for a call to server 'remote'"));
    } finally {
      await toolkit.close();
    }
  });
});

describe("close() after a reload", () => {
  test("a session an earlier generation still had busy is closed too: its child is gone", async () => {
    const launch = stdioFixture({ name: "local", toolNames: ["pid", "slow"] });
    const file = await writeConfig(await makeTempDir("mcp-reload-"), {
      mcpServers: { local: { type: "stdio", ...launch, tool_call_timeout: null } },
    });
    const toolkit = createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-reload-data-") });
    const tools = await toolkit.getTools();
    const tool = (name: string) => tools.find((t) => t.name === name)!;
    const run = { configurable: { thread_id: "busy" }, context: { user_id: "u" } };
    const pid = Number(((await tool("local_pid").invoke({ type: "tool_call", id: "p", name: "local_pid", args: {} }, run)) as ToolMessage).content);
    const busy = tool("local_slow").invoke({ type: "tool_call", id: "s", name: "local_slow", args: { ms: 60_000 } }, run) as Promise<ToolMessage>;
    busy.catch(() => undefined);
    await writeFile(file, (await readFile(file, "utf8")).replace('"stdio"', '"stdio", "description": "edited"'));
    await toolkit.getTools();
    expect(alive(pid)).toBe(true);
    await toolkit.close();
    expect(await waitUntil(() => !alive(pid))).toBe(true);
    // Closed under it: the call ends as a call of a closed toolkit, as in any generation.
    await expect(busy).rejects.toBeInstanceOf(ToolkitClosedError);
  });

  test("a retired pool is kept only while it has sessions: once its last call ended, the next reload lets it go", async () => {
    const launch = stdioFixture({ name: "local", toolNames: ["pid", "slow"] });
    const file = await writeConfig(await makeTempDir("mcp-reload-"), {
      mcpServers: { local: { type: "stdio", ...launch, tool_call_timeout: null } },
    });
    const toolkit = createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-reload-data-") });
    const retired = () => [...(toolkit as unknown as { retiredPools: Set<{ live: number }> }).retiredPools];
    const retiredPools = () => retired().length;
    try {
      const tools = await toolkit.getTools();
      const tool = (name: string) => tools.find((t) => t.name === name)!;
      const run = { configurable: { thread_id: "kept" }, context: { user_id: "u" } };
      const pid = Number(((await tool("local_pid").invoke({ type: "tool_call", id: "p", name: "local_pid", args: {} }, run)) as ToolMessage).content);
      const busy = tool("local_slow").invoke({ type: "tool_call", id: "s", name: "local_slow", args: { ms: 60_000 } }, run) as Promise<ToolMessage>;
      await writeFile(file, (await readFile(file, "utf8")).replace('"stdio"', '"stdio", "description": "one"'));
      await toolkit.getTools();
      expect(retiredPools()).toBe(1);
      process.kill(pid, "SIGKILL");
      expect((await busy).status).toBe("error");
      // Its sessions still count while they close (close() waits for them); then it holds nothing.
      const [old] = retired();
      expect(await waitUntil(() => old.live === 0)).toBe(true);
      await writeFile(file, (await readFile(file, "utf8")).replace('"one"', '"two"'));
      await toolkit.getTools();
      // The pool this reload retired may be kept while its idle sessions close; the old one is let go.
      expect(retired()).not.toContain(old);
    } finally {
      await toolkit.close();
    }
  });
});

describe("close() called twice at once", () => {
  test("the second close() too resolves only once every child is gone", async () => {
    const marker = `close-twice-${randomUUID()}`;
    const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
    const file = await writeConfig(await makeTempDir("mcp-reload-"), {
      mcpServers: { local: { type: "stdio", ...launch, args: [...launch.args, marker] } },
    });
    const toolkit = createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-reload-data-") });
    try {
      const [pid] = await toolkit.getTools();
      await pid.invoke({ type: "tool_call", id: "p", name: pid.name, args: {} }, { context: { user_id: "u" }, configurable: { thread_id: "t" } });
      expect(pidsWithMarker(marker)).toHaveLength(2); // discovery's child and the thread's
      const first = toolkit.close();
      await toolkit.close();
      // Whoever awaited a close() may exit the process now.
      expect(pidsWithMarker(marker)).toEqual([]);
      await first;
    } finally {
      for (const p of pidsWithMarker(marker)) process.kill(p, "SIGKILL");
    }
  });
});

describe("a reload that fails", () => {
  test("an old tool answers with an error ToolMessage, not a throw, and shows no local path", async () => {
    const dir = await makeTempDir("mcp-reload-");
    const file = await writeConfig(dir, { mcpServers: { remote: { type: "http", url: http.url } } });
    const toolkit = createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger() });
    try {
      const [echo] = await toolkit.getTools();
      await writeFile(file, '{ "mcpServers": { "remote": ');
      await toolkit.reset();
      const message = await invoke(echo, "x", "f1");
      expect(message.status).toBe("error");
      expect(message.content).toBe("MCP tool 'echo' was not called: the MCP configuration could not be loaded (see the logs)");
      expect(String(message.content)).not.toContain(dir);
    } finally {
      await toolkit.close();
    }
  });

  test("a direct call (a durable task's submit or poll) gets the same line; the path is in the log only", async () => {
    const dir = await makeTempDir("mcp-reload-");
    const file = await writeConfig(dir, { mcpServers: { remote: { type: "http", url: http.url } } });
    const logger = new RecordingLogger();
    const toolkit = createMcpToolkit({ configPath: file, env: {}, logger });
    try {
      await toolkit.getTools();
      await writeFile(file, '{ "mcpServers": { "remote": ');
      await toolkit.reset();
      await expect(toolkit.callTool({ server: "remote", tool: "echo", args: { text: "x" } })).rejects.toThrow(
        new McpToolCallError("MCP tool 'echo' was not called: the MCP configuration could not be loaded (see the logs)"),
      );
      expect(logger.lines.some((r) => r.level === "warn" && r.message.includes(dir))).toBe(true);
    } finally {
      await toolkit.close();
    }
  });

  test("a closed toolkit is not a config failure: an old tool's call rejects with ToolkitClosedError", async () => {
    const file = await writeConfig(await makeTempDir("mcp-reload-"), { mcpServers: { remote: { type: "http", url: http.url } } });
    const toolkit = createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger() });
    const [echo] = await toolkit.getTools();
    await toolkit.close();
    await expect(invoke(echo, "x", "c1")).rejects.toBeInstanceOf(ToolkitClosedError);
  });
});

describe("close() with a call already sent or waiting for its session", () => {
  /** Starts `call` on the toolkit's one tool, closes the toolkit once `started` settles, and expects ToolkitClosedError. */
  async function closedUnder(
    server: HttpFixture,
    mcpServer: Record<string, unknown>,
    call: (tool: DynamicStructuredTool) => { done: Promise<unknown>; started: Promise<unknown> },
  ): Promise<void> {
    const configPath = await writeConfig(await makeTempDir("mcp-close-running-"), { mcpServers: { s: mcpServer } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-close-running-data-") });
    try {
      const [tool] = await toolkit.getTools();
      const { done, started } = call(tool);
      done.catch(() => undefined);
      await started;
      await toolkit.close();
      await expect(done).rejects.toBeInstanceOf(ToolkitClosedError);
    } finally {
      await toolkit.close();
      await server.close();
    }
  }

  test.each(["http", "stdio"] as const)(
    "%s: a running call rejects with ToolkitClosedError, not a text blaming the server or promising a next session",
    async (type) => {
      const server = await startHttpFixture({ name: "remote", toolNames: ["ticker"] });
      const launch = stdioFixture({ name: "local", toolNames: ["ticker"] });
      await closedUnder(server, type === "http" ? { type, url: server.url } : { type, ...launch }, (ticker) => {
        let ticked!: () => void;
        const started = new Promise<void>((resolve) => (ticked = resolve));
        const done = ticker.invoke(
          { type: "tool_call", id: "tick-1", name: ticker.name, args: { intervalMs: 10, durationMs: 600_000 } },
          { context: { user_id: "u" }, configurable: { thread_id: "t" }, writer: () => ticked() } as Record<string, unknown>,
        );
        return { done, started };
      });
    },
  );

  test("a call waiting for its new session to start rejects with ToolkitClosedError", async () => {
    const options: StreamableHttpFixtureOptions = { name: "remote", toolNames: ["echo"] };
    const server = await startHttpFixture(options);
    const perUser = { type: "http", url: server.url, session_init_timeout: null, headers_from_context: { headers: { "X-Api-Key": "api_key" } } };
    await closedUnder(server, perUser, (echo) => {
      // Discovery's session is up; the user's header set needs a session of its own, whose initialize hangs.
      options.hangOnInitialize = true;
      const started = server.waitForRequest((r) => r.rpcMethods?.includes("initialize") === true);
      const done = echo.invoke({ type: "tool_call", id: "e-1", name: echo.name, args: { text: "x" } }, {
        context: { secrets: { api_key: "k-1" } },
      } as Record<string, unknown>);
      return { done, started };
    });
  });
});
