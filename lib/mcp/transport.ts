import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { McpServerConfig } from "../config";
import type { Logger } from "../shared/logger";
import { DEFAULT_STDIO_MAX_MESSAGE_BYTES, installLineBuffer, StdioLineBuffer } from "./stdio-buffer";

export interface TransportOptions {
  /** Final headers for HTTP/SSE (ignored on stdio). */
  headers: Readonly<Record<string, string>>;
  logger: Logger;
  /** Longest stdio message read; a longer one is discarded (its call fails), the session stays. */
  stdioMaxMessageBytes?: number;
}

const STDERR_LINE_LIMIT = 500;

export function createTransport(serverName: string, server: McpServerConfig, opts: TransportOptions): Transport {
  switch (server.type) {
    case "stdio": {
      if (!server.command) throw new Error(`MCP server '${serverName}' with stdio transport requires 'command' field`);
      const maxMessageBytes = opts.stdioMaxMessageBytes ?? DEFAULT_STDIO_MAX_MESSAGE_BYTES;
      const transport = new StdioClientTransport({
        command: server.command,
        args: server.args,
        env: { ...getDefaultEnvironment(), ...server.env },
        cwd: server.cwd,
        stderr: "pipe",
        maxBufferSize: maxMessageBytes,
      });
      const buffer = new StdioLineBuffer(maxMessageBytes, ({ bytes, id }) =>
        opts.logger.warn(
          `MCP server '${serverName}' sent a stdio message of ${bytes} bytes, above the limit of ${maxMessageBytes} bytes; ` +
            (id === undefined ? "it was discarded" : "it was discarded and its call fails"),
        ),
      );
      if (!installLineBuffer(transport, buffer)) {
        opts.logger.debug(`MCP SDK stdio transport has no replaceable read buffer; messages above ${maxMessageBytes} bytes close the session`);
      }
      // The child's stderr goes to debug logs (bounded per line) instead of the parent's stderr.
      transport.stderr?.on("data", (chunk: Buffer) => {
        for (const line of chunk.toString("utf8").split(/\r?\n/)) {
          if (line.trim()) opts.logger.debug(`MCP server '${serverName}' stderr: ${line.slice(0, STDERR_LINE_LIMIT)}`);
        }
      });
      return transport;
    }
    case "http":
    case "sse": {
      if (!server.url) throw new Error(`MCP server '${serverName}' with ${server.type} transport requires 'url' field`);
      const url = new URL(server.url);
      const requestInit: RequestInit = { headers: { ...opts.headers } };
      return server.type === "http"
        ? new StreamableHTTPClientTransport(url, { requestInit })
        : new SSEClientTransport(url, { requestInit });
    }
    default:
      throw new Error(`MCP server '${serverName}' has unsupported transport type: ${String(server.type)}`);
  }
}
