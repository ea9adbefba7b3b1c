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

/** The id of the JSON-RPC request a POST carries (one request, not a batch or a notification). */
function requestIdOf(init: RequestInit | undefined): RequestId | undefined {
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
function observeReads(stream: ReadableStream<unknown>, pipes: number, observe: (result: ReadResult | undefined) => void): void {
  if (pipes > 0) {
    const pipeThrough = stream.pipeThrough.bind(stream) as (transform: ReadableWritablePair<unknown, unknown>, options?: StreamPipeOptions) => ReadableStream<unknown>;
    Object.defineProperty(stream, "pipeThrough", {
      configurable: true,
      value: (transform: ReadableWritablePair<unknown, unknown>, options?: StreamPipeOptions) => {
        const piped = pipeThrough(transform, options);
        observeReads(piped, pipes - 1, observe);
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
 * Streamable HTTP: a request's answer comes on the SSE stream of its own POST. When that stream ends or breaks
 * without the answer and without an event id to resume from (the server restarted, or expired the session, with the
 * call running), the SDK leaves the call waiting until its timeout; this watch answers it at once with a JSON-RPC
 * error of code `LOST_CALL_CODE` instead. A stream with event ids is resumed by the SDK (a GET with `Last-Event-ID`):
 * that stream is watched the same way, and a resumption the server refuses loses the call too.
 */
export class LostCallWatch {
  /** Requests sent with an SSE response and not answered yet, by the text of their id. */
  private readonly pending = new Map<string, RequestId>();
  /** Requests whose stream ended resumable, by the last event id the SDK resumes from. */
  private readonly resuming = new Map<string, RequestId>();
  private transport: Transport | undefined;

  /** Sees every message the transport hands the client, to know which requests were answered. */
  attach(transport: Transport): void {
    this.transport = transport;
    const start = transport.start.bind(transport);
    transport.start = () => {
      // Set by the client as it connects, before start().
      const deliver = transport.onmessage;
      transport.onmessage = <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => {
        if ("id" in message && !("method" in message) && message.id !== undefined) this.pending.delete(String(message.id));
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
      const resumed = resumedFrom === null ? undefined : this.resuming.get(resumedFrom);
      if (resumed !== undefined) this.resuming.delete(resumedFrom!);
      let response: Response;
      try {
        response = await base(input, init);
      } catch (err) {
        // No answer at all (the server is down): the SDK tries again from the same event, and that try is watched.
        if (resumed !== undefined) this.resuming.set(resumedFrom!, resumed);
        throw err;
      }
      if (resumed !== undefined) {
        if (response.ok && response.body !== null) this.watch(response.body, resumed);
        else if (refusesResumption(response.status)) setImmediate(() => this.lost(resumed));
        // A redirect (the SDK follows it with another fetch) or a transient failure (the SDK tries again).
        else this.resuming.set(resumedFrom!, resumed);
        return response;
      }
      const type = response.headers.get("content-type")?.toLowerCase();
      if (!response.ok || response.body === null || !type?.includes("text/event-stream")) return response;
      const id = requestIdOf(init);
      if (id === undefined) return response;
      this.pending.set(String(id), id);
      this.watch(response.body, id);
      return response;
    };
  }

  private watch(body: ReadableStream<Uint8Array>, id: RequestId): void {
    let lastEventId: string | undefined;
    observeReads(body, 2, (result) => {
      if (result && !result.done) {
        if (result.value?.id) lastEventId = result.value.id;
        return;
      }
      // Ended or broken. Checked once the client has handled what it read last.
      setImmediate(() => this.ended(id, lastEventId));
    });
  }

  private ended(id: RequestId, lastEventId: string | undefined): void {
    if (!this.pending.has(String(id))) return;
    // The SDK resumes a stream whose events had ids: its GET from the last one is watched instead.
    if (lastEventId !== undefined) this.resuming.set(lastEventId, id);
    else this.lost(id);
  }

  private lost(id: RequestId): void {
    if (!this.pending.delete(String(id))) return;
    this.transport?.onmessage?.({ jsonrpc: "2.0", id, error: { code: LOST_CALL_CODE, message: LOST_CALL_MESSAGE } });
  }
}
