import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/**
 * The server no longer knows the session (HTTP 404 on its session id: it expired it or restarted). Streamable
 * HTTP says so with a `StreamableHTTPError` of code 404; the SSE transport only in its message.
 */
export function isExpiredSession(err: unknown): boolean {
  if (err instanceof StreamableHTTPError) return err.code === 404;
  return err instanceof Error && /^Error POSTing to endpoint \(HTTP 404\)/.test(err.message);
}
