import type { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { cancelledIdOf, LinkedAbort, requestIdOf, type Links } from "./lost-calls";

/**
 * The event stream's fetch for an SSE session, which lives as long as its stream: once the stream of a started session
 * ends or breaks (the server expired the session or restarted), the transport is closed, so its calls fail at once
 * instead of waiting for their timeout, and the pool drops it. Left alone, the SDK's EventSource would reconnect and
 * take the new stream's endpoint, a server session nobody initialized, and every later call would be sent there.
 * (`_endpoint` is a private field of SDK 1.x's transport: without it, a stream that ends is left to the SDK.)
 * `closed` aborts as the transport closes.
 */
export function endsSessionWithStream(transport: () => SSEClientTransport, closed: AbortSignal): typeof fetch {
  // Before the endpoint arrived, the SDK's own start fails or tries again; after it, the session is over.
  const started = () => (transport() as unknown as { _endpoint?: URL })._endpoint !== undefined;
  const ended = () => {
    if (started()) void transport().close();
  };
  return async (input, init) => {
    // The transport's close ends the stream's request also once the SDK gave up on it (a wrong content type, a non-200
    // status): its EventSource, already failed, would not abort it, and a server holding that response open would keep
    // the connection, and its session, for good.
    const signal = init?.signal ? AbortSignal.any([init.signal, closed]) : closed;
    const response = await fetch(input, { ...init, signal });
    if (started()) {
      // A reconnect: the session it belonged to is over, whatever this stream is.
      void response.body?.cancel().catch(() => undefined);
      void transport().close();
      return response;
    }
    // A redirect (the SDK follows it with a second fetch) or a failure is the SDK's to handle.
    return response.ok ? watchStreamEnd(response, ended) : response;
  };
}

/** `response` with its body passed through as it is, calling `onEnd` once the body has ended or broken (not when its reader cancels it). */
function watchStreamEnd(response: Response, onEnd: () => void): Response {
  const body = response.body;
  if (body === null) return response;
  const reader = body.getReader();
  const watched = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          onEnd();
          return;
        }
        controller.enqueue(value);
      } catch (err) {
        controller.error(err);
        onEnd();
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return new Response(watched, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/**
 * The fetch of an SSE session's POSTs: the POST of a request the client gave up (it sent `notifications/cancelled`: a
 * cancelled run, the call's deadline) is aborted. Its answer would come on the event stream; a server (or a network)
 * that never answers the POST itself would otherwise hold one connection per given-up call until the session ends.
 */
export function abortsGivenUpPosts(base: typeof fetch = fetch): typeof fetch {
  const posting = new Map<string, LinkedAbort>();
  const links: Links = new Map();
  return async (input, init) => {
    const cancelled = cancelledIdOf(init);
    if (cancelled !== undefined) posting.get(String(cancelled))?.controller.abort();
    const id = requestIdOf(init);
    if (id === undefined) return base(input, init);
    const key = String(id);
    const abort = new LinkedAbort(links, init?.signal);
    posting.set(key, abort);
    try {
      return await base(input, { ...init, signal: abort.controller.signal });
    } finally {
      if (posting.get(key) === abort) posting.delete(key);
      abort.unlink();
    }
  };
}
