import { onAbort } from "./deadline";

/**
 * A signal for one call that follows a long-lived `parent` and leaves nothing on it once the call ends.
 * LangGraph's `invoke` adds an abort listener to the signal it is given and never removes it; handed the same
 * long-lived signal on every tick or delivery, that signal would collect one listener (and one controller) per call.
 */
export async function withCallSignal<T>(parent: AbortSignal, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const own = new AbortController();
  const unsubscribe = onAbort(parent, () => own.abort(parent.reason));
  try {
    return await call(own.signal);
  } finally {
    unsubscribe();
  }
}
