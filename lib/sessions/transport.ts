import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Writable } from "node:stream";
import type { McpServerConfig } from "../config";
import type { Logger } from "../shared/logger";
import type { StdioLaunch } from "./workspace";
import { boundText, escapeControls } from "../shared/text";
import { onChildStart } from "./child";
import { LineSplitter, type LineScrub } from "./lines";
import { LostCallWatch, RECONNECTION } from "./lost-calls";
import { endsSessionWithStream, postsOfGivenUpCalls } from "./sse-session";
import { watchForgottenSession } from "./forgotten-stream";
import { keepSessionId } from "./session-id";
import { SESSION_TAG_ENV } from "./session-processes";
import { DEFAULT_STDIO_MAX_MESSAGE_BYTES, installLineBuffer, StdioLineBuffer } from "./stdio-buffer";

export interface TransportOptions {
  /** Final headers for HTTP/SSE (ignored on stdio). */
  headers: Readonly<Record<string, string>>;
  logger: Logger;
  /** Scrubs the server's secrets out of what it writes to stderr before it reaches a log line (each secret becomes REDACTED). */
  redact: LineScrub;
  /** Longest stdio message read; a longer one is discarded (its call fails), the session stays. */
  stdioMaxMessageBytes?: number;
  /** stdio: the child's cwd and env (the thread workspace pinning); default: the config's. */
  launch?: StdioLaunch;
  /** stdio: the tag of this session's processes (`SESSION_TAG_ENV`), inherited by whatever the child starts. */
  sessionTag?: string;
  /** Streamable HTTP: the server answered 404 (or 410) on the session's event stream (see `watchForgottenSession`). */
  onForgotten?: (status: number) => void;
}

const STDERR_LINE_LIMIT = 500;

/** What each debug log line of a stdio server's stderr starts with (`check` reads the lines back by it). */
export function stderrLogPrefix(serverName: string): string {
  return `MCP server '${serverName}' stderr: `;
}
/** A line that grows past this without a newline is logged in pieces (cut where no secret lies across the cut). */
const STDERR_PENDING_LIMIT = 64 * 1024;

export function createTransport(serverName: string, server: McpServerConfig, opts: TransportOptions): Transport {
  switch (server.type) {
    case "stdio": {
      if (!server.command) throw new Error(`MCP server '${serverName}' with stdio transport requires 'command' field`);
      const maxMessageBytes = opts.stdioMaxMessageBytes ?? DEFAULT_STDIO_MAX_MESSAGE_BYTES;
      const transport = new StdioClientTransport({
        command: server.command,
        args: server.args,
        env: {
          ...getDefaultEnvironment(),
          ...(opts.launch?.env ?? server.env),
          ...(opts.sessionTag === undefined ? {} : { [SESSION_TAG_ENV]: opts.sessionTag }),
        },
        cwd: opts.launch ? opts.launch.cwd : server.cwd,
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
      // The child's stderr goes to debug logs, whole lines only (a secret split across two reads would escape
      // redaction), scrubbed by the splitter and bounded, instead of the parent's stderr.
      const lines = new LineSplitter(STDERR_PENDING_LIMIT, opts.redact);
      const log = (line: string) => {
        if (line.trim()) opts.logger.debug(stderrLogPrefix(serverName) + boundText(escapeControls(line), STDERR_LINE_LIMIT));
      };
      transport.stderr?.on("data", (chunk: Buffer) => lines.push(chunk).forEach(log));
      // Set when our end of the child's stderr was closed under it (see below), not ended by the child.
      let cutUnderWriter = false;
      transport.stderr?.on("end", () => lines.flush(cutUnderWriter).forEach(log));
      // A process the child started may hold the child's stderr open: once the child is gone the pool destroys our end
      // of the pipe (`whenGone`), which never ends the SDK's copy of the stream. It is ended here, so what the splitter
      // still holds (a last line without its newline, its last word cut, and lines held back for a wrapped base64 run) is
      // logged too.
      onChildStart(transport, (child) =>
        child.stderr?.once("close", () => {
          const copy = transport.stderr as Writable | null;
          if (!copy || copy.writableEnded) return;
          cutUnderWriter = child.stderr?.readableEnded !== true;
          copy.end();
        }),
      );
      return transport;
    }
    case "http":
    case "sse": {
      if (!server.url) throw new Error(`MCP server '${serverName}' with ${server.type} transport requires 'url' field`);
      const url = new URL(server.url);
      const requestInit: RequestInit = { headers: { ...opts.headers } };
      if (server.type === "http") {
        const watch = new LostCallWatch();
        const base = keepSessionId(opts.onForgotten ? watchForgottenSession(opts.onForgotten) : fetch);
        const transport = new StreamableHTTPClientTransport(url, { requestInit, fetch: watch.fetch(base), reconnectionOptions: RECONNECTION });
        watch.attach(transport);
        hideForeignOrigins(transport, url);
        return transport;
      }
      const closed = new AbortController();
      const transport: SSEClientTransport = new SSEClientTransport(url, {
        requestInit,
        fetch: postsOfGivenUpCalls(),
        eventSourceInit: { fetch: endsSessionWithStream(() => transport, closed.signal) },
      });
      const close = transport.close.bind(transport);
      transport.close = () => {
        closed.abort();
        return close();
      };
      hideForeignOrigins(transport, url);
      return transport;
    }
    default:
      throw new Error(`MCP server '${serverName}' has unsupported transport type: ${String(server.type)}`);
  }
}

/** The scheme and authority of a URL the SDK's errors quote as where the server pointed to. */
const QUOTED_ORIGIN = /(Redirect to |connection origin: |; try )([a-z][a-z0-9+.-]*:\/\/[^\s/?#'"()<>]+)/gi;

/**
 * The SDK's errors quote the URLs the server pointed to (a redirect to another origin, an SSE `endpoint` event), their
 * host lower-cased by URL parsing: a server echoing a credential into a host name would have it reach the logs and a
 * ToolMessage past the redaction of its exact spelling. An origin other than the server's own is not quoted.
 */
function hideForeignOrigins(transport: Transport, own: URL): void {
  const hide = (err: unknown): never => {
    if (err instanceof Error) {
      err.message = err.message.replace(QUOTED_ORIGIN, (quote, before: string, origin: string) =>
        sameOrigin(origin, own) ? quote : `${before}(another origin)`,
      );
    }
    throw err;
  };
  const start = transport.start.bind(transport);
  const send = transport.send.bind(transport);
  transport.start = () => start().catch(hide);
  transport.send = (message, options) => send(message, options).catch(hide);
}

function sameOrigin(quoted: string, own: URL): boolean {
  try {
    return new URL(quoted).origin === own.origin;
  } catch {
    return false;
  }
}
