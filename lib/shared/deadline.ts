export class DeadlineExceededError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`timed out after ${(timeoutMs / 1000).toFixed(1)}s`);
    this.name = "DeadlineExceededError";
  }
}

interface AbortFanOut {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

const fanOuts = new WeakMap<AbortSignal, AbortFanOut>();

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
export async function withDeadline<T>(
  work: (signal: AbortSignal) => Promise<T>,
  timeoutMs: number | null,
  outer?: AbortSignal,
): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let unsubscribe: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    const fail = (reason: unknown) => {
      controller.abort(reason);
      reject(reason);
    };
    if (timeoutMs !== null) timer = setTimeout(() => fail(new DeadlineExceededError(timeoutMs)), timeoutMs);
    if (outer) unsubscribe = onAbort(outer, () => fail(outer.reason));
  });
  aborted.catch(() => undefined);
  try {
    return await Promise.race([work(controller.signal), aborted]);
  } finally {
    if (timer) clearTimeout(timer);
    unsubscribe?.();
  }
}
