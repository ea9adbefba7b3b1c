/**
 * A Streamable HTTP server that answers with plain JSON (not an SSE stream): Node's `fetch` parses its results in Node's
 * own realm, which under jest is not the code's. Its structuredContent is still scrubbed, and its depth still bounded
 * (both took such objects for "not plain" and passed them through). Real low-level MCP server (listing-server).
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { MAX_RESULT_DEPTH } from "../../lib/mcp/call";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startListingServer, type ListingServer } from "../fixtures/listing-server";

const SECRET = "json-s3cret-static";
let server: ListingServer;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  const tool = (name: string): Tool => ({ name, inputSchema: { type: "object", properties: { text: {}, depth: {} } } }) as Tool;
  server = await startListingServer(
    () => ({ tools: [tool("echo"), tool("nested")] }),
    (name, args) => {
      if (name === "echo") return { content: [{ type: "text", text: "ok" }], structuredContent: { nested: { got: String(args.text) } } };
      let value: Record<string, unknown> = { leaf: "x" };
      for (let i = 0; i < Number(args.depth); i += 1) value = { child: value };
      return { content: [{ type: "text", text: "nested" }], structuredContent: value };
    },
  );
  const configPath = await writeConfig(await makeTempDir("mcp-json-responses-"), {
    mcpServers: { remote: { type: "http", url: server.url, headers: { "X-Key": "$KEY" } } },
  });
  toolkit = createMcpToolkit({ configPath, env: { KEY: SECRET }, logger: new RecordingLogger() });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit?.close();
  await server?.close();
});

test("a secret the server echoes in structuredContent is scrubbed", async () => {
  const message = await callThroughGraph(graph, "remote_echo", { text: `key=${SECRET}` });
  expect(message.status).toBe("success");
  expect(message.artifact).toEqual({ structuredContent: { nested: { got: "key=[redacted]" } } });
});

test("a result nested deeper than the bound gives one clear error line", async () => {
  const message = await callThroughGraph(graph, "remote_nested", { depth: MAX_RESULT_DEPTH + 10 });
  expect(message.status).toBe("error");
  expect(message.content).toBe(`MCP tool 'nested' on server 'remote' failed: its result nests deeper than ${MAX_RESULT_DEPTH} levels and was not read`);
});
