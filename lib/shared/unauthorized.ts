import { SseError } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/**
 * The server refused the request's credentials (HTTP 401), on a POST or the event stream, Streamable HTTP or SSE. A
 * 401 comes before the server runs anything, so the request may be sent again with new credentials.
 */
export function isUnauthorized(err: unknown): boolean {
  if (err instanceof StreamableHTTPError || err instanceof SseError) return err.code === 401;
  return err instanceof Error && /^Error POSTing to endpoint \(HTTP 401\)/.test(err.message);
}
