import { setClampedTimeout } from "./timers";

/** `timeout`: no result (or progress) in time; `maxTotal`: the hard cap on the whole run was reached. */
export type DeadlineKind = "timeout" | "maxTotal";

export class DeadlineExceededError extends Error {
  constructor(
    readonly timeoutMs: number,
    readonly kind: DeadlineKind = "timeout",
  ) {
    super(
      kind === "timeout"
        ? `timed out after ${(timeoutMs / 1000).toFixed(1)}s`
        : `reached its maximum total time of ${(timeoutMs / 1000).toFixed(1)}s`,
    );
    this.name = "DeadlineExceededError";
  }
}

export interface DeadlineLimits {
  /** Milliseconds the work may run; `extend()` restarts this count. `null` = no bound. */
  timeoutMs: number | null;
  /** Milliseconds the work may run in all, however often it is extended. `null`/absent = no cap. */
  maxTotalMs?: number | null;
}

/**
 * Runs `work` with a signal that aborts after `timeoutMs` (or when `outer` aborts), and settles by then
 * even if `work` ignores its signal. `null` means no deadline.
 */
export function withDeadline<T>(
  work: (signal: AbortSignal) => Promise<T>,
  timeoutMs: number | null,
  outer?: AbortSignal,
): Promise<T> {
  return withExtendableDeadline((signal) => work(signal), { timeoutMs }, outer);
}

/**
 * `withDeadline` whose timeout `work` can restart by calling `extend()` (e.g. on each progress
 * notification), bounded by `maxTotalMs` however often it does. Delays are clamped to what a timer holds.
 */
export async function withExtendableDeadline<T>(
  work: (signal: AbortSignal, extend: () => void) => Promise<T>,
  limits: DeadlineLimits,
  outer?: AbortSignal,
): Promise<T> {
  const { timeoutMs } = limits;
  const maxTotalMs = limits.maxTotalMs ?? null;
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let totalTimer: NodeJS.Timeout | undefined;
  let onOuterAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    const fail = (reason: unknown) => {
      if (controller.signal.aborted) return;
      controller.abort(reason);
      reject(reason);
    };
    if (timeoutMs !== null) timer = setClampedTimeout(() => fail(new DeadlineExceededError(timeoutMs, "timeout")), timeoutMs);
    if (maxTotalMs !== null) {
      totalTimer = setClampedTimeout(() => fail(new DeadlineExceededError(maxTotalMs, "maxTotal")), maxTotalMs);
    }
    if (outer) {
      if (outer.aborted) fail(outer.reason);
      onOuterAbort = () => fail(outer.reason);
      outer.addEventListener("abort", onOuterAbort, { once: true });
    }
  });
  aborted.catch(() => undefined);
  const extend = () => {
    if (!controller.signal.aborted) timer?.refresh();
  };
  try {
    return await Promise.race([work(controller.signal, extend), aborted]);
  } finally {
    if (timer) clearTimeout(timer);
    if (totalTimer) clearTimeout(totalTimer);
    if (outer && onOuterAbort) outer.removeEventListener("abort", onOuterAbort);
  }
}
