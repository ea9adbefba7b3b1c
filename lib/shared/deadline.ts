import { setClampedTimeout } from "./timers";

/** `timeout`: no result (or progress) in time; `maxTotal`: the hard cap on the whole run was reached. */
export type DeadlineKind = "timeout" | "maxTotal";

/**
 * `ms` as seconds for a message: one decimal when that is exact ("0.5", "60.0"), else up to the millisecond ("0.04",
 * "0.25"), so a bound is never shown rounded to a value it is not (0.04 s as "0.0", 0.25 s as "0.3").
 */
export function secondsText(ms: number): string {
  const seconds = ms / 1000;
  const tenths = seconds.toFixed(1);
  return Number(tenths) === seconds ? tenths : String(Number(seconds.toFixed(3)));
}

export class DeadlineExceededError extends Error {
  constructor(
    readonly timeoutMs: number,
    readonly kind: DeadlineKind = "timeout",
  ) {
    super(
      kind === "timeout"
        ? `timed out after ${secondsText(timeoutMs)}s`
        : `reached its maximum total time of ${secondsText(timeoutMs)}s`,
    );
    this.name = "DeadlineExceededError";
  }
}

interface AbortFanOut {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

const fanOuts = new WeakMap<AbortSignal, AbortFanOut>();

export interface DeadlineLimits {
  /** Milliseconds the work may run; `extend()` restarts this count. `null` = no bound. */
  timeoutMs: number | null;
  /** Milliseconds the work may run in all, however often it is extended. `null`/absent = no cap. */
  maxTotalMs?: number | null;
}

/**
 * Calls `callback` once when `signal` aborts (at once if it already has); the returned function unsubscribes.
 * Every waiter of one signal shares a single `abort` listener, added by the first and removed when the last
 * unsubscribes: a run's signal is shared by all tool calls of a step, and a listener per call would pile up
 * (Node warns past 10: `MaxListenersExceededWarning`).
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  if (signal.aborted) {
    callback();
    return () => undefined;
  }
  let fanOut = fanOuts.get(signal);
  if (fanOut === undefined) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      fanOuts.delete(signal);
      for (const waiting of [...callbacks]) waiting();
      callbacks.clear();
    };
    fanOut = { callbacks, listener };
    fanOuts.set(signal, fanOut);
    signal.addEventListener("abort", listener, { once: true });
  }
  const own = fanOut;
  own.callbacks.add(callback);
  return () => {
    if (!own.callbacks.delete(callback) || own.callbacks.size > 0 || fanOuts.get(signal) !== own) return;
    fanOuts.delete(signal);
    signal.removeEventListener("abort", own.listener);
  };
}

/**
 * Runs `work` with a signal of its own that aborts after `timeoutMs` (or when `outer` aborts), and settles by
 * then even if `work` ignores its signal. `null` means no deadline. `work` never sees `outer` itself, so
 * whatever it hands the signal to (the MCP SDK adds a listener per request and never removes it) cannot pile
 * listeners onto a signal shared by many calls.
 */
export function withDeadline<T>(
  work: (signal: AbortSignal) => Promise<T>,
  timeoutMs: number | null,
  outer?: AbortSignal,
): Promise<T> {
  return withExtendableDeadline((signal) => work(signal), { timeoutMs }, outer);
}

/**
 * A running deadline: its signal aborts after `timeoutMs` (restarted by `extend()`), after `maxTotalMs` in all, or
 * when `outer` aborts, and `onStop` (if given) hears the reason. It has no promise of its own, so work that stops
 * at once when its signal aborts (an MCP SDK request rejects in the abort listener) needs nothing more: after a
 * failure, `reason` tells whether the deadline or `outer` caused it. `dispose()` once the work settled.
 */
export class Deadline {
  protected readonly controller = new AbortController();
  protected readonly timer: NodeJS.Timeout | undefined;
  private readonly totalTimer: NodeJS.Timeout | undefined;
  private readonly unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(
    limits: DeadlineLimits,
    outer?: AbortSignal,
    private readonly onStop?: (reason: unknown) => void,
  ) {
    const { timeoutMs } = limits;
    const maxTotalMs = limits.maxTotalMs ?? null;
    if (timeoutMs !== null) this.timer = setClampedTimeout(() => this.expire(timeoutMs), timeoutMs);
    if (maxTotalMs !== null) {
      this.totalTimer = setClampedTimeout(() => this.stop(new DeadlineExceededError(maxTotalMs, "maxTotal")), maxTotalMs);
    }
    if (outer) this.unsubscribe = onAbort(outer, () => this.cancelled(outer.reason));
  }

  /** The signal to hand the work; never `outer` itself (see `withDeadline`). */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Why the work was stopped: a `DeadlineExceededError` or `outer`'s reason; `undefined` while it was not. */
  get reason(): unknown {
    return this.controller.signal.aborted ? this.controller.signal.reason : undefined;
  }

  /** Whether the deadline ended the work (`onStop` heard it). */
  get hasStopped(): boolean {
    return this.stopped;
  }

  /** Restarts the `timeoutMs` count (not the total one). */
  extend(): void {
    if (!this.controller.signal.aborted) this.timer?.refresh();
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.totalTimer) clearTimeout(this.totalTimer);
    this.unsubscribe?.();
  }

  /** The `timeoutMs` count ran out. */
  protected expire(timeoutMs: number): void {
    this.stop(new DeadlineExceededError(timeoutMs, "timeout"));
  }

  /** `outer` aborted. May run inside the constructor. */
  protected cancelled(reason: unknown): void {
    this.stop(reason);
  }

  /** Ends the work (its signal aborts unless it already did) and tells `onStop`, once. May run inside the constructor. */
  protected stop(reason: unknown): void {
    if (this.stopped) return;
    this.stopped = true;
    if (!this.controller.signal.aborted) this.controller.abort(reason);
    this.dispose();
    this.onStop?.(reason);
  }
}

/**
 * `withDeadline` whose timeout `work` can restart by calling `extend()` (e.g. on each progress
 * notification), bounded by `maxTotalMs` however often it does. Delays are clamped to what a timer holds.
 */
export function withExtendableDeadline<T>(
  work: (signal: AbortSignal, extend: () => void) => Promise<T>,
  limits: DeadlineLimits,
  outer?: AbortSignal,
): Promise<T> {
  // One promise settled by whichever comes first (the work, a timer, the outer abort): no `Promise.race` over a
  // second promise per call.
  return new Promise<T>((resolve, reject) => {
    const deadline = new Deadline(limits, outer, reject);
    if (deadline.reason !== undefined) return;
    let running: Promise<T>;
    try {
      running = Promise.resolve(work(deadline.signal, () => deadline.extend()));
    } catch (err) {
      deadline.dispose();
      reject(err);
      return;
    }
    running.then(
      (value) => {
        deadline.dispose();
        resolve(value);
      },
      (err: unknown) => {
        deadline.dispose();
        reject(err);
      },
    );
  });
}
