/**
 * `langgraph-mcp-harness/testing`: what a user needs to test their own graphs against the harness
 * offline — a deterministic chat model, a small MCP server (in-process over HTTP, or a stdio child)
 * and a config writer. Nothing here reaches the network.
 */
export * from "../agent/scripted-model";
export {
  DEFAULT_TEST_SERVER_NAME,
  TEST_SERVER_BUILTIN_TOOLS,
  createTestMcpServer,
  testTool,
  type TestMcpServerOptions,
  type TestServerBuiltinTool,
  type TestTool,
  type TestToolCall,
  type TestToolContext,
  type TestToolResult,
} from "./server";
export { startTestMcpServer, type TestMcpHttpServer, type TestMcpHttpServerOptions } from "./http";
export { testStdioServer, type TestStdioServerConfig, type TestStdioServerOptions } from "./stdio";
export { writeTestConfig, type WriteTestConfigOptions } from "./config";
