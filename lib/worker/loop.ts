/**
 * `startTaskWorker` (SPEC §7): runs the worker graph one tick at a time on an interval, in this process.
 * Ticks never overlap: the next is scheduled when the last one ends, or runs at once when the last one took a
 * full batch (so one worker keeps up with more due tasks than `max_concurrent_polls` per interval). A failed tick
 * is logged and the loop goes on. `stop()` lets the tick in progress finish (for at most `drainTimeoutMs`), then abandons it: what it had
 * claimed stays leased until the lease expires, and fenced writes keep a late answer from landing.
 */
import { McpTasksDisabledError, type TaskNotifier, type TaskRuntime } from "../tasks";
import { consoleLogger, type Logger } from "../shared/logger";
import { withCallSignal } from "../shared/abort";
import { setClampedTimeout } from "../shared/timers";
import { cutCodePoints } from "../tasks/payload";
import { builtOnDisabledRuntime, createTaskWorkerGraph, tickReport, type TaskWorkerGraph, type TaskWorkerTickReport } from "./graph";

const LOGGED_ERROR_MAX_CHARS = 500;
const DEFAULT_DRAIN_TIMEOUT_MS = 10_000;

export interface TaskWorkerOptions {
  /** The runtime to build the graph on; or give `graph`. */
  runtime?: TaskRuntime;
  /** A worker graph (`createTaskWorkerGraph`) to drive instead. */
  graph?: TaskWorkerGraph;
  /** With `runtime`: the notifier the graph installs on it. */
  notifier?: TaskNotifier;
  /** Pause between the end of one tick and the start of the next. */
  intervalMs: number;
  /** Called after every tick that completed (awaited before the next tick is scheduled). */
  onTick?: (report: TaskWorkerTickReport) => void | Promise<void>;
  /** Called with the error of every tick that failed (after it is logged). */
  onError?: (error: unknown) => void;
  /** The `now` of each tick; default the runtime's clock. */
  clock?: () => Date;
  /** How long `stop()` waits for a tick in progress before abandoning it (default 10 s). */
  drainTimeoutMs?: number;
  logger?: Logger;
}

export interface TaskWorker {
  /** Stops scheduling, drains or abandons the tick in progress. Does not stop the runtime. Idempotent. */
  stop(): Promise<void>;
  /** Ticks finished so far (failed ones included). */
  readonly ticks: number;
}

export function startTaskWorker(options: TaskWorkerOptions): TaskWorker {
  if (!(options.intervalMs >= 0) || !Number.isFinite(options.intervalMs)) throw new RangeError("intervalMs must be a finite number ≥ 0");
  const logger = options.logger ?? consoleLogger;
  let graph: TaskWorkerGraph;
  if (options.graph) {
    if (options.runtime || options.notifier) throw new TypeError("give startTaskWorker either a graph or a runtime (with its notifier), not both");
    // Every tick would fail: refuse now, once, rather than log that failure every interval.
    if (builtOnDisabledRuntime(options.graph)) throw new McpTasksDisabledError();
    graph = options.graph;
  } else if (options.runtime) {
    if (!options.runtime.enabled) throw new McpTasksDisabledError();
    graph = createTaskWorkerGraph({ runtime: options.runtime, notifier: options.notifier, logger });
  } else {
    throw new TypeError("startTaskWorker needs a runtime or a graph");
  }

  const abandon = new AbortController();
  let stopping = false;
  let stopped: Promise<void> | null = null;
  let timer: NodeJS.Timeout | undefined;
  let current: Promise<void> | null = null;
  let ticks = 0;

  /** Whether the last tick left work due now (a full batch): the next one then runs without the pause. */
  let backlog = false;

  const tick = async (): Promise<void> => {
    backlog = false;
    try {
      const now = options.clock?.().toISOString() ?? null;
      // Aborting the signal ends the invocation at once, even with a node still awaiting a remote call.
      const state = await withCallSignal(abandon.signal, (signal) => graph.invoke({ now }, { signal }));
      const report = tickReport(state);
      backlog = report.backlog;
      await options.onTick?.(report);
    } catch (err) {
      if (abandon.signal.aborted) return;
      logger.error(`MCP task worker tick failed; the next tick runs as scheduled: ${cutCodePoints(err instanceof Error ? err.message || err.name : String(err), LOGGED_ERROR_MAX_CHARS)}`);
      try {
        options.onError?.(err);
      } catch {
        // a throwing observer must not end the loop
      }
    } finally {
      ticks += 1;
    }
  };

  const run = (): void => {
    timer = undefined;
    if (stopping) return;
    current = tick().finally(() => {
      current = null;
      if (!stopping) timer = setClampedTimeout(run, backlog ? 0 : options.intervalMs);
    });
  };
  timer = setClampedTimeout(run, 0);

  const drain = async (): Promise<void> => {
    stopping = true;
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    const inProgress = current;
    if (!inProgress) return;
    let wait: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      wait = setClampedTimeout(() => resolve(true), options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS);
    });
    const late = await Promise.race([inProgress.then(() => false), timedOut]);
    clearTimeout(wait);
    if (late) {
      logger.warn("MCP task worker abandoned its tick in progress; its leases expire for recovery");
      abandon.abort(new Error("the task worker stopped"));
      await inProgress;
    }
  };

  return {
    stop: () => (stopped ??= drain()),
    get ticks() {
      return ticks;
    },
  };
}
