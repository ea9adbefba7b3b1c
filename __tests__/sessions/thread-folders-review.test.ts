/**
 * What the removal of an empty thread folder must never take: a folder a process still works in when the data dir is
 * reached through a symbolic link (the kernel names a process's cwd by its real path), a folder a process was given as
 * its temp folder while it runs elsewhere (its server's operator set `cwd`), and folders another user owns (whose
 * processes this one may not be able to see in /proc). And what it costs: closing many sessions at once reads /proc a
 * few times, not once per thread.
 */
import { afterEach, describe, expect, jest, test } from "@jest/globals";
import { execFileSync, spawn } from "node:child_process";
import { closeSync, constants, existsSync, openSync } from "node:fs";
import { chown, mkdir, rename, symlink, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { McpServerSchema, RecordingLogger } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { removeThreadSkeleton, TMP_CLEAR_MAX_ENTRIES } from "../../lib/sessions/thread-folders";
import { sweepThreadFolders, SWEEP_MIN_AGE_MS } from "../../lib/sessions/thread-sweep";
import { ensureThreadPaths, INTERNAL_GITIGNORE, INTERNAL_GITIGNORE_TEXT, threadPaths } from "../../lib/sessions/workspace";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { makeTempDir } from "../fixtures/config";
import { stdioFixture } from "../fixtures/stdio";

// Counts the reads of this process's own cwd link in /proc: each scan for processes working in a folder reads it once.
const ownCwd = `/proc/${process.pid}/cwd`;
let ownCwdReads = 0;
// The folders listed whole (readdir), for the cost of looking at a thread whose workspace holds many files.
const listed: string[] = [];
// Run once right after an lstat of `path` answers: a process of the thread acting between a check and what follows it.
let afterLstat: { path: string; act: () => Promise<void> } | undefined;
jest.mock("node:fs/promises", () => {
  const actual = jest.requireActual<typeof import("node:fs/promises")>("node:fs/promises");
  const readlink = (target: unknown, ...rest: unknown[]): Promise<unknown> => {
    if (target === ownCwd) ownCwdReads += 1;
    return (actual.readlink as (...args: unknown[]) => Promise<unknown>)(target, ...rest);
  };
  const readdir = (target: unknown, ...rest: unknown[]): Promise<unknown> => {
    listed.push(String(target));
    return (actual.readdir as (...args: unknown[]) => Promise<unknown>)(target, ...rest);
  };
  const lstat = async (target: unknown, ...rest: unknown[]): Promise<unknown> => {
    const info = await (actual.lstat as (...args: unknown[]) => Promise<unknown>)(target, ...rest);
    const hook = afterLstat;
    if (hook !== undefined && String(target) === hook.path) {
      afterLstat = undefined;
      await hook.act();
    }
    return info;
  };
  return { ...actual, readlink, readdir, lstat };
});

const pools: SessionPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

const launch = stdioFixture({ name: "local", toolNames: ["pid", "where"] });
// The fixture runs under tsx, which keeps a compile cache in its TMPDIR: in the host's, the thread's temp folder stays empty.
const server = McpServerSchema.parse({ type: "stdio", ...launch, env: { ...launch.env, TMPDIR: tmpdir() } });
const scoped = (user: string, thread: string) => ({ headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope(user, thread) });
const threadFolder = (dataDir: string, thread: string) => path.dirname(threadPaths(dataDir, thread).userData);

function poolIn(dataDir: string): SessionPool {
  const pool = new SessionPool(new RecordingLogger(), { dataDir });
  pools.push(pool);
  return pool;
}

async function startIn(pool: SessionPool, user: string, thread: string): Promise<number> {
  const lease = await pool.acquire("local", server, scoped(user, thread));
  lease.release();
  return lease.session.pid!;
}

describe("the removal of an empty thread folder", () => {
  test("keeps a folder a process works in when the data dir is reached through a symbolic link", async () => {
    const real = await makeTempDir("mcp-folders-real-");
    const linked = path.join(await makeTempDir("mcp-folders-link-"), "data");
    await symlink(real, linked);
    const pool = poolIn(linked);
    await startIn(pool, "u", "busy");
    // A process of another host sharing the data dir (or one a server left) works in the thread's workspace.
    const busy = spawn("sleep", ["600"], { cwd: threadPaths(real, "busy").workspace, stdio: "ignore" });
    await new Promise((resolve) => busy.once("spawn", resolve));
    try {
      await pool.close();
      expect(existsSync(threadPaths(real, "busy").tmp)).toBe(true);
    } finally {
      busy.kill("SIGKILL");
    }
  });

  test("another pool of the process reaching the data dir by another path keeps the folder while its session runs there", async () => {
    const real = await makeTempDir("mcp-folders-two-");
    const linked = path.join(await makeTempDir("mcp-folders-two-link-"), "data");
    await symlink(real, linked);
    const byLink = poolIn(linked);
    const byPath = poolIn(real);
    await startIn(byLink, "ann", "shared");
    await startIn(byPath, "bob", "shared");
    await byLink.close();
    // Bob's child still runs in the folder (its cwd).
    expect(existsSync(threadPaths(real, "shared").tmp)).toBe(true);
  });

  test("never removes folders another user owns (whose processes this one may not see)", async () => {
    if (process.geteuid?.() !== 0) return; // chown to another user needs root
    const dataDir = await makeTempDir("mcp-folders-owner-");
    const paths = threadPaths(dataDir, "theirs");
    await mkdir(paths.tmp, { recursive: true });
    for (const dir of [threadFolder(dataDir, "theirs"), paths.userData, paths.workspace, path.dirname(paths.tmp), paths.tmp]) await chown(dir, 54321, 54321);
    expect(await removeThreadSkeleton(paths, () => true)).toBe(false);
    expect(existsSync(paths.tmp)).toBe(true);
    // Only the innermost level another user's: the chain is not what this process created either.
    const mixed = threadPaths(dataDir, "mixed");
    await mkdir(mixed.tmp, { recursive: true });
    await chown(mixed.tmp, 54321, 54321);
    expect(await removeThreadSkeleton(mixed, () => true)).toBe(false);
    expect(existsSync(mixed.tmp)).toBe(true);
  });
});

describe("closing many sessions at once", () => {
  test("reads the working directories in /proc a few times, not once per thread", async () => {
    const dataDir = await makeTempDir("mcp-folders-cost-");
    const pool = poolIn(dataDir);
    const threads = Array.from({ length: 12 }, (_, i) => `t-${i}`);
    await Promise.all(threads.map((thread) => startIn(pool, "u", thread)));
    const before = ownCwdReads;
    await pool.close();
    expect(threads.filter((thread) => existsSync(threadFolder(dataDir, thread)))).toEqual([]);
    const scans = ownCwdReads - before;
    expect(scans).toBeGreaterThan(0);
    // One per thread before; the closes share their scans of /proc for leftover processes, and so end close together.
    expect(scans).toBeLessThanOrEqual(threads.length / 2);
  });
});

describe("a process whose temp folder is the thread's (its server's operator set cwd)", () => {
  const SH_SERVER = path.join(__dirname, "..", "fixtures", "sh-server.sh");

  test("keeps the folder: a child of another host sharing the data dir", async () => {
    const dataDir = await makeTempDir("mcp-folders-tmp-");
    const elsewhere = await makeTempDir("mcp-folders-cwd-");
    const pool = poolIn(dataDir);
    await startIn(pool, "u", "t");
    const paths = threadPaths(dataDir, "t");
    const other = spawn("sleep", ["600"], { cwd: elsewhere, env: { ...process.env, TMPDIR: paths.tmp }, stdio: "ignore" });
    await new Promise((resolve) => other.once("spawn", resolve));
    try {
      await pool.close();
      expect(existsSync(paths.tmp)).toBe(true);
    } finally {
      other.kill("SIGKILL");
    }
  });

  test("keeps the folder: a session of another pool of the process reaching the data dir through a link", async () => {
    const real = await makeTempDir("mcp-folders-tmp2-");
    const linked = path.join(await makeTempDir("mcp-folders-tmp2-link-"), "data");
    await symlink(real, linked);
    const elsewhere = await makeTempDir("mcp-folders-cwd2-");
    const byPath = poolIn(real);
    const byLink = poolIn(linked);
    await startIn(byPath, "ann", "shared");
    const sh = McpServerSchema.parse({ type: "stdio", command: "bash", args: [SH_SERVER], cwd: elsewhere });
    const lease = await byLink.acquire("sh", sh, scoped("bob", "shared"));
    lease.release();
    await byPath.close();
    // Bob's child runs elsewhere with the thread's `.mcp/tmp` (through the link) as its temp folder.
    expect(existsSync(threadPaths(real, "shared").tmp)).toBe(true);
  });

  test("a thread whose workspace holds many files is not listed whole to learn it is no empty skeleton (the sweep looks at thousands)", async () => {
    const dataDir = await makeTempDir("mcp-folders-many-");
    const { workspace, tmp } = threadPaths(dataDir, "kept");
    await mkdir(tmp, { recursive: true });
    await Promise.all(Array.from({ length: 500 }, (_, i) => writeFile(path.join(workspace, `file-${i}`), "")));
    listed.length = 0;
    expect(await sweepThreadFolders(dataDir, { now: () => Date.now() + SWEEP_MIN_AGE_MS + 60_000 })).toEqual({ removed: 0, capped: false, stopped: false });
    expect(listed.map((dir) => path.resolve(dir))).not.toContain(path.resolve(workspace));
  });
});

describe("the temp folder of a temporary thread whose last session left", () => {
  test(`holding more than ${TMP_CLEAR_MAX_ENTRIES} entries (more than one clearing removes): not listed whole, and the folder stays`, async () => {
    const dataDir = await makeTempDir("mcp-folders-crowded-tmp-");
    const paths = threadPaths(dataDir, "crowded");
    expect(await ensureThreadPaths(paths)).toBeNull();
    for (let i = 0; i <= TMP_CLEAR_MAX_ENTRIES; i += 500) {
      await Promise.all(Array.from({ length: Math.min(500, TMP_CLEAR_MAX_ENTRIES + 1 - i) }, (_, j) => writeFile(path.join(paths.tmp, `t${i + j}`), "")));
    }
    listed.length = 0;
    expect(await removeThreadSkeleton(paths, () => true, 0)).toBe(false);
    expect(listed.map((dir) => path.resolve(dir))).not.toContain(path.resolve(paths.tmp));
    expect(existsSync(threadFolder(dataDir, "crowded"))).toBe(true);
  });
});

describe("the .mcp/.gitignore of a thread folder being removed, which a process of the thread replaces after its check", () => {
  /** Runs `swap` on the harness's .gitignore right after the removal's check of it; resolves to the removal's outcome. */
  async function removedAfterSwap(thread: string, swap: (ignore: string) => Promise<void>): Promise<boolean> {
    const dataDir = await makeTempDir("mcp-folders-gitignore-swap-");
    const paths = threadPaths(dataDir, thread);
    expect(await ensureThreadPaths(paths)).toBeNull();
    const ignore = path.join(path.dirname(paths.tmp), INTERNAL_GITIGNORE);
    afterLstat = { path: ignore, act: () => swap(ignore) };
    const removed = await removeThreadSkeleton(paths, () => true);
    expect(afterLstat).toBeUndefined();
    expect(existsSync(threadFolder(dataDir, thread))).toBe(!removed);
    return removed;
  }

  test("by a link (to a /proc file that reads on for gigabytes): not read through it, and the folder stays", async () => {
    // A file holding the same text: read through the link, it would pass for the harness's own.
    const elsewhere = path.join(await makeTempDir("mcp-folders-gitignore-elsewhere-"), "same-text");
    await writeFile(elsewhere, INTERNAL_GITIGNORE_TEXT);
    const removed = await removedAfterSwap("linked", async (ignore) => {
      await unlink(ignore);
      await symlink(elsewhere, ignore);
    });
    expect(removed).toBe(false);
  });

  test("by a FIFO without a writer: not waited on (a thread of libuv's pool held for good), and the folder stays", async () => {
    let fifo = "";
    const removed = await removedAfterSwap("piped", async (ignore) => {
      fifo = `${ignore}.fifo`;
      execFileSync("mkfifo", [fifo]);
      await rename(fifo, ignore);
      fifo = ignore;
    });
    // A read still waiting on it (the defect) gets its end of file: the pool's thread is let go.
    try {
      closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // no reader waits (ENXIO)
    }
    expect(removed).toBe(false);
  });
});
