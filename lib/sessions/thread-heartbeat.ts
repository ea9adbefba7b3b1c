import { lutimes } from "node:fs/promises";
import * as nodePath from "node:path";
import { inBatches } from "./session-processes";
import { SWEEP_MIN_AGE_MS } from "./thread-sweep";
import type { ThreadPaths } from "./workspace";

/**
 * The liveness heartbeat of the thread folders a pool's stdio sessions use. Another host sharing the data dir (a
 * replica on another machine or container, over a shared volume) cannot see this host's children in its /proc: its
 * sweep of the folders a killed host left (`sweepThreadFolders`) would take the empty folder of a live session idle for
 * `SWEEP_MIN_AGE_MS` (a REPL, a browser server that writes no files), and the child would run on in a removed cwd. While
 * a session is live, its thread folder's times are set to now every `THREAD_HEARTBEAT_MS`, so that sweep's age rule
 * keeps it. Only the top level, `<data dir>/threads/<thread>`: the sweep looks at it first, no workspace scan reads it
 * (a touched workspace would be listed again), and the temp files of `.mcp/tmp` keep their own change times (the
 * emptying of a temporary thread's temp folder keys on them). The removal at a session's close has no age rule: a
 * touched folder goes then as before.
 */

/** Well under `SWEEP_MIN_AGE_MS`: a tick late by minutes (a busy event loop, a slow volume) still keeps the folder. */
export const THREAD_HEARTBEAT_MS = Math.floor(SWEEP_MIN_AGE_MS / 3);

export class ThreadHeartbeat {
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;

  /**
   * `live` lists the thread paths of the pool's live stdio sessions (duplicates allowed); `now` is the clock (epoch ms)
   * the folder times are set from, the one the sweep compares them with.
   */
  constructor(
    private readonly live: () => Iterable<ThreadPaths>,
    private readonly now: () => number = Date.now,
  ) {}

  /** Starts the timer unless it runs: one per pool, unref'd, whatever the number of sessions. */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.tick(), THREAD_HEARTBEAT_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Touches each live thread folder once; stops the timer when there is none (the next session starts it again). */
  async tick(): Promise<void> {
    // A slow volume: a tick still under way is not joined by another.
    if (this.ticking) return;
    const folders = new Set<string>();
    for (const paths of this.live()) folders.add(nodePath.dirname(paths.userData));
    if (folders.size === 0) {
      this.stop();
      return;
    }
    this.ticking = true;
    try {
      const at = this.now() / 1000;
      // Never creates anything (a folder removed meanwhile, by its session's close, fails with ENOENT) nor follows a link.
      await inBatches([...folders], (folder) => lutimes(folder, at, at).catch(() => undefined));
    } finally {
      this.ticking = false;
    }
  }
}
