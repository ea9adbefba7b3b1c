import type { ReadableStreamReadResult, ReadableWritablePair, StreamPipeOptions } from "node:stream/web";
import { McpError, type JSONRPCMessage, type MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

/** JSON-RPC error code (implementation-defined range) of a call whose response stream ended without its answer. */
export const LOST_CALL_CODE = -32098;

const LOST_CALL_MESSAGE = "the server ended the call's response stream without an answer";

/** Whether `err` is the failure `LostCallWatch` gave a call the server dropped. */
export function isLostCall(err: unknown): boolean {
  return err instanceof McpError && err.code === LOST_CALL_CODE;
}

type RequestId = string | number;

/** A resumption the server will not grant on retry: it does not know the session or stream (404, 400, 410, …). */
function refusesResumption(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 429;
}

/** How the SDK writes a request: `{"method":…,"jsonrpc":"2.0","id":<id>}`, its id last. */
const SDK_REQUEST_ID = /,"jsonrpc":"2\.0","id":(\d+)\}$/;

/** How the SDK writes a cancellation: `{"method":"notifications/cancelled","params":{"requestId":<id>,…}…}`. */
const SDK_CANCELLATION = '{"method":"notifications/cancelled",';

/** The id of the request a POST cancels (`notifications/cancelled`); undefined for any other body. */
export function cancelledIdOf(init: RequestInit | undefined): RequestId | undefined {
  const body = init?.body;
  if (init?.method !== "POST" || typeof body !== "string") return undefined;
  if (!body.startsWith(SDK_CANCELLATION) && (body.startsWith('{"method":') || !body.includes('"notifications/cancelled"'))) return undefined;
  try {
    const message = JSON.parse(body) as { method?: unknown; params?: { requestId?: unknown } };
    const id = message.params?.requestId;
    return message.method === "notifications/cancelled" && (typeof id === "string" || typeof id === "number") ? id : undefined;
  } catch {
    return undefined;
  }
}

/** The id of the JSON-RPC request a POST carries (one request, not a batch or a notification). */
export function requestIdOf(init: RequestInit | undefined): RequestId | undefined {
  if (init?.method !== "POST" || typeof init.body !== "string") return undefined;
  // Read from the end when the SDK wrote it (a call's arguments may be large); parsed otherwise.
  const written = init.body.startsWith('{"method":') ? SDK_REQUEST_ID.exec(init.body.slice(-48)) : null;
  if (written) return Number(written[1]);
  try {
    const message = JSON.parse(init.body) as { id?: unknown; method?: unknown };
    return typeof message.method === "string" && (typeof message.id === "string" || typeof message.id === "number") ? message.id : undefined;
  } catch {
    return undefined;
  }
}

/** What the SDK reads of an SSE response: parsed events (`id` set on an event a client can resume from). */
interface ParsedEvent {
  readonly id?: string;
}

type ReadResult = ReadableStreamReadResult<ParsedEvent>;

/**
 * Calls `observe` with each read the SDK makes of `stream` after piping it through `pipes` transforms (its text
 * decoder, then its SSE parser), and `observe(undefined)` when a read fails. Nothing is added to the pipeline: the
 * pipes and the reader are the SDK's own, only their methods on these objects are wrapped. Should the SDK read the
 * stream some other way, nothing is observed and calls keep their old behaviour (they wait for their timeout).
 */
function observeReads(
  stream: ReadableStream<unknown>,
  pipes: number,
  observe: (result: ReadResult | undefined) => void,
  onReader: (reader: ReadableStreamDefaultReader<ParsedEvent>) => void,
): void {
  if (pipes > 0) {
    const pipeThrough = stream.pipeThrough.bind(stream) as (transform: ReadableWritablePair<unknown, unknown>, options?: StreamPipeOptions) => ReadableStream<unknown>;
    Object.defineProperty(stream, "pipeThrough", {
      configurable: true,
      value: (transform: ReadableWritablePair<unknown, unknown>, options?: StreamPipeOptions) => {
        const piped = pipeThrough(transform, options);
        observeReads(piped, pipes - 1, observe, onReader);
        return piped;
      },
    });
    return;
  }
  const getReader = stream.getReader.bind(stream) as () => ReadableStreamDefaultReader<ParsedEvent>;
  Object.defineProperty(stream, "getReader", {
    configurable: true,
    value: () => {
      const reader = getReader();
      onReader(reader);
      const read = reader.read.bind(reader);
      Object.defineProperty(reader, "read", {
        configurable: true,
        value: () =>
          read().then(
            (result) => {
              observe(result);
              return result;
            },
            (err: unknown) => {
              observe(undefined);
              throw err;
            },
          ),
      });
      return reader;
    },
  });
}

/**
 * How the SDK resumes a stream that ended without its answer (its defaults), given to every Streamable HTTP transport
 * so the watch knows after how many failed tries the SDK gives up.
 */
export const RECONNECTION = {
  initialReconnectionDelay: 1000,
  maxReconnectionDelay: 30_000,
  reconnectionDelayGrowFactor: 1.5,
  maxRetries: 2,
} as const;

/** A request's answer stream, while its answer has not come. */
interface AnswerStream {
  readonly body: ReadableStream<Uint8Array>;
  /**
   * Its request's own abort, linked to the transport's signal until the answer came or the stream ended; none for a
   * resumed stream (its GET carries the transport's signal itself).
   */
  readonly abort?: LinkedAbort;
  /** The SDK's reader at the end of its pipeline, once it has one. */
  reader?: ReadableStreamDefaultReader<ParsedEvent>;
  lastEventId?: string;
  /** Its answer was a JSON-RPC error: the SDK resumes such a stream all the same (it stops only for a result). */
  answeredWithError?: boolean;
}

/**
 * A request's own abort, so that the watch can end a request it saw given up, while the transport's signal (which the
 * SDK aborts on close) still ends it too. One listener per transport signal aborts every linked request: a listener
 * per request, or `AbortSignal.any`, would pile up on a signal that lives as long as the session (on Node 20,
 * `AbortSignal.any` keeps every combined signal and costs ~10 µs a call once there are many).
 */
export class LinkedAbort {
  readonly controller = new AbortController();

  constructor(
    private readonly links: Links,
    private readonly outer: AbortSignal | null | undefined,
  ) {
    if (!outer) return;
    if (outer.aborted) {
      this.controller.abort(outer.reason);
      return;
    }
    let linked = links.get(outer);
    if (linked === undefined) {
      const all = new Set<LinkedAbort>();
      linked = all;
      links.set(outer, all);
      outer.addEventListener(
        "abort",
        () => {
          for (const each of all) each.controller.abort(outer.reason);
          links.delete(outer);
        },
        { once: true },
      );
    }
    linked.add(this);
  }

  /** The request's response is read, or no longer watched: the transport's close need not reach it through here. */
  unlink(): void {
    if (this.outer) this.links.get(this.outer)?.delete(this);
  }
}

/** The requests linked to each transport signal (a watch's transport has one at a time). */
export type Links = Map<AbortSignal, Set<LinkedAbort>>;

/** A stream the SDK will resume: the request it answers and the tries that failed so far. */
interface Resumption {
  readonly id: RequestId;
  failures: number;
}

/** How a server says it has no stream to offer on GET: the SDK stops there, without an error. */
function noStreamOffered(): Response {
  return new Response(null, { status: 405, statusText: "Method Not Allowed" });
}

/** Event ids of given-up streams whose resumption is still to come (bounded: the SDK may never come back for them). */
const MAX_GIVEN_UP = 1024;

/**
 * Streamable HTTP: a request's answer comes on the SSE stream of its own POST. When that stream ends or breaks
 * without the answer and without an event id to resume from (the server restarted, or expired the session, with the
 * call running), the SDK leaves the call waiting until its timeout; this watch answers it at once with a JSON-RPC
 * error of code `LOST_CALL_CODE` instead. A stream with event ids is resumed by the SDK (a GET with `Last-Event-ID`):
 * that stream is watched the same way, and the call is lost too when the server refuses the resumption or when the
 * SDK gives up after its last failed try.
 *
 * A request the client gave up (its deadline, a cancelled run: the SDK sends `notifications/cancelled`) gets no
 * answer from the server, so its stream would stay open, holding a connection, for the life of the session: the
 * watch closes it, and keeps the SDK from resuming it. A request answered with a JSON-RPC error is not resumed either:
 * the SDK resumes its stream all the same, and the server would hold that stream, a connection, for the session's life.
 */
export class LostCallWatch {
  /** Requests sent with an SSE response and not answered yet, by the text of their id. */
  private readonly pending = new Map<string, AnswerStream>();
  /** Requests whose stream ended resumable, by the last event id the SDK resumes from. */
  private readonly resuming = new Map<string, Resumption>();
  /** Requests posted whose response has not arrived yet (each with the abort of its fetch), and those of them given up meanwhile. */
  private readonly posting = new Map<string, LinkedAbort>();
  private readonly givenUpPosting = new Set<string>();
  /** Last event ids of given-up streams: the SDK's resumption of one is answered here, without the network. */
  private readonly givenUpStreams = new Set<string>();
  private readonly links: Links = new Map();
  private transport: Transport | undefined;

  /** Requests and streams the watch still holds anything for (for tests and diagnostics). */
  get tracked(): number {
    let linked = 0;
    for (const set of this.links.values()) linked += set.size;
    return this.pending.size + this.resuming.size + this.posting.size + this.givenUpPosting.size + this.givenUpStreams.size + linked;
  }

  /** Sees every message the transport hands the client, to know which requests were answered. */
  attach(transport: Transport): void {
    this.transport = transport;
    const start = transport.start.bind(transport);
    transport.start = () => {
      // Set by the client as it connects, before start().
      const deliver = transport.onmessage;
      transport.onmessage = <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => {
        if ("id" in message && !("method" in message) && message.id !== undefined) this.answered(String(message.id), "error" in message);
        deliver?.(message, extra);
      };
      return start();
    };
  }

  /**
   * The transport's fetch: each request's SSE response is watched for an end without the answer, and so is the
   * stream the SDK resumes it on; a resumption the server refuses (it no longer knows the session) loses the call.
   */
  fetch(base: typeof fetch = fetch): typeof fetch {
    return async (input, init) => {
      const resumedFrom = init?.method === "GET" ? new Headers(init.headers).get("last-event-id") : null;
      if (resumedFrom !== null) return this.resume(base, input, init, resumedFrom);
      const cancelled = cancelledIdOf(init);
      if (cancelled !== undefined) this.giveUp(String(cancelled));
      const id = requestIdOf(init);
      if (id === undefined) return base(input, init);
      const key = String(id);
      const abort = new LinkedAbort(this.links, init?.signal);
      this.posting.set(key, abort);
      let response: Response;
      let givenUp = false;
      try {
        response = await base(input, { ...init, signal: abort.controller.signal });
      } catch (err) {
        abort.unlink();
        // Given up while its response was awaited (a plain-JSON answer comes only with the result, which the server never
        // sends for a cancelled request): the fetch was aborted, and the SDK, which already gave the call up, is told
        // nothing more.
        if (abort.controller.signal.aborted && this.givenUpPosting.has(key)) return new Response(null, { status: 202 });
        throw err;
      } finally {
        this.posting.delete(key);
        givenUp = this.givenUpPosting.delete(key);
      }
      const type = response.headers.get("content-type")?.toLowerCase();
      if (!response.ok || response.body === null || !type?.includes("text/event-stream")) {
        abort.unlink();
        return response;
      }
      if (givenUp) {
        abort.unlink();
        // Given up before its stream opened: closed unread (the SDK reads no event, so it resumes nothing).
        void response.body.cancel().catch(() => undefined);
        return response;
      }
      this.watch(response.body, id, abort);
      return response;
    };
  }

  /** A GET resuming a stream: watched when it is one of ours, answered here when its call was given up. */
  private async resume(base: typeof fetch, input: Parameters<typeof fetch>[0], init: RequestInit | undefined, from: string): Promise<Response> {
    if (this.givenUpStreams.delete(from)) return noStreamOffered();
    const resumed = this.resuming.get(from);
    if (resumed === undefined) return base(input, init);
    this.resuming.delete(from);
    let response: Response;
    try {
      response = await base(input, init);
    } catch (err) {
      // No answer at all (the server is down): the SDK tries again from the same event, unless that was its last
      // try. Given up meanwhile: that next try is answered here.
      if (!this.givenUpStreams.has(from)) this.failedTry(from, resumed);
      throw err;
    }
    if (this.givenUpStreams.delete(from)) {
      // Given up while the resumption was on its way: its stream is closed unread, and the SDK stops resuming it.
      void response.body?.cancel().catch(() => undefined);
      return noStreamOffered();
    }
    if (response.ok && response.body !== null) this.watch(response.body, resumed.id);
    else if (refusesResumption(response.status)) setImmediate(() => this.lost(resumed.id));
    // A redirect: the SDK follows it (with the same event id) or, across origins, fails the try; not counted, so a
    // redirect off the origin on every try leaves the call to its timeout.
    else if (response.status >= 300 && response.status < 400) this.resuming.set(from, resumed);
    // A transient failure (5xx, 408, 429): the SDK tries again, unless that was its last try.
    else this.failedTry(from, resumed);
    return response;
  }

  private failedTry(from: string, resumed: Resumption): void {
    resumed.failures += 1;
    if (resumed.failures >= RECONNECTION.maxRetries) setImmediate(() => this.lost(resumed.id));
    else this.resuming.set(from, resumed);
  }

  private watch(body: ReadableStream<Uint8Array>, id: RequestId, abort?: LinkedAbort): void {
    const stream: AnswerStream = { body, abort };
    this.pending.set(String(id), stream);
    observeReads(
      body,
      2,
      (result) => {
        if (result && !result.done) {
          if (result.value?.id) stream.lastEventId = result.value.id;
          return;
        }
        // Ended or broken. Checked once the client has handled what it read last.
        abort?.unlink();
        // Noted before the SDK sees the end: the resumption it schedules then is answered here, not by a stream the
        // server would hold open for the life of the session.
        if (stream.answeredWithError && stream.lastEventId !== undefined) this.rememberGivenUp(stream.lastEventId);
        setImmediate(() => this.ended(id, stream));
      },
      (reader) => (stream.reader = reader),
    );
  }

  private ended(id: RequestId, stream: AnswerStream): void {
    const key = String(id);
    if (this.pending.get(key) !== stream) return;
    // The SDK resumes a stream whose events had ids: its GET from the last one is watched instead.
    if (stream.lastEventId !== undefined) this.resuming.set(stream.lastEventId, { id, failures: 0 });
    else this.lost(id);
  }

  /**
   * The answer to request `key` came: its stream ends on its own. An error answer's stream with event ids is resumed by
   * the SDK once it ends: that resumption is answered here (see `watch`).
   */
  private answered(key: string, error: boolean): void {
    const stream = this.pending.get(key);
    if (stream === undefined) return;
    stream.abort?.unlink();
    this.pending.delete(key);
    if (error) stream.answeredWithError = true;
  }

  /** The client gave up request `key` (it sent `notifications/cancelled`): its stream is closed, not resumed. */
  private giveUp(key: string): void {
    const posting = this.posting.get(key);
    if (posting !== undefined) {
      this.givenUpPosting.add(key);
      posting.controller.abort();
      return;
    }
    const stream = this.pending.get(key);
    if (stream === undefined) return;
    this.pending.delete(key);
    stream.abort?.unlink();
    if (stream.lastEventId !== undefined) {
      // The SDK resumes a stream that ended (or ends when closed here) with event ids: that GET is answered here.
      this.resuming.delete(stream.lastEventId);
      this.rememberGivenUp(stream.lastEventId);
    }
    const closing = stream.reader ? stream.reader.cancel() : stream.body.locked ? undefined : stream.body.cancel();
    void closing?.catch(() => undefined);
  }

  private rememberGivenUp(lastEventId: string): void {
    this.givenUpStreams.add(lastEventId);
    if (this.givenUpStreams.size > MAX_GIVEN_UP) this.givenUpStreams.delete(this.givenUpStreams.values().next().value!);
  }

  private lost(id: RequestId): void {
    if (!this.pending.delete(String(id))) return;
    this.transport?.onmessage?.({ jsonrpc: "2.0", id, error: { code: LOST_CALL_CODE, message: LOST_CALL_MESSAGE } });
  }
}
