/** The test MCP server over streamable HTTP on 127.0.0.1, in the test's own process. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createTestMcpServer, type TestMcpServerOptions, type TestToolCall } from "./server";

export interface TestMcpHttpServerOptions extends TestMcpServerOptions {
  /** Port on 127.0.0.1 (default 0: a free one). */
  port?: number;
}

export interface TestMcpHttpServer {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  /** A config entry for `mcpServers`. */
  readonly config: { readonly type: "http"; readonly url: string };
  /** Every tool call answered so far, oldest first. */
  readonly calls: readonly TestToolCall[];
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("error", reject);
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      try {
        resolve(text === "" ? undefined : (JSON.parse(text) as unknown));
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  });
}

function reply(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent) return;
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

/**
 * Starts a stateless streamable HTTP MCP server (a fresh `McpServer` per request, so no session state
 * is shared between clients) and resolves once it listens.
 */
export async function startTestMcpServer(options: TestMcpHttpServerOptions = {}): Promise<TestMcpHttpServer> {
  // Built once up front, so bad options fail here instead of as an HTTP 500 on every request.
  await createTestMcpServer(options).close();
  const calls: TestToolCall[] = [];
  const record = (call: TestToolCall) => {
    calls.push(call);
  };

  const http = createServer((req, res) => {
    void (async () => {
      if (new URL(req.url ?? "/", "http://127.0.0.1").pathname !== "/mcp") return reply(res, 404, "Not found");
      if (req.method !== "POST") {
        res.setHeader("allow", "POST");
        return reply(res, 405, "Method not allowed");
      }
      const server = createTestMcpServer(options, record);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on("close", () => {
        void server.close().catch(() => undefined);
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, await readBody(req));
    })().catch((error: unknown) => reply(res, 500, error instanceof Error ? error.message : String(error)));
  });

  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(options.port ?? 0, "127.0.0.1", () => {
      http.off("error", reject);
      resolve();
    });
  });
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;

  return {
    url,
    config: { type: "http", url },
    calls,
    close: () =>
      new Promise<void>((resolve, reject) => {
        http.close((error) => (error ? reject(error) : resolve()));
        http.closeAllConnections();
      }),
  };
}
