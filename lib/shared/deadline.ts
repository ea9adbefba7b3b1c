export class DeadlineExceededError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`timed out after ${(timeoutMs / 1000).toFixed(1)}s`);
    this.name = "DeadlineExceededError";
  }
}

/**
 * Runs `work` with a signal that aborts after `timeoutMs` (or when `outer` aborts), and settles by then
 * even if `work` ignores its signal. `null` means no deadline.
 */
export async function withDeadline<T>(
  work: (signal: AbortSignal) => Promise<T>,
  timeoutMs: number | null,
  outer?: AbortSignal,
): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let onOuterAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    const fail = (reason: unknown) => {
      controller.abort(reason);
      reject(reason);
    };
    if (timeoutMs !== null) timer = setTimeout(() => fail(new DeadlineExceededError(timeoutMs)), timeoutMs);
    if (outer) {
      if (outer.aborted) fail(outer.reason);
      onOuterAbort = () => fail(outer.reason);
      outer.addEventListener("abort", onOuterAbort, { once: true });
    }
  });
  aborted.catch(() => undefined);
  try {
    return await Promise.race([work(controller.signal), aborted]);
  } finally {
    if (timer) clearTimeout(timer);
    if (outer && onOuterAbort) outer.removeEventListener("abort", onOuterAbort);
  }
}
