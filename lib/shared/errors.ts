import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/**
 * A tool failure the model is shown as a clean line. Named "ToolException" like LangChain's, so tool error
 * handlers treat it the same way. Its text is scrubbed of the call's secrets like any other, unless this
 * project wrote it (`ownText`).
 */
export class McpToolCallError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ToolException";
  }
}

/** Each marked error with the text it was marked with. */
const own = new WeakMap<Error, string>();

/**
 * Marks an error whose text this project wrote from names, keys and codes only, never a value: it is shown
 * as it is, not scrubbed (a short secret that happens to be a server's name would otherwise blank it).
 */
export function ownText<E extends Error>(err: E): E {
  own.set(err, err.message);
  return err;
}

/** Only while its text is the one marked: an interceptor that adds to a caught error's message (what it sent) makes it its own. */
export function isOwnText(err: unknown): boolean {
  return err instanceof Error && own.get(err) === err.message;
}

/**
 * The message, with the cause's when it adds something: fetch's "fetch failed" hides "connect ECONNREFUSED …". An MCP
 * error's prefix appears once: the SDK server sends its prefixed message as the JSON-RPC error's text, and the SDK
 * client prefixes it again ("MCP error -32042: MCP error -32042: …").
 */
export function messageWithCause(err: unknown): string {
  const message = withHttpStatus(err, ((err as Error)?.message ?? String(err)).replace(/^(MCP error -?\d+: )\1+/, "$1"));
  const cause = (err as { cause?: unknown })?.cause;
  // Duck-typed: errors of another realm (undici's, seen from a VM context) fail `instanceof Error`.
  const causeMessage = typeof (cause as { message?: unknown })?.message === "string" ? (cause as { message: string }).message : undefined;
  return causeMessage && !message.includes(causeMessage) ? `${message} (${causeMessage})` : message;
}

/** The SDK's own words (`Error POSTing to endpoint`), then the response it quotes: the body, or the status text. */
const SDK_QUOTE = /^(Streamable HTTP error: [^:]*): ?([\s\S]*)$/;

/** The SSE transport's refusal of a POST, which names its status, when the body it quotes is empty. */
const SSE_EMPTY_REFUSAL = /^(Error POSTing to endpoint \(HTTP \d{3}\)):\s*$/;

/**
 * The SDK's Streamable HTTP error quotes the response body and keeps the status apart, where the SSE transport's error
 * names it ("Error POSTing to endpoint (HTTP 403): …"): the status is put where SSE puts it. A refusal with no body
 * (fastmcp's documented `authenticate` refusal, `new Response(null, { status: 401 })`) says so rather than end in ':', on
 * either transport.
 */
function withHttpStatus(err: unknown, message: string): string {
  if (!(err instanceof StreamableHTTPError)) return message.replace(SSE_EMPTY_REFUSAL, "$1 with an empty body");
  if (err.code === undefined || err.code < 100) return message;
  const quoted = SDK_QUOTE.exec(message);
  if (quoted === null) return message;
  const [, words, body] = quoted;
  return body.trim() === "" ? `${words} (HTTP ${err.code}) with an empty body` : `${words} (HTTP ${err.code}): ${body}`;
}

/**
 * A file-system or other system error (`ENOENT: no such file or directory, open '/srv/app/users/alice.json'`, thrown
 * by an interceptor reading its own files) as its code, description and call, without the local path Node puts in
 * the message. `undefined` for any other error.
 */
export function systemErrorText(err: unknown): string | undefined {
  const { syscall, code, message } = (err ?? {}) as NodeJS.ErrnoException;
  if (typeof syscall !== "string" || typeof code !== "string") return undefined;
  const description = typeof message === "string" && message.startsWith(`${code}: `) ? message.slice(code.length + 2).split(",")[0] : "";
  return `${code}${description ? `: ${description}` : ""} (${syscall})`;
}

/** A call or load on a toolkit after its `close()`: nothing is sent, and it is the host's error, not the model's. */
export class ToolkitClosedError extends Error {
  constructor() {
    super("McpToolkit is closed");
    this.name = "ToolkitClosedError";
  }
}
