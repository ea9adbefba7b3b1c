/**
 * A server refusing our protocol version is told as such, naming the versions it serves: only date-shaped ones, at most
 * five, so nothing else a server puts in its refusal reaches a log line or the model.
 */
import { describe, expect, test } from "@jest/globals";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION, McpError } from "@modelcontextprotocol/sdk/types.js";
import { unsupportedProtocol } from "../../lib/sessions/protocol-version";

const line = (serves: string) =>
  `the MCP server 's' does not accept this client's MCP protocol version ${LATEST_PROTOCOL_VERSION} (${serves})`;

describe("unsupportedProtocol", () => {
  test("a JSON-RPC -32022 error (stdio) and a streamable HTTP 400 quoting one name the versions served", () => {
    const stdio = new McpError(-32022, "Unsupported protocol version: 2025-11-25", { supported: ["2026-07-28", "2027-01-01"] });
    expect(unsupportedProtocol("s", stdio)?.message).toBe(line("it serves 2026-07-28, 2027-01-01"));
    const body = '{"jsonrpc":"2.0","error":{"code":-32022,"message":"Unsupported protocol version: 2025-11-25","data":{"supported":["2026-07-28"]}},"id":null}';
    expect(unsupportedProtocol("s", new StreamableHTTPError(400, `Error POSTing to endpoint: ${body}`))?.message).toBe(line("it serves 2026-07-28"));
  });

  test("only date-shaped versions, at most five, are shown; none listed says so", () => {
    const odd = new McpError(-32022, "no", { supported: ["sk-live-Secret", 7, "2026-07-28", "2026-07-28; rm -rf /", "rm -rf / 2026-07-28", ...Array(9).fill("2030-01-01")] });
    expect(unsupportedProtocol("s", odd)?.message).toBe(line("it serves 2026-07-28, 2030-01-01, 2030-01-01, 2030-01-01, 2030-01-01"));
    expect(unsupportedProtocol("s", new McpError(-32022, "no"))?.message).toBe(line("it did not say which versions it serves"));
  });

  test("other errors are not taken for it", () => {
    expect(unsupportedProtocol("s", new McpError(-32602, "Unsupported protocol version"))).toBeUndefined();
    expect(unsupportedProtocol("s", new StreamableHTTPError(400, 'Error POSTing to endpoint: {"error":{"code":-32000}}'))).toBeUndefined();
    expect(unsupportedProtocol("s", new StreamableHTTPError(404, 'Error POSTing to endpoint: {"error":{"code":-32022}}'))).toBeUndefined();
  });
});
