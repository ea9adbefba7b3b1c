/**
 * A server cutting a credential between the text blocks and embedded text resources of one result. The ToolMessage
 * shows both as text, joined (convertCallToolResult turns a text resource into a text block), exactly as it shows two
 * text blocks, whose split secret is blanked (scrubAcrossTextBlocks). Real streamable HTTP MCP server (listing-server).
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startListingServer, type ListingServer } from "../fixtures/listing-server";

const SECRET = "sk-live-9f8e7d6c5b4a3210";
const HEAD = SECRET.slice(0, 12);
const TAIL = SECRET.slice(12);

const tool = (name: string): Tool => ({ name, inputSchema: { type: "object", properties: {} } }) as Tool;

let server: ListingServer;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  server = await startListingServer(
    () => ({ tools: [tool("two_texts"), tool("text_and_resource"), tool("resource_and_resource"), tool("error_text_and_resource")] }),
    (name): CallToolResult => {
      const resource = (text: string) => ({ type: "resource" as const, resource: { uri: "mem://part", mimeType: "text/plain", text } });
      if (name === "two_texts") return { content: [{ type: "text", text: HEAD }, { type: "text", text: TAIL }] };
      if (name === "text_and_resource") return { content: [{ type: "text", text: HEAD }, resource(TAIL)] };
      if (name === "resource_and_resource") return { content: [resource(HEAD), resource(TAIL)] };
      return { isError: true, content: [{ type: "text", text: HEAD }, resource(TAIL)] };
    },
  );
  const configPath = await writeConfig(await makeTempDir("mcp-split-resource-"), {
    mcpServers: { s: { type: "http", url: server.url, headers: { "X-Api-Key": SECRET } } },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit?.close();
  await server?.close();
});

describe("a credential cut over the text blocks of one result, which the ToolMessage shows joined", () => {
  test.each(["two_texts", "text_and_resource", "resource_and_resource", "error_text_and_resource"])("%s: no piece of it reaches the ToolMessage", async (name) => {
    const message = await callThroughGraph(graph, `s_${name}`, {});
    const shown = String(message.content).replace(/\n/g, "");
    expect(shown).not.toContain(SECRET);
  });
});
