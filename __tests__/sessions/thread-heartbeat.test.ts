/**
 * The heartbeat of a pool's live stdio sessions: every `THREAD_HEARTBEAT_MS` each of their thread folders (once per
 * thread) gets the pool's clock as its time, so that the sweep of another host sharing the data dir, which cannot see
 * this host's children in its /proc, keeps it (see thread-sweep.test.ts for that host). One timer per pool, only the top
 * level of the folder, and a session's close still removes its folder. The ticks pass on jest's fake clock (only this
 * process's intervals; its timeouts and the children run in real time).
 */
import { afterAll, afterEach, beforeAll, describe, expect, jest, test } from "@jest/globals";
import { existsSync, lstatSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { McpServerSchema, RecordingLogger } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { THREAD_HEARTBEAT_MS, ThreadHeartbeat } from "../../lib/sessions/thread-heartbeat";
import { SWEEP_MIN_AGE_MS } from "../../lib/sessions/thread-sweep";
import { threadPaths } from "../../lib/sessions/workspace";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { makeTempDir } from "../fixtures/config";
import { orphanOfGoneHost } from "../fixtures/processes";
import { stdioFixture } from "../fixtures/stdio";

/**
 * Only the heartbeat's interval is faked. What a stdio start and close wait for in real time stays real: the sweep of a
 * killed host's processes polls them with `setTimeout` until they are gone, and a faked one would never fire.
 */
const FAKE: Parameters<typeof jest.useFakeTimers>[0] = {
  doNotFake: ["nextTick", "queueMicrotask", "setImmediate", "clearImmediate", "setTimeout", "clearTimeout", "Date", "hrtime", "performance"],
};

// A process a killed host left (another test file's, or one on the same machine): the first start here sweeps it.
let orphan: ReturnType<typeof orphanOfGoneHost> | undefined;
beforeAll(() => {
  orphan = orphanOfGoneHost();
});
afterAll(() => {
  orphan?.child.kill("SIGKILL");
});

const pools: SessionPool[] = [];
afterEach(async () => {
  jest.useRealTimers();
  jest.restoreAllMocks();
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
const server = McpServerSchema.parse({ type: "stdio", ...launch, env: { ...launch.env, TMPDIR: tmpdir() } });
const threadFolder = (dataDir: string, thread: string) => path.dirname(threadPaths(dataDir, thread).userData);
const times = (dir: string) => {
  const info = lstatSync(dir);
  return { ctimeMs: info.ctimeMs, mtimeMs: info.mtimeMs };
};

describe("the heartbeat of a pool's live stdio sessions", () => {
  test("each live thread folder gets the pool's clock every beat, once per thread, from one timer; only its top level; and the close of its sessions still removes it", async () => {
    jest.useFakeTimers(FAKE);
    const dataDir = await makeTempDir("mcp-thread-heartbeat-");
    // Hours ahead of the file system's clock, a time the folders can only have from the heartbeat; whole seconds, which a
    // file time holds exactly (a time in seconds as a double may come back a microsecond short).
    let now = Math.floor(Date.now() / 1000) * 1000 + 3 * 3600_000;
    const pool = new SessionPool(new RecordingLogger(), { dataDir, now: () => now });
    pools.push(pool);
    const acquire = (name: string, thread: string) => pool.acquire(name, server, { headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("u", thread) });
    // Two servers' sessions of thread "a", one of "b".
    for (const lease of await Promise.all([acquire("local", "a"), acquire("other", "a"), acquire("local", "b")])) lease.release();
    // The first start waited for the sweep, which ended the orphan (or another test file's sweep did).
    expect(await orphan?.exit).toEqual([null, "SIGTERM"]);
    expect(jest.getTimerCount()).toBe(1);
    const a = threadFolder(dataDir, "a");
    const b = threadFolder(dataDir, "b");
    const below = [threadPaths(dataDir, "a").userData, threadPaths(dataDir, "a").workspace, path.dirname(threadPaths(dataDir, "a").tmp), threadPaths(dataDir, "a").tmp];
    const before = below.map(times);

    // Each beat's touches are awaited through its own tick: what libuv's thread pool answers first is no sign that a
    // beat has ended (its threads report in any order), and a next beat while one is still under way does nothing.
    const ticks = jest.spyOn(ThreadHeartbeat.prototype, "tick");
    for (let beat = 0; beat < 2; beat += 1) {
      now += THREAD_HEARTBEAT_MS;
      const at = now;
      jest.advanceTimersByTime(THREAD_HEARTBEAT_MS);
      expect(ticks).toHaveBeenCalledTimes(beat + 1);
      await ticks.mock.results[beat]?.value;
      expect([times(a).mtimeMs, times(b).mtimeMs]).toEqual([at, at]);
    }
    // The workspace (whose listing a change scan keeps by its change time) and the temp folder (whose entries' own change
    // times tell a temporary thread's temp files) are not touched.
    expect(below.map(times)).toEqual(before);

    // The removal at a session's close has no age rule: the folders go, though the heartbeat made them young.
    jest.useRealTimers();
    await pool.close();
    expect(existsSync(a)).toBe(false);
    expect(existsSync(b)).toBe(false);
  }, 60_000);

  test("a pool retired with idle sessions keeps no timer", async () => {
    jest.useFakeTimers(FAKE);
    const dataDir = await makeTempDir("mcp-thread-heartbeat-retired-");
    const pool = new SessionPool(new RecordingLogger(), { dataDir });
    pools.push(pool);
    const lease = await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("u", "t") });
    lease.release();
    expect(jest.getTimerCount()).toBe(1);
    pool.retire();
    expect(jest.getTimerCount()).toBe(0);

  }, 60_000);

  test("a pool retired while a child the bound evicted still runs a call keeps beating for that child's folder", async () => {
    jest.useFakeTimers(FAKE);
    const dataDir = await makeTempDir("mcp-thread-heartbeat-draining-");
    let now = Math.floor(Date.now() / 1000) * 1000 + 3 * 3600_000;
    const pool = new SessionPool(new RecordingLogger(), { dataDir, maxStdioSessions: 1, now: () => now });
    pools.push(pool);
    const acquire = (thread: string) => pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("u", thread) });
    const busy = await acquire("a");
    // Thread "b"'s child is beyond the bound: "a"'s, busy and less recently used, leaves the pool and closes after its call.
    (await acquire("b")).release();
    // "b"'s child, idle, closes at once: the pool holds no session any more, but "a"'s child still runs.
    pool.retire();
    expect(jest.getTimerCount()).toBe(1);
    const ticks = jest.spyOn(ThreadHeartbeat.prototype, "tick");
    now += THREAD_HEARTBEAT_MS;
    jest.advanceTimersByTime(THREAD_HEARTBEAT_MS);
    await ticks.mock.results[0]?.value;
    expect(times(threadFolder(dataDir, "a")).mtimeMs).toBe(now);
    busy.release();
    jest.useRealTimers();
  }, 60_000);

  test("the beat is well under the sweep's age bound", () => {
    expect(THREAD_HEARTBEAT_MS).toBeLessThanOrEqual(SWEEP_MIN_AGE_MS / 2);
  });
});
