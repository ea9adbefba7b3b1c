/**
 * Calls and sessions across a config reload: a call still in its interceptors when the tools reload goes on in the
 * new generation when its server's connection settings are unchanged, and is refused unsent otherwise; close() also
 * closes sessions that earlier generations still had busy; a reload that fails gives old tools an error message.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { readFile, writeFile } from "node:fs/promises";
import type { ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createMcpToolkit, RecordingLogger, ToolkitClosedError, type McpToolInterceptor } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, type HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { stdioFixture } from "../fixtures/stdio";
import { alive, waitUntil } from "../fixtures/processes";

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
    const settled = busy.then((m) => m.status);
    await writeFile(file, (await readFile(file, "utf8")).replace('"stdio"', '"stdio", "description": "edited"'));
    await toolkit.getTools();
    expect(alive(pid)).toBe(true);
    await toolkit.close();
    expect(await waitUntil(() => !alive(pid))).toBe(true);
    expect(await settled).toBe("error");
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

  test("a closed toolkit is not a config failure: an old tool's call rejects with ToolkitClosedError", async () => {
    const file = await writeConfig(await makeTempDir("mcp-reload-"), { mcpServers: { remote: { type: "http", url: http.url } } });
    const toolkit = createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger() });
    const [echo] = await toolkit.getTools();
    await toolkit.close();
    await expect(invoke(echo, "x", "c1")).rejects.toBeInstanceOf(ToolkitClosedError);
  });
});
