import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION, McpError } from "@modelcontextprotocol/sdk/types.js";

/** JSON-RPC code of an `initialize` refused for its protocol version (MCP 2026-07-28; SDK v2's `legacy: 'reject'`). */
const UNSUPPORTED_PROTOCOL_VERSION = -32022;
/** A version as the protocol writes them: a date. Anything else the server sent is not shown. */
const VERSION = /^\d{4}-\d{2}-\d{2}$/;
const MAX_VERSIONS_SHOWN = 5;
/** The code in a streamable HTTP refusal's JSON-RPC body, and the versions its `data` lists. */
const BODY_CODE = /"code"\s*:\s*-32022\b/;
const BODY_SUPPORTED = /"supported"\s*:\s*\[([^\]]{0,500})\]/;

/**
 * A server that refused our `initialize` for its protocol version: the SDK says "Unsupported protocol version:
 * 2025-11-25" (stdio) or quotes the raw JSON-RPC body of its HTTP 400, neither saying what would work.
 */
export class UnsupportedProtocolError extends Error {
  constructor(serverName: string, supported: readonly string[]) {
    const serves = supported.length > 0 ? `it serves ${supported.join(", ")}` : "it did not say which versions it serves";
    super(`the MCP server '${serverName}' does not accept this client's MCP protocol version ${LATEST_PROTOCOL_VERSION} (${serves})`);
    this.name = "UnsupportedProtocolError";
  }
}

/** `err` as an `UnsupportedProtocolError` when it is a refusal of our protocol version, else `undefined`. */
export function unsupportedProtocol(serverName: string, err: unknown): UnsupportedProtocolError | undefined {
  if (err instanceof McpError && err.code === UNSUPPORTED_PROTOCOL_VERSION) {
    const supported = (err.data as { supported?: unknown } | undefined)?.supported;
    return new UnsupportedProtocolError(serverName, versions(Array.isArray(supported) ? supported : []));
  }
  if (err instanceof StreamableHTTPError && err.code === 400 && BODY_CODE.test(err.message)) {
    const listed = BODY_SUPPORTED.exec(err.message)?.[1];
    return new UnsupportedProtocolError(serverName, versions(listed === undefined ? [] : listed.split(",").map((v) => v.trim().replace(/^"|"$/g, ""))));
  }
  return undefined;
}

function versions(values: readonly unknown[]): string[] {
  return values.filter((v): v is string => typeof v === "string" && VERSION.test(v)).slice(0, MAX_VERSIONS_SHOWN);
}
