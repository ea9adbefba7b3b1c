import { randomBytes } from "node:crypto";
import { open, readFile, stat, unlink } from "node:fs/promises";
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
 * is removed only under a second sidecar lock, `.<name>.lock.break`, held for the few milliseconds it
 * takes to read the lock again and delete it if it is still the stale one: breakers take turns, so one
 * can never delete the lock another breaker's winner has just taken. Residual: a holder whose lock is
 * judged stale by age while it still works (a write longer than `staleMs`), and a breaker that dies
 * holding the break lock, whose stale break lock two later breakers may then both remove.
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
  let delay = FIRST_RETRY_MS;
  for (;;) {
    if (await createLock(lockPath, token)) return;
    const state = await lockState(lockPath, staleMs);
    if (state === "gone") continue; // released meanwhile: retry now
    if (state !== "live" && (await breakStaleLock(lockPath, state.stale, staleMs))) continue;
    if (Date.now() >= deadline) throw new ConfigLockTimeoutError(lockPath);
    await new Promise((resolve) => setTimeout(resolve, delay + Math.random() * delay));
    delay = Math.min(MAX_RETRY_MS, delay * 2);
  }
}

/** Creates the lock file holding our owner record; `false` when it exists already. */
async function createLock(lockPath: string, token: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(lockPath, "wx", 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
  try {
    const owner: LockOwner = { pid: process.pid, host: hostname(), token, at: Date.now() };
    await handle.writeFile(JSON.stringify(owner), "utf8");
  } finally {
    await handle.close();
  }
  return true;
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

/** A lock file as a waiting process sees it: gone, held by a live owner, or stale (with the text it holds). */
export type LockState = "gone" | "live" | { stale: string };

export async function lockState(lockPath: string, staleMs: number): Promise<LockState> {
  let text: string;
  let mtimeMs: number;
  try {
    [text, mtimeMs] = await Promise.all([readFile(lockPath, "utf8"), stat(lockPath).then((s) => s.mtimeMs)]);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "gone";
    throw err;
  }
  const owner = parseOwner(text);
  const old = Date.now() - mtimeMs > staleMs;
  const deadOwner = owner !== null && owner.host === hostname() && !processExists(owner.pid);
  return old || deadOwner ? { stale: text } : "live";
}

export function breakLockPathOf(lockPath: string): string {
  return `${lockPath}.break`;
}

/**
 * Deletes the lock at `lockPath` if it still holds `staleText`, under the break lock. `true` when the lock is gone
 * (the caller retries at once); `false` when it changed (someone else broke it and took it) or another breaker is at
 * work. A break lock left by a breaker that died is removed for the next attempt.
 */
export async function breakStaleLock(lockPath: string, staleText: string, staleMs: number): Promise<boolean> {
  const breakPath = breakLockPathOf(lockPath);
  const token = randomBytes(12).toString("hex");
  if (!(await createLock(breakPath, token))) {
    const state = await lockState(breakPath, staleMs);
    if (state !== "gone" && state !== "live") await unlink(breakPath).catch(() => undefined);
    return false;
  }
  try {
    let current: string;
    try {
      current = await readFile(lockPath, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return true;
      throw err;
    }
    if (current !== staleText) return false;
    await unlink(lockPath).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "ENOENT") throw err;
    });
    return true;
  } finally {
    await release(breakPath, token);
  }
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
