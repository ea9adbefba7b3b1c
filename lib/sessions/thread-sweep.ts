import { opendir } from "node:fs/promises";
import * as nodePath from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";
import type { Logger } from "../shared/logger";
import { removeThreadSkeleton, threadFolderRemoval } from "./thread-folders";
import { isThreadFolderName, threadPathsOfFolder } from "./workspace";
import { workspaceSessionCount } from "./workspace-secrets";

/**
 * The sweep of the empty thread folders a host left when it was killed (SIGKILL, a crash) or stopped without closing
 * its toolkit: the removal a session's close does (`removeThreadSkeleton`) never ran for them, so each thread it had a
 * session for keeps its empty skeleton, thousands of them with stateless runs (a new thread per run). Run once per
 * data dir and process, with its first stdio session, after the sweep of the processes such a host left (which may
 * still work in those folders), off every call's path.
 *
 * Each entry of `<data dir>/threads` goes through `removeThreadSkeleton`, the same checks as at a session's close (only
 * the empty skeleton of the host's user, no link, no process working there per /proc), and besides: a thread with a
 * session in this process or a removal under way is skipped, and every level must be unchanged for `SWEEP_MIN_AGE_MS`.
 * The age is for another host sharing the data dir that is starting a session of the thread right now: no count of
 * this process knows it, and /proc sees its child only once spawned. Preparing a session creates the levels or makes
 * `.mcp` and `.mcp/tmp` private again, which moves their change time, so a folder being prepared is young. What
 * remains is a host that begins preparing a folder unchanged for that long in the instant between the last look at its
 * change times and the removal (after the /proc scan): its child then fails to start (its cwd is gone) or runs in a
 * removed folder until its session ends; no file is lost, since only empty folders are removed. Linux only, where /proc
 * tells which processes use a folder. A live session of a host whose children this /proc does not show (another machine
 * or container on a shared volume) keeps its folder by the same rule: its host's `ThreadHeartbeat` keeps it young.
 */

/** Entries of `<data dir>/threads` one sweep looks at, in directory order; the next process start looks again. */
export const SWEEP_MAX_ENTRIES = 10_000;
/** Entries looked at together (their scans of /proc are shared); the event loop gets a turn between batches. */
const SWEEP_BATCH = 64;
/** How long every level of a folder must have been unchanged for the sweep to remove it. */
export const SWEEP_MIN_AGE_MS = 10 * 60_000;

export interface ThreadSweepOptions {
  /** The clock change times are compared with (epoch ms). */
  now?: () => number;
  /** Stops the sweep before its next batch (the pool's `close()`). */
  signal?: AbortSignal;
  maxEntries?: number;
}

export interface ThreadSweepResult {
  /** Thread folders removed. */
  readonly removed: number;
  /** Stopped at `maxEntries` with entries left. */
  readonly capped: boolean;
  /** Stopped by `signal`. */
  readonly stopped: boolean;
}

/** Removes the empty thread folders of `<dataDir>/threads` nobody uses (see the module's comment). Never rejects. */
export async function sweepThreadFolders(dataDir: string, options: ThreadSweepOptions = {}): Promise<ThreadSweepResult> {
  const maxEntries = options.maxEntries ?? SWEEP_MAX_ENTRIES;
  const changedBefore = (options.now ?? Date.now)() - SWEEP_MIN_AGE_MS;
  let removed = 0;
  let looked = 0;
  let capped = false;
  // Elsewhere no process using a folder is seen: one of another host sharing the data dir would lose its folder.
  if (process.platform !== "linux") return { removed, capped, stopped: false };
  const sweepBatch = async (names: readonly string[]): Promise<void> => {
    const outcomes = await Promise.all(names.map((name) => sweepOne(dataDir, name, changedBefore)));
    removed += outcomes.filter(Boolean).length;
    await nextTurn();
  };
  try {
    // Read a few entries at a time: a folder of 100,000 threads is never listed whole.
    const dir = await opendir(nodePath.join(dataDir, "threads"), { bufferSize: SWEEP_BATCH });
    let batch: string[] = [];
    for await (const entry of dir) {
      if (options.signal?.aborted) break;
      if (looked >= maxEntries) {
        capped = true;
        break;
      }
      looked += 1;
      if (!isThreadFolderName(entry.name)) continue;
      batch.push(entry.name);
      if (batch.length < SWEEP_BATCH) continue;
      await sweepBatch(batch);
      batch = [];
    }
    if (batch.length > 0 && !options.signal?.aborted) await sweepBatch(batch);
  } catch {
    // no threads folder yet, or it cannot be read: nothing to sweep
  }
  return { removed, capped, stopped: options.signal?.aborted === true };
}

function sweepOne(dataDir: string, name: string, changedBefore: number): Promise<boolean> {
  const paths = threadPathsOfFolder(dataDir, name);
  // Being removed already (its last session here just left): that removal decides.
  if (threadFolderRemoval(paths) !== undefined) return Promise.resolve(false);
  return removeThreadSkeleton(paths, () => workspaceSessionCount(paths.workspace) === 0, undefined, changedBefore);
}

/** Data dirs (resolved) this process swept or is sweeping. */
const swept = new Set<string>();

/** `sweepThreadFolders` once per data dir and process, its outcome logged once at info (a count, no path). */
export async function sweepThreadFoldersOnce(dataDir: string, logger: Logger, options: Omit<ThreadSweepOptions, "maxEntries"> = {}): Promise<void> {
  const key = nodePath.resolve(dataDir);
  if (swept.has(key)) return;
  swept.add(key);
  const { removed, capped, stopped } = await sweepThreadFolders(dataDir, options);
  // Cut short by its pool's close() (a reload retiring it): a later pool of this process may sweep the rest.
  if (stopped) swept.delete(key);
  if (removed === 0 && !capped) return;
  const cut = stopped
    ? "; stopped early by close()"
    : capped
      ? `; looked at the first ${SWEEP_MAX_ENTRIES} entries of the threads folder only, the next start looks again`
      : "";
  logger.info(
    `removed ${removed} empty thread folder(s) left by stdio MCP sessions that were never closed ` +
      `(a host process killed or stopped without closing its toolkit)${cut}`,
  );
}
