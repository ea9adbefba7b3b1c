/**
 * The empty thread folders of a host killed before it could close its sessions (SIGKILL, or a LangGraph server stopped
 * without closing the toolkit): the first stdio session of the next toolkit on the data dir begins a sweep that removes
 * those that are only the empty skeleton, unchanged for some minutes and used by nobody (this process's sessions,
 * another host's children), under the checks of a session's own removal. A file of its own: the sweep runs once per
 * data dir and process (module registry).
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { existsSync, lstatSync } from "node:fs";
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { THREAD_HEARTBEAT_MS } from "../../lib/sessions/thread-heartbeat";
import { sweepThreadFolders, SWEEP_MIN_AGE_MS } from "../../lib/sessions/thread-sweep";
import { threadPaths } from "../../lib/sessions/workspace";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { ManualClock } from "../fixtures/clock";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { advanceHost, endHosts, startHost } from "../fixtures/hosts";
import { waitUntil } from "../fixtures/processes";
import { stdioFixture } from "../fixtures/stdio";

const toolkits: McpToolkit[] = [];
const pools: SessionPool[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
  await Promise.all([...toolkits.splice(0).map((t) => t.close()), ...pools.splice(0).map((p) => p.close())]);
  endHosts();
});

const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
// The fixture runs under tsx, which keeps a compile cache in its TMPDIR: in the host's, the thread's temp folder stays empty.
const server = { type: "stdio" as const, ...launch, env: { ...launch.env, TMPDIR: tmpdir() } };
const threadFolder = (dataDir: string, thread: string) => path.dirname(threadPaths(dataDir, thread).userData);
const threadsIn = async (dataDir: string) => (await readdir(path.join(dataDir, "threads"))).sort();
/** A clock past the sweep's age bound for every folder made until now. */
const later = () => new ManualClock(new Date(Date.now() + SWEEP_MIN_AGE_MS + 60_000));
const SWEPT = /^removed ([0-9]+) empty thread folder\(s\) left by stdio MCP sessions that were never closed/;

async function skeletons(dataDir: string, threads: readonly string[]): Promise<void> {
  await Promise.all(threads.map((thread) => mkdir(threadPaths(dataDir, thread).tmp, { recursive: true, mode: 0o700 })));
}

describe("the empty thread folders of a host killed before it closed its sessions", () => {
  test("the next toolkit's first stdio session sweeps them: a folder holding a file (in its temp folder too), one another live host's child works in, and this process's own stay", async () => {
    const dataDir = await makeTempDir("mcp-thread-sweep-");
    const configPath = await writeConfig(await makeTempDir("mcp-thread-sweep-cfg-"), { mcpServers: { local: server } });
    const killed = await startHost(configPath, [], dataDir, ["gone-1", "gone-2", "gone-3", "written", "temp-file"]);
    await startHost(configPath, [], dataDir, ["live-1"]);
    killed.kill("SIGKILL");
    await once(killed, "exit");
    await writeFile(path.join(threadPaths(dataDir, "written").workspace, "notes.txt"), "n");
    await writeFile(path.join(threadPaths(dataDir, "temp-file").tmp, "left"), "");
    // A prefix of the skeleton (a host killed while preparing it), a hashed thread id's folder, a name no thread has.
    await mkdir(threadFolder(dataDir, "half"));
    await skeletons(dataDir, ["a/b"]);
    await mkdir(path.join(dataDir, "threads", ".other", "user-data"), { recursive: true });
    const hashed = path.basename(threadFolder(dataDir, "a/b"));
    expect(await threadsIn(dataDir)).toEqual([".other", hashed, "default", "gone-1", "gone-2", "gone-3", "half", "live-1", "temp-file", "written"].sort());

    const logger = new RecordingLogger();
    const toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir, clock: later().now });
    toolkits.push(toolkit);
    await toolkit.getTools();
    expect(await waitUntil(() => logger.messages().some((line) => SWEPT.test(line)), 30_000)).toBe(true);
    const swept = logger.messages().filter((line) => SWEPT.test(line));
    // Once, at info, with the count and no path.
    expect(swept).toHaveLength(1);
    expect(SWEPT.exec(swept[0])![1]).toBe("5");
    expect(logger.messages("info")).toContain(swept[0]);
    expect(swept[0]).not.toContain(dataDir);
    // "default": this toolkit's discovery session and the live host's; "live-1": the live host's child works there.
    expect(await threadsIn(dataDir)).toEqual([".other", "default", "live-1", "temp-file", "written"]);
    expect(existsSync(path.join(threadPaths(dataDir, "temp-file").tmp, "left"))).toBe(true);
    expect(existsSync(path.join(threadPaths(dataDir, "written").workspace, "notes.txt"))).toBe(true);
    expect(existsSync(threadPaths(dataDir, "live-1").tmp)).toBe(true);
  }, 90_000);

  test("a folder changed less than the age bound ago stays (another host may be preparing a session there)", async () => {
    const dataDir = await makeTempDir("mcp-thread-sweep-young-");
    await skeletons(dataDir, ["young-1", "young-2"]);
    expect(await sweepThreadFolders(dataDir)).toEqual({ removed: 0, capped: false, stopped: false });
    expect(await threadsIn(dataDir)).toEqual(["young-1", "young-2"]);
    // The same folders once they are old enough.
    expect(await sweepThreadFolders(dataDir, { now: () => later().now().getTime() })).toEqual({ removed: 2, capped: false, stopped: false });
    expect(await threadsIn(dataDir)).toEqual([]);
  });

  test("a thread with a session in this process stays, also one whose child runs elsewhere (the server's own cwd and temp folder)", async () => {
    const dataDir = await makeTempDir("mcp-thread-sweep-own-");
    const elsewhere = await makeTempDir("mcp-thread-sweep-elsewhere-");
    const away = McpServerSchema.parse({ ...server, cwd: elsewhere, env: { ...server.env, TMPDIR: elsewhere, TMP: elsewhere, TEMP: elsewhere } });
    // Both left by a killed host; this process then starts a session of one of them.
    await skeletons(dataDir, ["old", "mine"]);
    const logger = new RecordingLogger();
    const pool = new SessionPool(logger, { dataDir, now: () => later().now().getTime() });
    pools.push(pool);
    const lease = await pool.acquire("local", away, { headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("u", "mine") });
    lease.release();
    expect(await waitUntil(() => logger.messages().some((line) => SWEPT.test(line)), 30_000)).toBe(true);
    expect(logger.messages().filter((line) => SWEPT.test(line)).map((line) => SWEPT.exec(line)![1])).toEqual(["1"]);
    expect(await threadsIn(dataDir)).toEqual(["mine"]);
  });

  test("a reload does not take the sweep from close(): the retired pool that runs it is closed by the toolkit's close(), which stops it and waits for it", async () => {
    // Enough folders that the sweep is still at work after two reloads.
    const dataDir = await makeTempDir("mcp-thread-sweep-reload-");
    for (let i = 0; i < 6000; i += 200) await skeletons(dataDir, Array.from({ length: 200 }, (_, j) => `r-${i + j}`));
    const configPath = await writeConfig(await makeTempDir("mcp-thread-sweep-reload-cfg-"), { mcpServers: { local: server } });
    const logger = new RecordingLogger();
    const toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir, clock: later().now });
    toolkits.push(toolkit);
    await toolkit.getTools();
    // The first pool, which began the sweep, is retired; the next reload forgets it once its sessions are gone.
    await toolkit.reset();
    await toolkit.getTools();
    await toolkit.reset();
    await toolkit.getTools();
    await toolkit.close();
    // Stopped (or done) before close() resolved: its one line is logged.
    expect(logger.messages().filter((line) => SWEPT.test(line))).toHaveLength(1);
  }, 90_000);

  test("another host's live session its /proc does not show (another machine sharing the data dir) keeps its folder by its heartbeat, idle for longer than the age bound; once that host is gone the folder ages and goes", async () => {
    const dataDir = await makeTempDir("mcp-thread-sweep-heartbeat-");
    // Its server runs with a cwd and temp folders of its own: /proc here does not tie it to the thread, as on another machine.
    const elsewhere = await makeTempDir("mcp-thread-sweep-heartbeat-away-");
    const away = { ...server, cwd: elsewhere, env: { ...server.env, TMPDIR: elsewhere, TMP: elsewhere, TEMP: elsewhere } };
    const configPath = await writeConfig(await makeTempDir("mcp-thread-sweep-heartbeat-cfg-"), { mcpServers: { local: away } });
    const start = Date.now();
    const other = await startHost(configPath, [], dataDir, ["live"], { manualTime: true });
    // A killed host's skeleton beside it: the sweep runs and removes what nobody keeps.
    await skeletons(dataDir, ["gone"]);
    const live = threadFolder(dataDir, "live");
    const changed = () => {
      const info = lstatSync(live, { throwIfNoEntry: false });
      return info === undefined ? -1 : Math.max(info.ctimeMs, info.mtimeMs);
    };
    // The other host lives on, its session idle (no file written), through four beats: longer than the age bound.
    const beats = 4;
    expect(beats * THREAD_HEARTBEAT_MS).toBeGreaterThan(SWEEP_MIN_AGE_MS + 60_000);
    for (let beat = 1; beat <= beats; beat += 1) {
      // Answered once the beat's tick has ended: the next one then runs in full.
      await advanceHost(other, THREAD_HEARTBEAT_MS);
      expect(changed()).toBeGreaterThanOrEqual(start + beat * THREAD_HEARTBEAT_MS);
    }
    // This process's clock moved as far: every folder made so far is older than the bound, but for the beats.
    const now = Date.now() + beats * THREAD_HEARTBEAT_MS;
    expect(await sweepThreadFolders(dataDir, { now: () => now })).toEqual({ removed: 1, capped: false, stopped: false });
    expect(await threadsIn(dataDir)).toEqual(["default", "live"]);
    expect(existsSync(threadPaths(dataDir, "live").tmp)).toBe(true);

    // Killed: no more beats, and once its folder is older than the bound the sweep of the next start takes it.
    other.kill("SIGKILL");
    await once(other, "exit");
    expect(await sweepThreadFolders(dataDir, { now: () => now })).toEqual({ removed: 0, capped: false, stopped: false });
    const aged = Date.now() + beats * THREAD_HEARTBEAT_MS + SWEEP_MIN_AGE_MS + 1_000;
    expect(await sweepThreadFolders(dataDir, { now: () => aged })).toEqual({ removed: 2, capped: false, stopped: false });
    expect(await threadsIn(dataDir)).toEqual([]);
  }, 90_000);

  test("bounded: at most `maxEntries` entries per sweep, in batches, and none once stopped (the signal the pool's close() aborts)", async () => {
    const dataDir = await makeTempDir("mcp-thread-sweep-cap-");
    await skeletons(dataDir, Array.from({ length: 150 }, (_, i) => `t-${i}`));
    const now = () => later().now().getTime();
    expect(await sweepThreadFolders(dataDir, { now, maxEntries: 100 })).toEqual({ removed: 100, capped: true, stopped: false });
    expect(await threadsIn(dataDir)).toHaveLength(50);
    const stop = new AbortController();
    stop.abort();
    expect(await sweepThreadFolders(dataDir, { now, signal: stop.signal })).toEqual({ removed: 0, capped: false, stopped: true });
    expect(await sweepThreadFolders(dataDir, { now, maxEntries: 100 })).toEqual({ removed: 50, capped: false, stopped: false });
    expect(await threadsIn(dataDir)).toEqual([]);
  });

  // A bind mount in a mount namespace of its own: root only.
  (process.getuid?.() === 0 && process.platform === "linux" ? test : test.skip)(
    "a folder a process works in through another path to the data dir (a bind mount, a container's volume) stays",
    async () => {
      const dataDir = await makeTempDir("mcp-thread-sweep-bind-");
      const alias = await makeTempDir("mcp-thread-sweep-alias-");
      await skeletons(dataDir, ["elsewhere", "old"]);
      // Its cwd, as /proc names it, is under `alias`: only the folder's identity tells it is this one.
      const script = 'mount --bind "$1" "$2" && cd "$2/threads/elsewhere/user-data/workspace" && echo ready && exec sleep 600';
      const child = spawn("unshare", ["--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", dataDir, alias], { stdio: ["ignore", "pipe", "inherit"] });
      children.push(child);
      const [ready] = (await once(child.stdout!, "data")) as [Buffer];
      expect(ready.toString()).toBe("ready\n");
      expect(await sweepThreadFolders(dataDir, { now: () => later().now().getTime() })).toEqual({ removed: 1, capped: false, stopped: false });
      expect(await threadsIn(dataDir)).toEqual(["elsewhere"]);
    },
  );
});
