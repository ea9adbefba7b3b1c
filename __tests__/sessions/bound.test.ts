/**
 * The stdio bound and the life of a child around it, counted in live processes (not pool entries): the LRU bound
 * at its default of 256, busy children evicted after their call, and creations that are abandoned, fail or are
 * overtaken by close() leaving no child behind.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { DEFAULT_MAX_STDIO_SESSIONS } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolCalls, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";
import { alive, pidsWithMarker, waitUntil } from "../fixtures/processes";

const SH_SERVER = path.join(__dirname, "..", "fixtures", "sh-server.sh");
const toolkits: McpToolkit[] = [];
afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((t) => t.close()));
});

async function toolkitWith(servers: Record<string, object>, options: { maxStdioSessions?: number } = {}) {
  const configPath = await writeConfig(await makeTempDir("mcp-bound-"), { mcpServers: servers });
  const logger = new RecordingLogger();
  const toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir: await makeTempDir("mcp-bound-data-"), ...options });
  toolkits.push(toolkit);
  return { toolkit, logger };
}

/**
 * Up to 30 s: on a loaded 2-core machine a `bash -c` child takes seconds to show up (and to go). A wait on the processes
 * of a marker that runs out shows their command lines.
 */
async function waitFor(condition: () => boolean, marker?: string): Promise<void> {
  if (await waitUntil(condition, 30_000)) return;
  expect(marker === undefined ? "the condition held" : { processes: commandLines(marker) }).toBe("the condition held");
}

function commandLines(marker: string): string[] {
  return pidsWithMarker(marker).map((pid) => {
    try {
      return `${pid}: ${readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ")}`;
    } catch {
      return `${pid}: gone`;
    }
  });
}

const scope = (thread: string) => ({ context: { user_id: "u" }, configurable: { thread_id: thread } });

async function pidIn(graph: ToolNodeGraph, tool: string, thread: string): Promise<number> {
  const message = await callThroughGraph(graph, tool, {}, scope(thread));
  expect(message.status).toBe("success");
  return Number(message.content);
}

describe("the LRU bound on live stdio children", () => {
  test(`300 scopes with the default bound (${DEFAULT_MAX_STDIO_SESSIONS}) leave exactly ${DEFAULT_MAX_STDIO_SESSIONS} live children; the least recently used are the ones gone`, async () => {
    // The SDK fixture costs ~65 MB per child; 256 of them would not fit a CI machine, this bash server does.
    const { toolkit } = await toolkitWith({ sh: { type: "stdio", command: "bash", args: [SH_SERVER] } });
    const graph = toolNodeGraph(await toolkit.getTools());
    const pids: number[] = [];
    for (let i = 0; i < 255; i += 1) pids.push(await pidIn(graph, "sh_pid", `s-${i}`));
    // Discovery's child (the default scope) is the least recently used; touching s-0 makes it recent again.
    expect(await pidIn(graph, "sh_pid", "s-0")).toBe(pids[0]);
    for (let i = 255; i < 300; i += 1) pids.push(await pidIn(graph, "sh_pid", `s-${i}`));
    expect(new Set(pids).size).toBe(300);
    const survivors = [pids[0], ...pids.slice(45)];
    const evicted = pids.slice(1, 45);
    await waitFor(() => evicted.every((p) => !alive(p)));
    expect(survivors.filter(alive)).toHaveLength(DEFAULT_MAX_STDIO_SESSIONS);
    // An evicted scope starts a new child; a surviving one still has its own.
    expect(await pidIn(graph, "sh_pid", "s-299")).toBe(pids[299]);
    expect(evicted).not.toContain(await pidIn(graph, "sh_pid", "s-1"));
    // 300 process spawns: generous on a loaded 2-core machine; nothing here is timed.
  }, 240_000);

  /** A call on `thread` that reports progress until its run is cancelled: its child is busy meanwhile. */
  async function busyIn(graph: ToolNodeGraph, thread: string): Promise<{ stop: () => Promise<void> }> {
    const controller = new AbortController();
    const stream = await graph.stream(
      { messages: [toolCalls([{ name: "local_ticker", args: { intervalMs: 20, durationMs: 60_000 } }])] },
      { ...scope(thread), streamMode: "custom", signal: controller.signal },
    );
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next(); // the first progress event: the call runs on the child
    return {
      stop: async () => {
        controller.abort(new Error("done waiting"));
        await expect((async () => { while (!(await iterator.next()).done); })()).rejects.toThrow();
      },
    };
  }

  test("at the bound an idle child is closed, not a less recently used one in the middle of a call", async () => {
    const marker = `bound-idle-first-${randomUUID()}`;
    const launch = stdioFixture({ name: "local", toolNames: ["pid", "ticker"] });
    const { toolkit } = await toolkitWith({ local: { type: "stdio", ...launch, args: [...launch.args, marker] } }, { maxStdioSessions: 2 });
    const graph = toolNodeGraph(await toolkit.getTools());
    const a = await pidIn(graph, "local_pid", "a");
    const running = await busyIn(graph, "a");
    const b = await pidIn(graph, "local_pid", "b");
    // "a" is the least recently used, but busy: "b", idle, makes room for "c".
    const c = await pidIn(graph, "local_pid", "c");
    await waitFor(() => !alive(b));
    expect(alive(a)).toBe(true);
    expect(await pidIn(graph, "local_pid", "a")).toBe(a);
    await running.stop();
    await waitFor(() => pidsWithMarker(marker).length === 2, marker);
    expect(pidsWithMarker(marker).sort()).toEqual([a, c].sort());
  });

  test("an evicted child whose call is still running (every child is busy) closes after that call; its scope's next call starts a new child", async () => {
    const marker = `bound-busy-${randomUUID()}`;
    const launch = stdioFixture({ name: "local", toolNames: ["pid", "ticker"] });
    const { toolkit } = await toolkitWith({ local: { type: "stdio", ...launch, args: [...launch.args, marker] } }, { maxStdioSessions: 1 });
    const graph = toolNodeGraph(await toolkit.getTools());
    const busy = await pidIn(graph, "local_pid", "a");
    // A call on "a" that runs until the run is cancelled: no child is idle when "b" needs room.
    const running = await busyIn(graph, "a");
    const b = await pidIn(graph, "local_pid", "b");
    expect(alive(busy)).toBe(true);
    const replacement = await pidIn(graph, "local_pid", "a");
    expect(replacement).not.toBe(busy);
    expect(alive(busy)).toBe(true);
    await running.stop();
    // The replacement made room once it was up: "b", idle, closes too (its exit is not awaited by the call that
    // evicted it).
    await waitFor(() => !alive(busy) && !alive(b) && pidsWithMarker(marker).length === 1, marker);
    expect(pidsWithMarker(marker)).toEqual([replacement]);
  });
});

describe("creations that do not finish leave no child", () => {
  test("a creation that fails (initialize times out) closes its child", async () => {
    const marker = `bound-fail-${randomUUID()}`;
    const launch = stdioFixture({ name: "late", initDelayMs: 60_000, toolNames: ["pid"] });
    const { toolkit, logger } = await toolkitWith({
      late: { type: "stdio", ...launch, args: [...launch.args, marker], session_init_timeout: 0.5 },
    });
    expect(await toolkit.getTools()).toEqual([]);
    expect(logger.messages("warn").join("\n")).toMatch(/Skipping MCP server 'late' after tool discovery timed out/);
    await waitFor(() => pidsWithMarker(marker).length === 0, marker);
  });

  test("a creation every waiter gave up on (the run was cancelled) is abandoned and its child closed", async () => {
    const marker = `bound-cancel-${randomUUID()}`;
    const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
    const { toolkit } = await toolkitWith({ local: { type: "stdio", ...launch, args: [...launch.args, marker] } });
    const graph = toolNodeGraph(await toolkit.getTools());
    const discoveryChild = pidsWithMarker(marker);
    expect(discoveryChild).toHaveLength(1);
    const controller = new AbortController();
    const run = graph.invoke({ messages: [toolCalls([{ name: "local_pid", args: {} }])] }, { ...scope("cancelled"), signal: controller.signal });
    // Abort as soon as the new child exists, before it has answered initialize.
    await waitFor(() => pidsWithMarker(marker).length === 2, marker);
    controller.abort(new Error("user cancelled"));
    await expect(run).rejects.toThrow();
    await waitFor(() => pidsWithMarker(marker).length === 1, marker);
    expect(pidsWithMarker(marker)).toEqual(discoveryChild);
    // The scope works afterwards, on a new child.
    expect(await pidIn(graph, "local_pid", "cancelled")).not.toBe(discoveryChild[0]);
  });

  test("a creation cancelled while another scope's creation comes up at the bound costs no third scope its child", async () => {
    const marker = `bound-pending-${randomUUID()}`;
    // A thread named hang-* gets a child that never answers initialize; every other thread the bash server.
    const script = `case "$PWD" in */threads/hang-*) exec -a "hang-$1" sleep 600;; esac; exec bash "$0" "$1"`;
    const { toolkit } = await toolkitWith({ sh: { type: "stdio", command: "bash", args: ["-c", script, SH_SERVER, marker] } }, { maxStdioSessions: 3 });
    const graph = toolNodeGraph(await toolkit.getTools()); // discovery's child, in the default scope
    const a = await pidIn(graph, "sh_pid", "a");
    const b = await pidIn(graph, "sh_pid", "b"); // three live: the bound
    const controller = new AbortController();
    const hung = graph.invoke({ messages: [toolCalls([{ name: "sh_pid", args: {} }])] }, { ...scope("hang-1"), signal: controller.signal });
    // hang-1's child is up (it shows as `hang-<marker> 600` once it has become the sleeping process).
    await waitFor(() => commandLines(marker).some((line) => line.includes(` hang-${marker} 600`)), marker);
    // "c" comes up while hang-1 is starting: room is made for it alone (the default scope's child goes).
    const c = await pidIn(graph, "sh_pid", "c");
    controller.abort(new Error("user cancelled"));
    await expect(hung).rejects.toThrow();
    await waitFor(() => pidsWithMarker(marker).length === 3, marker);
    expect(pidsWithMarker(marker).sort()).toEqual([a, b, c].sort());
    expect(await pidIn(graph, "sh_pid", "a")).toBe(a);
  });

  test("close() while a child is being created leaves no child and does not resurrect the session", async () => {
    const marker = `bound-close-${randomUUID()}`;
    const launch = stdioFixture({ name: "slow", initDelayMs: 800, toolNames: ["pid"] });
    const { toolkit } = await toolkitWith({ slow: { type: "stdio", ...launch, args: [...launch.args, marker] } });
    const graph = toolNodeGraph(await toolkit.getTools());
    const call = callThroughGraph(graph, "slow_pid", {}, scope("closing"));
    await waitFor(() => pidsWithMarker(marker).length === 2, marker);
    await toolkit.close();
    const message = await call;
    expect(message.status).toBe("error");
    await waitFor(() => pidsWithMarker(marker).length === 0, marker);
  });
});
