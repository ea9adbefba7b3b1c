import { deserializeMessage, ReadBuffer } from "@modelcontextprotocol/sdk/shared/stdio.js";
import { ErrorCode, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

/**
 * The largest stdio message read (64 MiB). The SDK's own limit is 10 MiB, and a longer message made its
 * transport fail and close the session, killing the child. A longer message is now discarded instead: the
 * call it answers fails with a clear error and the session goes on. Results are cut far below this
 * before they reach a ToolMessage (`maxResultChars`); this only bounds what is held in memory while reading.
 */
export const DEFAULT_STDIO_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** Bytes kept of each end of a discarded message, enough to find its JSON-RPC id. */
const EDGE_BYTES = 256;

const SCALAR = String.raw`(?:"(?:[^"\\]|\\.)*"|-?\d+)`;
/** A response's opening: only `jsonrpc`/`id` pairs before `"result"` or `"error"`. */
const RESPONSE_HEAD = new RegExp(String.raw`^\s*\{((?:\s*"(?:jsonrpc|id)"\s*:\s*${SCALAR}\s*,)*)\s*"(?:result|error)"\s*:`);
/** Top-level `jsonrpc`/`id` pairs after the result, closing the message. */
const RESPONSE_TAIL = new RegExp(String.raw`((?:,\s*"(?:jsonrpc|id)"\s*:\s*${SCALAR}\s*)+)\}\s*$`);
const ID_PAIR = new RegExp(String.raw`"id"\s*:\s*(${SCALAR})`);

export interface DiscardedMessage {
  bytes: number;
  /** The JSON-RPC id of the response, when the message was recognisably one. */
  id: string | number | undefined;
}

/** The id of a response whose first and last bytes are `head` and `tail`; undefined when not recognisable. */
export function responseIdOf(head: string, tail: string): string | number | undefined {
  const opening = RESPONSE_HEAD.exec(head);
  if (!opening) return undefined;
  const pairs = ID_PAIR.exec(opening[1]) ?? ID_PAIR.exec(RESPONSE_TAIL.exec(tail)?.[1] ?? "");
  if (!pairs) return undefined;
  return JSON.parse(pairs[1]) as string | number;
}

interface Discarding {
  bytes: number;
  head: Buffer;
  tail: Buffer;
}

/**
 * Splits a stdio stream into JSON-RPC messages, like the SDK's `ReadBuffer`, but
 * - linear in the message size (the SDK's buffer copies everything read so far on each chunk), and
 * - a line above `maxMessageBytes` is discarded rather than failing the transport. When it is a response,
 *   its request gets an error response of ours in its place, so the call fails now instead of at its timeout.
 */
export class StdioLineBuffer {
  /**
   * The line read so far (its first `lineBytes` bytes), copied out of the chunks: pieces kept as they came would hold
   * each chunk's whole backing store, so a line arriving a byte per read took ~55 bytes of memory per byte.
   */
  private line: Buffer | null = null;
  private lineBytes = 0;
  private discarding: Discarding | null = null;
  private readonly ready: Array<string | JSONRPCMessage> = [];

  constructor(
    private readonly maxMessageBytes: number,
    private readonly onDiscard: (discarded: DiscardedMessage) => void = () => undefined,
  ) {}

  append(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(10, start);
      if (newline === -1) {
        this.add(chunk.subarray(start));
        break;
      }
      const end = newline > start && chunk[newline - 1] === 13 ? newline - 1 : newline;
      if (this.lineBytes === 0 && this.discarding === null && end - start <= this.maxMessageBytes) {
        // The whole line is in this chunk (the usual case): decoded in place, no piece kept.
        this.ready.push(chunk.toString("utf8", start, end));
      } else {
        if (newline > start) this.add(chunk.subarray(start, newline));
        this.endLine();
      }
      start = newline + 1;
    }
  }

  /** The next complete message, or null. Throws for a line that is not a JSON-RPC message (the transport reports it and reads on). */
  readMessage(): JSONRPCMessage | null {
    for (let next = this.ready.shift(); next !== undefined; next = this.ready.shift()) {
      if (typeof next !== "string") return next;
      if (!isBlank(next)) return deserializeMessage(next);
    }
    return null;
  }

  clear(): void {
    this.line = null;
    this.lineBytes = 0;
    this.discarding = null;
    this.ready.length = 0;
  }

  private add(piece: Buffer): void {
    const discarding = this.discarding;
    if (discarding) {
      discarding.bytes += piece.length;
      discarding.tail = lastBytes(Buffer.concat([discarding.tail, lastBytes(piece, EDGE_BYTES)]), EDGE_BYTES);
      return;
    }
    const total = this.lineBytes + piece.length;
    // A CR that may end the line (CRLF) is not part of the message.
    if (total <= this.maxMessageBytes + (piece[piece.length - 1] === 13 ? 1 : 0)) {
      if (this.line === null || this.line.length < total) {
        const grown = Buffer.allocUnsafe(Math.max(total, Math.min(2 * (this.line?.length ?? 0), this.maxMessageBytes + 1), 1024));
        this.line?.copy(grown, 0, 0, this.lineBytes);
        this.line = grown;
      }
      piece.copy(this.line, this.lineBytes);
      this.lineBytes = total;
      return;
    }
    const read = this.line === null ? [piece] : [this.line.subarray(0, this.lineBytes), piece];
    this.discarding = {
      bytes: total,
      head: firstBytes(read, EDGE_BYTES),
      // Of what was read, not of the last piece alone: a short last read would hide the id a response ends with.
      tail: lastBytes(Buffer.concat(read.map((bytes) => lastBytes(bytes, EDGE_BYTES))), EDGE_BYTES),
    };
    this.line = null;
    this.lineBytes = 0;
  }

  private endLine(): void {
    const discarding = this.discarding;
    if (discarding) {
      this.discarding = null;
      const id = responseIdOf(discarding.head.toString("utf8"), discarding.tail.toString("utf8").replace(/\r$/, ""));
      this.onDiscard({ bytes: discarding.bytes, id });
      if (id !== undefined) {
        this.ready.push({
          jsonrpc: "2.0",
          id,
          error: {
            code: ErrorCode.InternalError,
            message: `the server's response of ${discarding.bytes} bytes is larger than the stdio message limit of ${this.maxMessageBytes} bytes (stdioMaxMessageBytes); it was discarded`,
          },
        });
      }
      return;
    }
    if (this.lineBytes === 0 || this.line === null) return;
    const end = this.line[this.lineBytes - 1] === 13 ? this.lineBytes - 1 : this.lineBytes;
    const text = this.line.toString("utf8", 0, end);
    this.line = null;
    this.lineBytes = 0;
    this.ready.push(text);
  }
}

/** Whether `text` is only whitespace (a blank line between messages); a JSON-RPC message's "{" answers at once. */
function isBlank(text: string): boolean {
  return text.charCodeAt(0) !== 123 && text.trim() === "";
}

/** A copy of the first `n` bytes of `chunks`. */
function firstBytes(chunks: readonly Buffer[], n: number): Buffer {
  const taken: Buffer[] = [];
  let size = 0;
  for (const chunk of chunks) {
    if (size >= n) break;
    taken.push(chunk.subarray(0, n - size));
    size += taken[taken.length - 1].length;
  }
  return Buffer.concat(taken, size);
}

function lastBytes(buffer: Buffer, n: number): Buffer {
  return buffer.length <= n ? buffer : buffer.subarray(buffer.length - n);
}

/**
 * Puts `buffer` in place of the SDK stdio transport's own read buffer (a private field of SDK 1.x).
 * Returns false, leaving the transport as it was, when the SDK no longer has that field.
 */
export function installLineBuffer(transport: object, buffer: StdioLineBuffer): boolean {
  const holder = transport as { _readBuffer?: unknown };
  if (!(holder._readBuffer instanceof ReadBuffer)) return false;
  holder._readBuffer = buffer;
  return true;
}
