import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";

/**
 * The server no longer knows the session (HTTP 404 on its session id: it expired it or restarted). Streamable
 * HTTP says so with a `StreamableHTTPError` of code 404, and only a session the server gave an id can have expired
 * (a stateless server's 404 is its own answer, shown as it is); the SSE transport, whose sessions always have an id,
 * says so only in its message.
 */
export function isExpiredSession(err: unknown, transport: Transport | undefined): boolean {
  if (err instanceof StreamableHTTPError) {
    return err.code === 404 && transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined;
  }
  return err instanceof Error && /^Error POSTing to endpoint \(HTTP 404\)/.test(err.message);
}

/** A request that failed because its session's connection closed (an SSE session is closed when its event stream ends). */
export function isConnectionClosed(err: unknown): boolean {
  return err instanceof McpError && err.code === ErrorCode.ConnectionClosed;
}
