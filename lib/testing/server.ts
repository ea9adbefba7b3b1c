/**
 * A small MCP server for tests of graphs built on the harness: a few built-in tools plus any a test
 * defines, each call recorded. Built on `@modelcontextprotocol/sdk` and zod only (runtime dependencies).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

/** The built-in tools: `echo {text}`, `add {a, b}` (also as `structuredContent.sum`), `fail {message}` (an `isError` result), `whoami` (the request's headers and `_meta` as JSON). */
export const TEST_SERVER_BUILTIN_TOOLS = ["echo", "add", "fail", "whoami"] as const;
export type TestServerBuiltinTool = (typeof TEST_SERVER_BUILTIN_TOOLS)[number];

export const DEFAULT_TEST_SERVER_NAME = "test";

/** What a test tool's handler gets besides its arguments. */
export interface TestToolContext {
  /** The HTTP request's headers (lower-case names; empty over stdio). */
  readonly headers: Readonly<Record<string, string>>;
  /** The call's `_meta` (stdio interceptor headers arrive as `_meta.headers`). */
  readonly meta: Readonly<Record<string, unknown>>;
  readonly signal: AbortSignal;
}

/** A string is sent as one text block. */
export type TestToolResult = string | CallToolResult;

/** A tool a test adds to the server. `inputSchema` is a zod shape, as in the MCP SDK's `registerTool`. */
export interface TestTool<Shape extends z.ZodRawShape = z.ZodRawShape> {
  name: string;
  description?: string;
  inputSchema?: Shape;
  handler(args: z.output<z.ZodObject<Shape>>, context: TestToolContext): TestToolResult | Promise<TestToolResult>;
}

/** Types `handler`'s arguments from `inputSchema` (an identity function). */
export function testTool<Shape extends z.ZodRawShape>(tool: TestTool<Shape>): TestTool<Shape> {
  return tool;
}

/** One call a test server answered. */
export interface TestToolCall {
  readonly tool: string;
  readonly args: Readonly<Record<string, unknown>>;
  readonly headers: Readonly<Record<string, string>>;
  readonly meta: Readonly<Record<string, unknown>>;
}

export interface TestMcpServerOptions {
  /** The MCP server name (default "test"). */
  name?: string;
  /** Built-in tools to register (default: all of TEST_SERVER_BUILTIN_TOOLS; `[]` for none). */
  builtins?: readonly TestServerBuiltinTool[];
  /** More tools, registered after the built-in ones. */
  tools?: readonly TestTool[];
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

function flatHeaders(extra: Extra): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(extra.requestInfo?.headers ?? {})) {
    if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return flat;
}

function toResult(result: TestToolResult): CallToolResult {
  return typeof result === "string" ? { content: [{ type: "text", text: result }] } : result;
}

function builtinTools(): Record<TestServerBuiltinTool, TestTool> {
  return {
    echo: testTool({
      name: "echo",
      description: "Echo the given text back.",
      inputSchema: { text: z.string() },
      handler: ({ text }) => text,
    }),
    add: testTool({
      name: "add",
      description: "Add two numbers.",
      inputSchema: { a: z.number(), b: z.number() },
      handler: ({ a, b }) => ({ content: [{ type: "text", text: String(a + b) }], structuredContent: { sum: a + b } }),
    }),
    fail: testTool({
      name: "fail",
      description: "Always fails with the given message.",
      inputSchema: { message: z.string() },
      handler: ({ message }) => ({ isError: true, content: [{ type: "text", text: message }] }),
    }),
    whoami: testTool({
      name: "whoami",
      description: "Returns the request's headers and _meta as JSON.",
      inputSchema: {},
      handler: (_args, { headers, meta }) => JSON.stringify({ headers, meta }),
    }),
  };
}

/**
 * A new `McpServer` with the chosen tools; connect it to any SDK server transport. `record` receives
 * every call before its handler runs.
 */
export function createTestMcpServer(
  options: TestMcpServerOptions = {},
  record: (call: TestToolCall) => void = () => undefined,
): McpServer {
  const server = new McpServer({ name: options.name ?? DEFAULT_TEST_SERVER_NAME, version: "1.0.0" });
  const builtins = builtinTools();
  const tools = [
    ...(options.builtins ?? TEST_SERVER_BUILTIN_TOOLS).map((name) => {
      const builtin = Object.prototype.hasOwnProperty.call(builtins, name) ? builtins[name] : undefined;
      if (!builtin) throw new Error(`test MCP server: there is no builtin tool '${String(name)}' (builtins: ${TEST_SERVER_BUILTIN_TOOLS.join(", ")})`);
      return builtin;
    }),
    ...(options.tools ?? []),
  ];
  const names = new Set<string>();
  for (const { name } of tools) {
    if (names.has(name)) throw new Error(`test MCP server: tool '${name}' is defined twice (leave it out of builtins, or name yours differently)`);
    names.add(name);
  }
  for (const tool of tools) {
    server.registerTool(
      tool.name,
      { description: tool.description ?? tool.name, inputSchema: tool.inputSchema ?? {} },
      async (args: Record<string, unknown>, extra: Extra) => {
        const context: TestToolContext = { headers: flatHeaders(extra), meta: { ...extra._meta }, signal: extra.signal };
        record({ tool: tool.name, args, headers: context.headers, meta: context.meta });
        return toResult(await tool.handler(args, context));
      },
    );
  }
  return server;
}
