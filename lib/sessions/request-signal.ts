/**
 * Node's fetch keeps an abort listener on a request's signal until the request object is garbage-collected. The
 * SDK's HTTP transports pass one signal (the session's) to every request, so a long-lived session piles up one
 * listener per call between collections (thousands on a busy worker, with `MaxListenersExceededWarning`). Each
 * request here gets a signal of its own that follows the session's: the session's signal holds no listener.
 */
type FetchInput = Parameters<typeof fetch>[0];

export function fetchWithOwnSignal(input: FetchInput, init?: RequestInit): Promise<Response> {
  const shared = init?.signal;
  return fetch(input, shared ? { ...init, signal: AbortSignal.any([shared]) } : init);
}
