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

/** How long the POST of a call given up may still take before it is aborted (as long as a session's DELETE gets). */
export const GIVEN_UP_POST_GRACE_MS = 2_000;

/**
 * The fetch of an SSE session's POSTs, for a call given up while its POST is still on its way (the SDK sends
 * `notifications/cancelled`: a cancelled run, the call's deadline). Each message is a POST of its own, so the
 * cancellation can overtake the call's POST, and a server that gets it first ignores it and runs the call to its end:
 * the cancellation is sent again once that POST is done (a server that holds the POST until it answered has the call
 * already: the first one is for it). A POST the server never answers (the call's answer would come on the event
 * stream) is aborted after a grace, rather than held, one connection per given-up call, until the session ends.
 */
export function postsOfGivenUpCalls(base: typeof fetch = fetch, graceMs = GIVEN_UP_POST_GRACE_MS): typeof fetch {
  const posting = new Map<string, { abort: LinkedAbort; done: Promise<void> }>();
  const links: Links = new Map();
  const post: typeof fetch = async (input, init) => {
    const cancelled = cancelledIdOf(init);
    const pending = cancelled === undefined ? undefined : posting.get(String(cancelled));
    if (pending !== undefined) {
      const grace = setTimeout(() => pending.abort.controller.abort(), graceMs);
      grace.unref();
      void pending.done
        .then(() => {
          clearTimeout(grace);
          return post(input, init);
        })
        .then((response) => response.body?.cancel(), () => undefined);
    }
    const id = requestIdOf(init);
    if (id === undefined) return base(input, init);
    const key = String(id);
    const abort = new LinkedAbort(links, init?.signal);
    const sent = base(input, { ...init, signal: abort.controller.signal });
    posting.set(key, { abort, done: sent.then(() => undefined, () => undefined) });
    try {
      return await sent;
    } finally {
      if (posting.get(key)?.abort === abort) posting.delete(key);
      abort.unlink();
    }
  };
  return post;
}
