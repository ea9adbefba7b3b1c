import { randomBytes } from "node:crypto";
import { link, open, readFile, rename, stat, unlink } from "node:fs/promises";
import { hostname } from "node:os";
import * as nodePath from "node:path";
import { processExists } from "../shared/process";

/**
 * The two locks around a config read-modify-write (SPEC §8.2):
 * - a process lock (a promise chain per target file), so one process's requests queue without touching
 *   the disk, and
 * - a sidecar advisory file lock, `.<name>.lock` next to the target, created with O_EXCL, so several
 *   server processes sharing one file take turns. It holds `{pid, host, token, at}`.
 *
 * A lock file is stale when its owner is a process of this host that no longer runs, or when it is
 * older than `staleMs` (a holder on another host, a reused pid, a file left half-written). A stale lock
 * is moved aside with `rename` (atomic: only one breaker gets it), re-read, and deleted only if it is
 * still the stale one; if a live lock was moved by mistake it is linked back. Residual: a holder whose
 * lock is judged stale by age while it still works (a write longer than `staleMs`), and the narrow race
 * where a moved-back live lock meets a new holder; both need a write that stalls for `staleMs`.
 */

export interface FileLockOptions {
  /** How long to wait for the file lock before giving up (default 10 s). */
  timeoutMs?: number;
  /** Age after which a lock file is stale whoever holds it (default 30 s). */
  staleMs?: number;
}

export class ConfigLockTimeoutError extends Error {
  constructor(readonly lockPath: string) {
    super(`Timed out waiting for the config file lock ${lockPath}; another process is writing the config`);
    this.name = "ConfigLockTimeoutError";
  }
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_STALE_MS = 30_000;
const FIRST_RETRY_MS = 1;
const MAX_RETRY_MS = 8;

const processLocks = new Map<string, Promise<void>>();

/** Runs `fn` while holding the process lock of `target`; callers queue in arrival order. */
export async function withProcessLock<T>(target: string, fn: () => Promise<T>): Promise<T> {
  const previous = processLocks.get(target) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tail = previous.then(() => mine);
  processLocks.set(target, tail);
  await previous;
  try {
    return await fn();
  } finally {
    release();
    if (processLocks.get(target) === tail) processLocks.delete(target);
  }
}

export function lockPathOf(target: string): string {
  return nodePath.join(nodePath.dirname(target), `.${nodePath.basename(target)}.lock`);
}

/** Runs `fn` while holding the sidecar file lock of `target`. */
export async function withFileLock<T>(target: string, fn: () => Promise<T>, options: FileLockOptions = {}): Promise<T> {
  const lockPath = lockPathOf(target);
  const token = randomBytes(12).toString("hex");
  await acquire(lockPath, token, options);
  try {
    return await fn();
  } finally {
    await release(lockPath, token);
  }
}

/** Both locks: the process lock first, so only one request per process polls the file lock. */
export function withConfigWriteLock<T>(target: string, fn: () => Promise<T>, options: FileLockOptions = {}): Promise<T> {
  return withProcessLock(target, () => withFileLock(target, fn, options));
}

interface LockOwner {
  pid: number;
  host: string;
  token: string;
  at: number;
}

async function acquire(lockPath: string, token: string, options: FileLockOptions): Promise<void> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const staleMs = options.staleMs ?? DEFAULT_STALE_MS;
  const deadline = Date.now() + timeoutMs;
  const owner: LockOwner = { pid: process.pid, host: hostname(), token, at: Date.now() };
  let delay = FIRST_RETRY_MS;
  for (;;) {
    try {
      const handle = await open(lockPath, "wx", 0o600);
      try {
        await handle.writeFile(JSON.stringify(owner), "utf8");
      } finally {
        await handle.close();
      }
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    if (await breakIfStale(lockPath, staleMs)) continue;
    if (Date.now() >= deadline) throw new ConfigLockTimeoutError(lockPath);
    await new Promise((resolve) => setTimeout(resolve, delay + Math.random() * delay));
    delay = Math.min(MAX_RETRY_MS, delay * 2);
  }
}

async function release(lockPath: string, token: string): Promise<void> {
  const owner = await readOwner(lockPath);
  if (owner?.token === token) await unlink(lockPath).catch(() => undefined);
}

async function readOwner(lockPath: string): Promise<LockOwner | null> {
  try {
    return parseOwner(await readFile(lockPath, "utf8"));
  } catch {
    return null;
  }
}

/** `true` when a stale lock was removed (the caller retries at once). */
async function breakIfStale(lockPath: string, staleMs: number): Promise<boolean> {
  let text: string;
  let mtimeMs: number;
  try {
    [text, mtimeMs] = await Promise.all([readFile(lockPath, "utf8"), stat(lockPath).then((s) => s.mtimeMs)]);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT"; // released meanwhile: retry now
  }
  const owner = parseOwner(text);
  const old = Date.now() - mtimeMs > staleMs;
  const deadOwner = owner !== null && owner.host === hostname() && !processExists(owner.pid);
  if (!old && !deadOwner) return false;

  const aside = `${lockPath}.stale-${randomBytes(6).toString("hex")}`;
  try {
    await rename(lockPath, aside);
  } catch {
    return false; // someone else broke or released it
  }
  let movedText = "";
  try {
    movedText = await readFile(aside, "utf8");
  } catch {
    // vanished: nothing to restore
  }
  if (movedText !== text) {
    // We moved a lock taken after our read: put it back unless a new one exists already.
    await link(aside, lockPath).catch(() => undefined);
  }
  await unlink(aside).catch(() => undefined);
  return movedText === text;
}

function parseOwner(text: string): LockOwner | null {
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== "object" || parsed === null) return null;
    const { pid, host, token, at } = parsed as Record<string, unknown>;
    if (typeof pid !== "number" || typeof host !== "string" || typeof token !== "string" || typeof at !== "number") return null;
    return { pid, host, token, at };
  } catch {
    return null;
  }
}
