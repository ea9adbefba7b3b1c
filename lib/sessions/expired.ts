import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";

/**
 * A 400 that says the session id is unknown: the official "everything" server and the servers written after the SDK's
 * examples (a JSON-RPC error), and the Python SDK's session manager before it adopted the 404 (a plain-text body),
 * answer a session they forgot (a restart) with `400 Bad Request: No valid session ID provided` instead of the MCP
 * spec's 404. Any other 400 is the server's own answer, shown as it is.
 */
const UNKNOWN_SESSION_400 = "Bad Request: No valid session ID provided";
const POST_REFUSAL = "Streamable HTTP error: Error POSTing to endpoint: ";

/** The body of a refused POST is that answer, as plain text or as the JSON-RPC error's own message. */
function saysUnknownSession(message: string): boolean {
  if (!message.startsWith(POST_REFUSAL)) return false;
  const body = message.slice(POST_REFUSAL.length).trim();
  if (body === UNKNOWN_SESSION_400) return true;
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } } | null;
    return parsed?.error?.message === UNKNOWN_SESSION_400;
  } catch {
    return false;
  }
}

/**
 * The statuses that say a session id is no longer known: the MCP spec's 404, and the 410 Gone some servers answer
 * instead. Left in the pool, a session answered 410 would fail every later call.
 */
const EXPIRED_STATUSES: ReadonlySet<number> = new Set([404, 410]);
const SSE_REFUSAL = /^Error POSTing to endpoint \(HTTP (\d+)\)/;

/**
 * The server no longer knows the session (HTTP 404 or 410 on its session id, or the 400 above: it expired it or
 * restarted). Streamable HTTP says so with a `StreamableHTTPError` of that code, and only a session the server gave an
 * id can have expired (a stateless server's 404 is its own answer, shown as it is); the SSE transport, whose sessions
 * always have an id, says so only in its message.
 */
export function isExpiredSession(err: unknown, transport: Transport | undefined): boolean {
  if (err instanceof StreamableHTTPError) {
    const forgotten = isExpiredStatus(err.code) || (err.code === 400 && saysUnknownSession(err.message));
    return forgotten && transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined;
  }
  return isExpiredStatus(sseRefusalStatus(err));
}

/** The status of the SSE transport's refused POST, which it gives only in its message. */
function sseRefusalStatus(err: unknown): number | undefined {
  const status = err instanceof Error ? SSE_REFUSAL.exec(err.message)?.[1] : undefined;
  return status === undefined ? undefined : Number(status);
}

/** Whether an HTTP status on a session's id says the server no longer knows it (see `isExpiredSession`). */
export function isExpiredStatus(status: number | undefined): boolean {
  return status !== undefined && EXPIRED_STATUSES.has(status);
}

/** The HTTP status an expired session was reported with (see `isExpiredSession`). */
export function expiredStatus(err: unknown): 400 | 404 | 410 {
  const status = err instanceof StreamableHTTPError ? err.code : sseRefusalStatus(err);
  return status === 400 || status === 410 ? status : 404;
}

/** A request that failed because its session's connection closed (an SSE session is closed when its event stream ends). */
export function isConnectionClosed(err: unknown): boolean {
  return err instanceof McpError && err.code === ErrorCode.ConnectionClosed;
}

/**
 * supergateway's answer, in its stateful streamable HTTP mode, to each call in flight when the stdio process behind
 * the session fails: it then drops the session, and any later request on its id meets a 404.
 */
const GATEWAY_PROCESS_FAILED = "MCP error -32603: MCP server process failed";

/** A call the gateway in front of a stdio server failed because that process ended, taking the session with it. */
export function isGatewayProcessFailed(err: unknown, transport: Transport | undefined): boolean {
  return err instanceof McpError && err.message === GATEWAY_PROCESS_FAILED && transport?.sessionId !== undefined;
}

/** undici's codes for a connection the server closed or reset under a request (a restart, a crash). */
const DROPPED_CONNECTION_CODES = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"]);

/** The system error code of a failed fetch. Duck-typed: fetch's errors come from another realm under a VM. */
function fetchFailureCode(err: unknown): string | undefined {
  const code = (err as { cause?: { code?: unknown } } | null)?.cause?.code;
  return (err as Error | null)?.name === "TypeError" && typeof code === "string" ? code : undefined;
}

/**
 * A request whose connection the server cut before the response began: a plain-JSON answer (or an SSE one not started
 * yet) has no stream for `LostCallWatch` to see end.
 */
export function isDroppedConnection(err: unknown): boolean {
  const code = fetchFailureCode(err);
  return code !== undefined && DROPPED_CONNECTION_CODES.has(code);
}

/**
 * A request that found nothing listening at the server's address (its process is down): the server that listens there
 * again is a new process, which knows none of the sessions of the old one.
 */
export function isRefusedConnection(err: unknown): boolean {
  return fetchFailureCode(err) === "ECONNREFUSED";
}

const expiredWhileStarting = new WeakSet<object>();

/**
 * Notes a failed connect whose handshake met a 404 on the session id the server had just given (it forgot it at once),
 * or, on SSE, whose event stream ended before the handshake did (the server's answers travel on that stream).
 */
export function noteExpiredWhileStarting(err: unknown, transport: Transport): void {
  if (typeof err !== "object" || err === null) return;
  if (isExpiredSession(err, transport) || (transport instanceof SSEClientTransport && isConnectionClosed(err))) expiredWhileStarting.add(err);
}

/** Whether a session failed to start because the server forgot it before its handshake ended (see `noteExpiredWhileStarting`). */
export function isExpiredWhileStarting(err: unknown): boolean {
  return typeof err === "object" && err !== null && expiredWhileStarting.has(err);
}
