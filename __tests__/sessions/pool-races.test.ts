/**
 * Races around stdio session creation, eviction and closing, with real child processes through ToolNode.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { randomUUID } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, runningCall, toolCalls, toolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";
import { alive, pidsWithMarker, waitUntil } from "../fixtures/processes";

const SH_SERVER = path.join(__dirname, "..", "fixtures", "sh-server.sh");
const toolkits: McpToolkit[] = [];
afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((t) => t.close()));
});

async function toolkitWith(servers: Record<string, object>, options: { maxStdioSessions?: number; stdioMaxMessageBytes?: number } = {}) {
  const configPath = await writeConfig(await makeTempDir("mcp-races-"), { mcpServers: servers });
  const logger = new RecordingLogger();
  const toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir: await makeTempDir("mcp-races-data-"), ...options });
  toolkits.push(toolkit);
  return { toolkit, logger, configPath };
}

async function waitFor(condition: () => boolean): Promise<void> {
  expect(await waitUntil(condition)).toBe(true);
}

const scope = (thread: string) => ({ context: { user_id: "u" }, configurable: { thread_id: thread } });

/** The pool's entry for a scope's stdio session (test observation only). */
function inFlight(toolkit: McpToolkit, thread: string): number | undefined {
  const pool = (toolkit as unknown as { current: { pool: { entries: Map<string, { key: string; inFlight: number }> } } }).current.pool;
  for (const entry of pool.entries.values()) if (entry.key.includes(JSON.stringify(["u", thread]))) return entry.inFlight;
  return undefined;
}

describe("concurrent creation for one scope", () => {
  test("the first creator's run is cancelled while another waits: the waiter gets the one child", async () => {
    const marker = `races-dedup-${randomUUID()}`;
    const launch = stdioFixture({ name: "slow", initDelayMs: 1500, toolNames: ["pid"] });
    const { toolkit } = await toolkitWith({ slow: { type: "stdio", ...launch, args: [...launch.args, marker] } });
    const graph = toolNodeGraph(await toolkit.getTools());
    const controller = new AbortController();
    const first = graph.invoke({ messages: [toolCalls([{ name: "slow_pid", args: {} }])] }, { ...scope("t"), signal: controller.signal });
    first.catch(() => undefined);
    const second = callThroughGraph(graph, "slow_pid", {}, scope("t"));
    await waitFor(() => inFlight(toolkit, "t") === 2);
    controller.abort(new Error("first cancelled"));
    await expect(first).rejects.toThrow();
    const message = await second;
    expect(message.status).toBe("success");
    const pid = Number(message.content);
    expect(pidsWithMarker(marker)).toContain(pid);
    expect(pidsWithMarker(marker)).toHaveLength(2); // discovery's and the scope's
  });
});

describe("close() during a creation two calls wait for", () => {
  test("no child is left, no unhandled rejection", async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on("unhandledRejection", onRejection);
    try {
      const marker = `races-close-${randomUUID()}`;
      const launch = stdioFixture({ name: "slow", initDelayMs: 1500, toolNames: ["pid"] });
      const { toolkit } = await toolkitWith({ slow: { type: "stdio", ...launch, args: [...launch.args, marker] } });
      const graph = toolNodeGraph(await toolkit.getTools());
      const a = callThroughGraph(graph, "slow_pid", {}, scope("c")).then(
        (m) => m,
        (e: unknown) => e,
      );
      const b = callThroughGraph(graph, "slow_pid", {}, scope("c")).then(
        (m) => m,
        (e: unknown) => e,
      );
      await waitFor(() => inFlight(toolkit, "c") === 2 && pidsWithMarker(marker).length === 2);
      await toolkit.close();
      expect(pidsWithMarker(marker)).toEqual([]);
      await a;
      await b;
      await new Promise((resolve) => setImmediate(resolve));
      expect(rejections).toEqual([]);
    } finally {
      process.off("unhandledRejection", onRejection);
    }
  });
});

describe("a config edit while a scope's child is being created", () => {
  test("the call runs on the new generation; the old generation's children are all gone", async () => {
    const marker = `races-reload-${randomUUID()}`;
    const launch = stdioFixture({ name: "slow", initDelayMs: 1000, toolNames: ["pid"] });
    const { toolkit, configPath } = await toolkitWith({ slow: { type: "stdio", ...launch, args: [...launch.args, marker] } });
    const graph = toolNodeGraph(await toolkit.getTools());
    const oldDiscovery = pidsWithMarker(marker);
    expect(oldDiscovery).toHaveLength(1);
    const call = callThroughGraph(graph, "slow_pid", {}, scope("r"));
    await waitFor(() => inFlight(toolkit, "r") === 1 && pidsWithMarker(marker).length === 2);
    const oldScope = pidsWithMarker(marker).filter((p) => !oldDiscovery.includes(p));
    await writeFile(configPath, (await readFile(configPath, "utf8")).replace('"stdio"', '"stdio", "description": "edited"'));
    await toolkit.getTools();
    const message = await call;
    expect(message.status).toBe("success");
    const pid = Number(message.content);
    expect(oldScope).not.toContain(pid);
    await waitFor(() => [...oldDiscovery, ...oldScope].every((p) => !alive(p)));
    expect(pidsWithMarker(marker)).toHaveLength(2);
    await toolkit.close();
    expect(pidsWithMarker(marker)).toEqual([]);
  });
});

describe("an evicted child whose call is still running", () => {
  test("the call's answer is delivered, then the child closes", async () => {
    const marker = `races-evict-${randomUUID()}`;
    const launch = stdioFixture({ name: "local", toolNames: ["pid", "ticker"] });
    // Bound 1: with "a" busy, no idle child can make room for "b" (idle ones would go first).
    const { toolkit } = await toolkitWith({ local: { type: "stdio", ...launch, args: [...launch.args, marker] } }, { maxStdioSessions: 1 });
    const graph = toolNodeGraph(await toolkit.getTools());
    const busy = Number((await callThroughGraph(graph, "local_pid", {}, scope("a"))).content);
    const { done } = await runningCall(graph, "local_ticker", { intervalMs: 50, durationMs: 4000 }, scope("a"));
    const b = Number((await callThroughGraph(graph, "local_pid", {}, scope("b"))).content);
    const message = await done;
    expect(message.status).toBe("success");
    expect(String(message.content)).toMatch(/^ticked \d+$/);
    await waitFor(() => pidsWithMarker(marker).length === 1);
    expect(pidsWithMarker(marker)).toEqual([b]);
    expect(b).not.toBe(busy);
  });
});

describe("a child writing garbage", () => {
  test("non-JSON lines and an oversized line on stdout, a huge line on stderr: the session works", async () => {
    const script = `printf 'not json\\n{"half":\\n'; head -c 300000 /dev/zero | tr '\\\\0' x; echo; head -c 300000 /dev/zero | tr '\\\\0' y >&2; echo >&2; exec bash "$0"`;
    const { toolkit, logger } = await toolkitWith({ g: { type: "stdio", command: "bash", args: ["-c", script, SH_SERVER] } }, { stdioMaxMessageBytes: 100_000 });
    const graph = toolNodeGraph(await toolkit.getTools());
    const message = await callThroughGraph(graph, "g_pid", {}, scope("g"));
    expect(message.status).toBe("success");
    expect(logger.messages().every((m) => m.length < 2000)).toBe(true);
  });
});

describe("the bound under concurrent scopes", () => {
  test("12 scopes starting at once with bound 3: every call answers, exactly 3 live children remain", async () => {
    const { toolkit } = await toolkitWith({ sh: { type: "stdio", command: "bash", args: [SH_SERVER] } }, { maxStdioSessions: 3 });
    const graph = toolNodeGraph(await toolkit.getTools());
    const discovery = Number((await callThroughGraph(graph, "sh_pid", {})).content);
    const messages = await Promise.all(Array.from({ length: 12 }, (_, i) => callThroughGraph(graph, "sh_pid", {}, scope(`c-${i}`))));
    expect(messages.map((m) => m.status)).toEqual(Array(12).fill("success"));
    const pids = [discovery, ...messages.map((m) => Number(m.content))];
    expect(new Set(pids).size).toBe(13);
    await waitFor(() => pids.filter(alive).length <= 3);
    expect(pids.filter(alive)).toHaveLength(3);
  });
});

describe("close() while tools are being discovered", () => {
  test("no child remains and getTools() rejects, no unhandled rejection", async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on("unhandledRejection", onRejection);
    try {
      const marker = `races-discovery-${randomUUID()}`;
      const launch = stdioFixture({ name: "slow", initDelayMs: 1500, toolNames: ["pid"] });
      const { toolkit } = await toolkitWith({ slow: { type: "stdio", ...launch, args: [...launch.args, marker] } });
      const tools = toolkit.getTools();
      tools.catch(() => undefined);
      await waitFor(() => pidsWithMarker(marker).length === 1);
      await toolkit.close();
      expect(pidsWithMarker(marker)).toEqual([]);
      await expect(tools).rejects.toThrow();
      await new Promise((resolve) => setImmediate(resolve));
      expect(rejections).toEqual([]);
    } finally {
      process.off("unhandledRejection", onRejection);
    }
  });
});

describe("a child that closes its stdin and runs on", () => {
  test("it can never receive a request again: the scope's next calls get a new child", async () => {
    const marker = `races-stdin-${randomUUID()}`;
    const launch = stdioFixture({ name: "closer", toolNames: ["pid", "close_stdin"] });
    const { toolkit } = await toolkitWith({ closer: { type: "stdio", ...launch, args: [...launch.args, marker], tool_call_timeout: 600 } });
    const graph = toolNodeGraph(await toolkit.getTools());
    const first = await callThroughGraph(graph, "closer_close_stdin", {}, scope("s"));
    expect(first.status).toBe("success");
    const pid = Number(first.content);
    const second = await callThroughGraph(graph, "closer_pid", {}, scope("s"));
    const third = await callThroughGraph(graph, "closer_pid", {}, scope("s"));
    expect([second.status, second.content]).toEqual(["error", expect.stringContaining("connection to the server closed")]);
    expect(third.status).toBe("success");
    expect(Number(third.content)).not.toBe(pid);
    await waitFor(() => !alive(pid));
  });
});
