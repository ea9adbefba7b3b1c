import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

/** Serves a demo MCP server over stdio until SIGTERM/SIGINT or the end of stdin; a failed start exits 1. */
export function serveStdio(server: McpServer, label: string): void {
  const main = async () => {
    await server.connect(new StdioServerTransport());
    const shutdown = () => {
      void server.close().finally(() => process.exit(0));
    };
    process.on("SIGTERM", shutdown);
    process.on("SIGINT", shutdown);
    process.stdin.on("end", shutdown);
  };
  main().catch((error: unknown) => {
    // stdout is the protocol channel: diagnostics go to stderr only
    process.stderr.write(`${label} failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
