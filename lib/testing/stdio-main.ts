/**
 * Executable: the test MCP server over stdio (see ./stdio.ts for the launch parameters).
 * Environment: MCP_HARNESS_TEST_SERVER_NAME, MCP_HARNESS_TEST_SERVER_TOOLS (comma list of built-in tools).
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createTestMcpServer, TEST_SERVER_BUILTIN_TOOLS, type TestServerBuiltinTool } from "./server";
import { TEST_SERVER_NAME_ENV, TEST_SERVER_TOOLS_ENV } from "./stdio";

function builtins(value: string | undefined): TestServerBuiltinTool[] | undefined {
  if (value === undefined) return undefined;
  const known = new Set<string>(TEST_SERVER_BUILTIN_TOOLS);
  return value
    .split(",")
    .map((name) => name.trim())
    .filter((name): name is TestServerBuiltinTool => known.has(name));
}

const server = createTestMcpServer({
  name: process.env[TEST_SERVER_NAME_ENV],
  builtins: builtins(process.env[TEST_SERVER_TOOLS_ENV]),
});
// Exit when the client goes away, so a test never leaves the process behind.
process.stdin.on("end", () => {
  void server.close().finally(() => process.exit(0));
});
server.connect(new StdioServerTransport()).catch((error: unknown) => {
  process.stderr.write(`test MCP server: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
