/**
 * The stdio child of a stateless run's temporary thread (which the LangGraph server deletes once the run ends) does not
 * wait for the bound: once nobody used it for `temporaryStdioIdleSeconds` it closes, and its thread folder goes with
 * it, temp files its server left in `.mcp/tmp` included. Never under a call, never once a kept thread's run used it,
 * never while it holds a pending durable task. The idle time passes on jest's fake clock (only this process's timers;
 * the children run in real time), switched back to the real one before waiting for a process to end.
 */
import { afterEach, beforeAll, describe, expect, jest, test } from "@jest/globals";
import { spawn } from "node:child_process";
import { closeSync, existsSync, openSync } from "node:fs";
import { chown, mkdir, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { MemorySaver } from "@langchain/langgraph";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit, type McpToolkitOptions } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { endOrphanedSessionsOnce } from "../../lib/sessions/session-processes";
import { workspaceSessionCount } from "../../lib/sessions/workspace-secrets";
import { sessionScope } from "../../lib/sessions/scope";
import { threadPaths } from "../../lib/sessions/workspace";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { callThroughGraph, runningCall, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { alive, orphanOfGoneHost, waitUntil } from "../fixtures/processes";
import { stdioFixture } from "../fixtures/stdio";

const FAKE: Parameters<typeof jest.useFakeTimers>[0] = { doNotFake: ["nextTick", "queueMicrotask", "setImmediate", "Date", "hrtime", "performance"] };
const SECOND = 1000;

// The first stdio start of this process waits for the sweep of the processes a killed host left, which polls them with
// `setTimeout` until they are gone: a faked one would never fire. It runs here, on the real clock, and has one to end (as
// another test file's killed host, or one on the same machine, may leave).
beforeAll(async () => {
  const orphan = orphanOfGoneHost();
  await endOrphanedSessionsOnce(new RecordingLogger());
  expect(await orphan.exit).toEqual([null, "SIGTERM"]);
});

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

  test("a server run without a thread id uses the default thread, which is not temporary: no idle count closes its child", async () => {
    jest.useFakeTimers(FAKE);
    const k = await kit({ temporaryStdioIdleSeconds: 60 });
    // A user of its own: not the child discovery started on the default user and thread.
    const threadless = { configurable: { graph_id: "agent", assistant_id: "a-1", langgraph_auth_user_id: "alice" } };
    const pid = async () => Number((await callThroughGraph(k.stateless, "local_pid", {}, threadless)).content);
    const first = await pid();
    jest.advanceTimersByTime(24 * 3600 * SECOND);
    expect(await pid()).toBe(first);
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

describe("an idle stdio child of a stateless run still going", () => {
  test("is kept while a call of its thread runs on another server's child; the count restarts after it", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...launch, env: serverEnv });
    const pool = new SessionPool(new RecordingLogger(), { temporaryStdioIdleMs: 60 * SECOND, dataDir: await makeTempDir("mcp-temporary-idle-going-") });
    pools.push(pool);
    const opts = { headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("u", "going", true) };
    jest.useFakeTimers(FAKE);
    // A REPL the run set up, then a long research call on another server of the same run.
    const repl = await pool.acquire("local", server, opts);
    const pid = repl.session.pid!;
    repl.release();
    const research = await pool.acquire("other", server, opts);
    jest.advanceTimersByTime(3600 * SECOND);
    expect(pool.size()).toBe(2);
    research.release();
    jest.advanceTimersByTime(121 * SECOND);
    expect(pool.size()).toBe(0);
    jest.useRealTimers();
    expect(await waitUntil(() => !alive(pid), 30_000)).toBe(true);
  });
});

describe("an idle stdio child of a stateless run that crashes", () => {
  test("leaves no idle count behind; when that count would have ended, the scope's new child is kept and nothing is logged", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...launch, env: serverEnv });
    const logger = new RecordingLogger();
    const pool = new SessionPool(logger, { temporaryStdioIdleMs: 60 * SECOND, dataDir: await makeTempDir("mcp-temporary-idle-crash-") });
    pools.push(pool);
    const opts = { headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("u", "crash", true) };
    jest.useFakeTimers(FAKE);
    const lease = await pool.acquire("local", server, opts);
    const timers = jest.getTimerCount();
    lease.release();
    expect(jest.getTimerCount()).toBe(timers + 1); // its idle count
    jest.advanceTimersByTime(30 * SECOND);
    process.kill(lease.session.pid!, "SIGKILL");
    // The pool hears of the exit through the child's pipes (setImmediate is not faked).
    while (pool.live > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    expect(jest.getTimerCount()).toBe(timers);
    const next = await pool.acquire("local", server, opts);
    const pid = next.session.pid!;
    next.release();
    logger.lines.length = 0;
    jest.advanceTimersByTime(31 * SECOND); // the crashed child's count would have ended; the new one's has 29 s to go
    expect(pool.tryAcquire("local", server, opts)?.session.pid).toBe(pid);
    expect(logger.lines).toEqual([]);
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

  test("a file a live process holds open keeps it and what is in it, though that process works elsewhere with no temp folder there", async () => {
    const k = await kit();
    const held = threadPaths(k.dataDir, "held");
    await k.call("held", "fs_ops", { ops: [{ op: "write", path: ".mcp/tmp/lock", content: "l" }, { op: "write", path: ".mcp/tmp/other", content: "o" }] });
    // A process a server left (its environment its own, its cwd elsewhere) that still reads or locks the file.
    const fd = openSync(path.join(held.tmp, "lock"), "r");
    const holder = spawn("sleep", ["600"], { cwd: tmpdir(), env: { PATH: process.env.PATH ?? "" }, stdio: [fd, "ignore", "ignore"] });
    await new Promise((resolve) => holder.once("spawn", resolve));
    closeSync(fd);
    try {
      await toolkits.pop()!.close();
      expect((await readdir(held.tmp)).sort()).toEqual(["lock", "other"]);
    } finally {
      holder.kill("SIGKILL");
    }
  });

  test("a Unix socket a live process listens on there keeps it, though that process works elsewhere with no temp folder there", async () => {
    const k = await kit();
    const served = threadPaths(k.dataDir, "served");
    await k.call("served", "fs_ops", { ops: [{ op: "write", path: ".mcp/tmp/other", content: "o" }] });
    const socket = path.join(served.tmp, "s");
    const listen = "require('net').createServer().listen(process.argv[1], () => console.log('ready'))";
    const holder = spawn(process.execPath, ["-e", listen, socket], { cwd: tmpdir(), env: { PATH: process.env.PATH ?? "" }, stdio: ["ignore", "pipe", "ignore"] });
    await new Promise((resolve) => holder.stdout!.once("data", resolve));
    try {
      await toolkits.pop()!.close();
      expect((await readdir(served.tmp)).sort()).toEqual(["other", "s"]);
    } finally {
      holder.kill("SIGKILL");
    }
  });

  test("a thread a kept thread's run used too keeps its temp files, whichever of its sessions closes last", async () => {
    const dataDir = await makeTempDir("mcp-temporary-idle-mixed-");
    const server = McpServerSchema.parse({ type: "stdio", ...launch, env: serverEnv });
    const pool = new SessionPool(new RecordingLogger(), { dataDir });
    pools.push(pool);
    const acquiring = (temporary: boolean) => ({ headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("u", "mixed-thread", temporary) });
    // One server serves the thread's stateless-looking calls, another its kept run's (a subgraph without a checkpointer).
    const temporary = await pool.acquire("local", server, acquiring(true));
    const ordinary = await pool.acquire("other", server, acquiring(false));
    await ordinary.session.client.callTool({ name: "fs_ops", arguments: { ops: [{ op: "write", path: ".mcp/tmp/cache", content: "c" }] } });
    temporary.release();
    ordinary.release();
    const { workspace, tmp } = threadPaths(dataDir, "mixed-thread");
    pool.invalidate(ordinary.session);
    expect(await waitUntil(() => workspaceSessionCount(workspace) === 1, 30_000)).toBe(true);
    await pool.close();
    expect(await readdir(tmp)).toEqual(["cache"]);
  });

  test("what a kept thread's run left there before a stateless-looking run used the thread stays; only what came after goes", async () => {
    const dataDir = await makeTempDir("mcp-temporary-idle-later-");
    const server = McpServerSchema.parse({ type: "stdio", ...launch, env: serverEnv });
    const write = async (pool: SessionPool, temporary: boolean, name: string) => {
      const lease = await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("u", "later", temporary) });
      await lease.session.client.callTool({ name: "fs_ops", arguments: { ops: [{ op: "write", path: `.mcp/tmp/${name}`, content: name }] } });
      lease.release();
    };
    const first = new SessionPool(new RecordingLogger(), { dataDir });
    pools.push(first);
    await write(first, false, "kept-cache");
    await pools.pop()!.close();
    const { tmp } = threadPaths(dataDir, "later");
    expect(await readdir(tmp)).toEqual(["kept-cache"]);
    const second = new SessionPool(new RecordingLogger(), { dataDir });
    pools.push(second);
    await write(second, true, "scratch");
    await pools.pop()!.close();
    expect(await readdir(tmp)).toEqual(["kept-cache"]);
  });
});
