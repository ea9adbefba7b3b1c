/**
 * The stdio child of a stateless run's temporary thread (which the LangGraph server deletes once the run ends) does not
 * wait for the bound: once nobody used it for `temporaryStdioIdleSeconds` it closes, and its thread folder goes with
 * it, temp files its server left in `.mcp/tmp` included. Never under a call, never once a kept thread's run used it,
 * never while it holds a pending durable task. The idle time passes on jest's fake clock (only this process's timers;
 * the children run in real time), switched back to the real one before waiting for a process to end.
 */
import { afterEach, describe, expect, jest, test } from "@jest/globals";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chown, mkdir, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { MemorySaver } from "@langchain/langgraph";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit, type McpToolkitOptions } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { threadPaths } from "../../lib/sessions/workspace";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { callThroughGraph, runningCall, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { alive, waitUntil } from "../fixtures/processes";
import { stdioFixture } from "../fixtures/stdio";

const FAKE: Parameters<typeof jest.useFakeTimers>[0] = { doNotFake: ["nextTick", "queueMicrotask", "setImmediate", "Date", "hrtime", "performance"] };
const SECOND = 1000;

const toolkits: McpToolkit[] = [];
const pools: SessionPool[] = [];
afterEach(async () => {
  jest.useRealTimers();
  await Promise.all([...toolkits.splice(0).map((t) => t.close()), ...pools.splice(0).map((p) => p.close())]);
});

const launch = stdioFixture({ name: "local", toolNames: ["pid", "fs_ops", "await_file"] });
// tsx keeps a compile cache in its TMPDIR: in the host's, what the thread's temp folder holds is what the tools wrote.
const serverEnv = { ...launch.env, TMPDIR: tmpdir() };

interface Kit {
  dataDir: string;
  /** A run of the LangGraph server on `thread`: stateless (no checkpointer, a temporary thread) or on a kept thread. */
  call(thread: string, tool: string, args?: Record<string, unknown>, kept?: boolean): Promise<string>;
  pid(thread: string, kept?: boolean): Promise<number>;
  stateless: ToolNodeGraph;
}

const run = (thread: string) => ({ configurable: { thread_id: thread, graph_id: "agent", assistant_id: "a-1" } });

async function kit(options: Partial<McpToolkitOptions> = {}): Promise<Kit> {
  const dataDir = await makeTempDir("mcp-temporary-idle-");
  const configPath = await writeConfig(await makeTempDir("mcp-temporary-idle-cfg-"), { mcpServers: { local: { type: "stdio", ...launch, env: serverEnv, tool_call_timeout: null } } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, ...options });
  toolkits.push(toolkit);
  const tools = await toolkit.getTools();
  const stateless = toolNodeGraph(tools);
  const stateful = toolNodeGraph(tools, new MemorySaver());
  const call = async (thread: string, tool: string, args: Record<string, unknown> = {}, kept = false): Promise<string> => {
    const message = await callThroughGraph(kept ? stateful : stateless, `local_${tool}`, args, run(thread));
    expect(message.status).toBe("success");
    return String(message.content);
  };
  return { dataDir, call, pid: async (thread, kept) => Number(await call(thread, "pid", {}, kept)), stateless };
}

const threadFolder = (dataDir: string, thread: string) => path.dirname(threadPaths(dataDir, thread).userData);

/** Back on the real clock, waits for `pid` to end and the thread folder to go. */
async function closedAndRemoved(pid: number, dataDir: string, thread: string): Promise<boolean> {
  jest.useRealTimers();
  return waitUntil(() => !alive(pid) && !existsSync(threadFolder(dataDir, thread)), 30_000);
}

describe("an idle stdio child of a stateless run", () => {
  test("closes 300 s (the default) after its last use, each use restarting the count; its folder and temp files go; a kept thread's child stays", async () => {
    jest.useFakeTimers(FAKE);
    const k = await kit();
    const kept = await k.pid("kept-1", true);
    const temporary = await k.pid("temp-1");
    // A temp file its server left, in a folder of its own.
    await k.call("temp-1", "fs_ops", { ops: [{ op: "write", path: ".mcp/tmp/cache/deep/blob", content: "x" }] });
    jest.advanceTimersByTime(200 * SECOND);
    expect(await k.pid("temp-1")).toBe(temporary);
    jest.advanceTimersByTime(200 * SECOND); // 400 s after its first use, 200 s after its last
    expect(await k.pid("temp-1")).toBe(temporary);
    jest.advanceTimersByTime(299 * SECOND);
    expect(await k.pid("temp-1")).toBe(temporary);
    jest.advanceTimersByTime(301 * SECOND);
    expect(await closedAndRemoved(temporary, k.dataDir, "temp-1")).toBe(true);
    expect(alive(kept)).toBe(true);
    expect(existsSync(threadPaths(k.dataDir, "kept-1").workspace)).toBe(true);
  });

  test("is never closed under a running call: the count that ends mid-call does nothing, the call's end restarts it", async () => {
    jest.useFakeTimers(FAKE);
    const k = await kit({ temporaryStdioIdleSeconds: 60 });
    const temporary = await k.pid("long");
    const gate = path.join(threadPaths(k.dataDir, "long").tmp, "gate", "open");
    await mkdir(path.dirname(gate));
    const { done } = await runningCall(k.stateless, "local_await_file", { path: ".mcp/tmp/gate/open" }, run("long"));
    jest.advanceTimersByTime(600 * SECOND);
    await writeFile(gate, "");
    expect((await done).status).toBe("success");
    jest.advanceTimersByTime(59 * SECOND);
    expect(await k.pid("long")).toBe(temporary);
    jest.advanceTimersByTime(61 * SECOND);
    expect(await closedAndRemoved(temporary, k.dataDir, "long")).toBe(true);
  });

  test("used again by a kept thread's run, it is an ordinary child: no idle count closes it", async () => {
    jest.useFakeTimers(FAKE);
    const k = await kit({ temporaryStdioIdleSeconds: 60 });
    const mixed = await k.pid("mixed");
    expect(await k.pid("mixed", true)).toBe(mixed);
    jest.advanceTimersByTime(24 * 3600 * SECOND);
    // The same child: had the count closed it, the pool would have started another.
    expect(await k.pid("mixed")).toBe(mixed);
  });

  test("temporaryStdioIdleSeconds null keeps it until the bound, a reload or close()", async () => {
    jest.useFakeTimers(FAKE);
    const k = await kit({ temporaryStdioIdleSeconds: null });
    const temporary = await k.pid("temp-null");
    jest.advanceTimersByTime(24 * 3600 * SECOND);
    expect(await k.pid("temp-null")).toBe(temporary);
  });
});

describe("an idle stdio child of a stateless run holding a pending durable task", () => {
  test("is kept while it holds it; the count starts again when its last pending task ends", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...launch, env: serverEnv });
    const pool = new SessionPool(new RecordingLogger(), { temporaryStdioIdleMs: 60 * SECOND, dataDir: await makeTempDir("mcp-temporary-idle-task-") });
    pools.push(pool);
    const opts = { headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("u", "temp-task", true) };
    jest.useFakeTimers(FAKE);
    const lease = await pool.acquire("local", server, opts);
    const pid = lease.session.pid!;
    lease.release();
    lease.session.holdTask!("job-1", true);
    lease.session.holdTask!("job-2", true);
    jest.advanceTimersByTime(24 * 3600 * SECOND);
    expect(pool.size()).toBe(1);
    lease.session.holdTask!("job-1", false);
    jest.advanceTimersByTime(24 * 3600 * SECOND);
    expect(pool.size()).toBe(1);
    lease.session.holdTask!("job-2", false);
    jest.advanceTimersByTime(59 * SECOND);
    expect(pool.size()).toBe(1);
    jest.advanceTimersByTime(2 * SECOND);
    expect(pool.size()).toBe(0);
    jest.useRealTimers();
    expect(await waitUntil(() => !alive(pid), 30_000)).toBe(true);
  });
});

describe("the temp folder of a temporary thread whose last session closed", () => {
  test("is emptied so the folder goes: links inside are removed, never followed; an ordinary thread's temp files and a workspace file stay", async () => {
    const k = await kit();
    const outside = await makeTempDir("mcp-temporary-idle-outside-");
    await writeFile(path.join(outside, "keep.txt"), "keep");
    await k.call("gone", "fs_ops", {
      ops: [
        { op: "write", path: ".mcp/tmp/a.txt", content: "a" },
        { op: "write", path: ".mcp/tmp/sub/deep/b.txt", content: "b" },
        { op: "symlink", path: ".mcp/tmp/out-dir", to: outside },
        { op: "symlink", path: ".mcp/tmp/sub/out-file", to: path.join(outside, "keep.txt") },
      ],
    });
    const ordinary = threadPaths(k.dataDir, "ordinary");
    await k.call("ordinary", "fs_ops", { ops: [{ op: "write", path: ".mcp/tmp/left", content: "l" }] }, true);
    const withFile = threadPaths(k.dataDir, "with-file");
    await k.call("with-file", "fs_ops", { ops: [{ op: "write", path: "notes.txt", content: "n" }, { op: "write", path: ".mcp/tmp/t", content: "t" }] });
    await toolkits.pop()!.close();
    expect(existsSync(threadFolder(k.dataDir, "gone"))).toBe(false);
    expect(await readdir(outside)).toEqual(["keep.txt"]);
    expect(existsSync(path.join(ordinary.tmp, "left"))).toBe(true);
    // Not a skeleton but for its temp folder: nothing of it is touched.
    expect(existsSync(path.join(withFile.workspace, "notes.txt")) && existsSync(path.join(withFile.tmp, "t"))).toBe(true);
  });

  test("a process given it as its temp folder, or another user's entry in it, keeps it and what is in it", async () => {
    const k = await kit();
    const used = threadPaths(k.dataDir, "used");
    await k.call("used", "fs_ops", { ops: [{ op: "write", path: ".mcp/tmp/in-use", content: "u" }] });
    // A process (another host's child, one a server left) working elsewhere with its temp files there.
    const holder = spawn("sleep", ["600"], { cwd: tmpdir(), env: { ...process.env, TMPDIR: used.tmp }, stdio: "ignore" });
    await new Promise((resolve) => holder.once("spawn", resolve));
    const foreign = threadPaths(k.dataDir, "foreign");
    await k.call("foreign", "fs_ops", { ops: [{ op: "write", path: ".mcp/tmp/mine", content: "m" }, { op: "write", path: ".mcp/tmp/theirs", content: "t" }] });
    const root = process.geteuid?.() === 0;
    if (root) await chown(path.join(foreign.tmp, "theirs"), 54_321, 54_321);
    try {
      await toolkits.pop()!.close();
      expect(existsSync(path.join(used.tmp, "in-use"))).toBe(true);
      if (root) {
        // Only what is the host user's goes; the rest, and the folder, stay.
        expect(await readdir(foreign.tmp)).toEqual(["theirs"]);
      }
    } finally {
      holder.kill("SIGKILL");
    }
  });
});
