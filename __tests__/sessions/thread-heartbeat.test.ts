/**
 * The heartbeat of a pool's live stdio sessions: every `THREAD_HEARTBEAT_MS` each of their thread folders (once per
 * thread) gets the pool's clock as its time, so that the sweep of another host sharing the data dir, which cannot see
 * this host's children in its /proc, keeps it (see thread-sweep.test.ts for that host). One timer per pool, only the top
 * level of the folder, and a session's close still removes its folder. The ticks pass on jest's fake clock (only this
 * process's timers; the children run in real time).
 */
import { afterEach, describe, expect, jest, test } from "@jest/globals";
import { existsSync, lstatSync } from "node:fs";
import { lstat } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { McpServerSchema, RecordingLogger } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { THREAD_HEARTBEAT_MS } from "../../lib/sessions/thread-heartbeat";
import { SWEEP_MIN_AGE_MS } from "../../lib/sessions/thread-sweep";
import { threadPaths } from "../../lib/sessions/workspace";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { makeTempDir } from "../fixtures/config";
import { stdioFixture } from "../fixtures/stdio";

const FAKE: Parameters<typeof jest.useFakeTimers>[0] = { doNotFake: ["nextTick", "queueMicrotask", "setImmediate", "Date", "hrtime", "performance"] };

const pools: SessionPool[] = [];
afterEach(async () => {
  jest.useRealTimers();
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
const server = McpServerSchema.parse({ type: "stdio", ...launch, env: { ...launch.env, TMPDIR: tmpdir() } });
const threadFolder = (dataDir: string, thread: string) => path.dirname(threadPaths(dataDir, thread).userData);
const times = (dir: string) => {
  const info = lstatSync(dir);
  return { ctimeMs: info.ctimeMs, mtimeMs: info.mtimeMs };
};

/**
 * Turns of the event loop (not faked) until `condition` holds, the touches being file system calls under way; then one
 * more call of the thread pool, whose answer comes after theirs (already done), so the beat has ended too.
 */
async function settled(condition: () => boolean): Promise<boolean> {
  for (let turn = 0; turn < 100_000; turn += 1) {
    if (condition()) {
      await lstat(tmpdir());
      return true;
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  return condition();
}

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
    expect(jest.getTimerCount()).toBe(1);
    const a = threadFolder(dataDir, "a");
    const b = threadFolder(dataDir, "b");
    const below = [threadPaths(dataDir, "a").userData, threadPaths(dataDir, "a").workspace, path.dirname(threadPaths(dataDir, "a").tmp), threadPaths(dataDir, "a").tmp];
    const before = below.map(times);

    for (let beat = 0; beat < 2; beat += 1) {
      now += THREAD_HEARTBEAT_MS;
      const at = now;
      jest.advanceTimersByTime(THREAD_HEARTBEAT_MS);
      expect(await settled(() => times(a).mtimeMs === at && times(b).mtimeMs === at)).toBe(true);
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

  test("the beat is well under the sweep's age bound", () => {
    expect(THREAD_HEARTBEAT_MS).toBeLessThanOrEqual(SWEEP_MIN_AGE_MS / 2);
  });
});
