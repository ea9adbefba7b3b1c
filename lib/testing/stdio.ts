/** Launch parameters of the test MCP server as a stdio child process (./stdio-main). */
import * as path from "node:path";
import { DEFAULT_TEST_SERVER_NAME, TEST_SERVER_BUILTIN_TOOLS, type TestServerBuiltinTool } from "./server";

export const TEST_SERVER_NAME_ENV = "MCP_HARNESS_TEST_SERVER_NAME";
export const TEST_SERVER_TOOLS_ENV = "MCP_HARNESS_TEST_SERVER_TOOLS";

export interface TestStdioServerOptions {
  /** The MCP server name (default "test"). */
  name?: string;
  /** Built-in tools to register (default: all of TEST_SERVER_BUILTIN_TOOLS). */
  builtins?: readonly TestServerBuiltinTool[];
}

/** A stdio entry for `mcpServers` (a type alias, not an interface, so it fits the config's open server type). */
export type TestStdioServerConfig = {
  readonly type: "stdio";
  readonly command: string;
  readonly args: string[];
  readonly env: Record<string, string>;
};

/**
 * The config entry that starts the test server as a child process with this Node binary. From the
 * built package the script is plain JavaScript; from this repository's TypeScript sources (its own
 * tests) it runs through tsx.
 */
export function testStdioServer(options: TestStdioServerOptions = {}): TestStdioServerConfig {
  const ext = path.extname(__filename);
  const script = path.join(__dirname, `stdio-main${ext}`);
  const args = ext === ".ts" && typeof require === "function" ? ["--require", require.resolve("tsx/cjs"), script] : [script];
  return {
    type: "stdio",
    command: process.execPath,
    args,
    env: {
      [TEST_SERVER_NAME_ENV]: options.name ?? DEFAULT_TEST_SERVER_NAME,
      [TEST_SERVER_TOOLS_ENV]: (options.builtins ?? TEST_SERVER_BUILTIN_TOOLS).join(","),
    },
  };
}
