/**
 * A server cutting a credential between the text blocks and embedded text resources of one result. The ToolMessage
 * shows both as text, joined (convertCallToolResult turns a text resource into a text block), exactly as it shows two
 * text blocks, whose split secret is blanked (scrubAcrossTextBlocks). Real streamable HTTP MCP server (listing-server).
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { scrubAcrossTextBlocks } from "../../lib/mcp/scrub-outcome";
import { Redactor } from "../../lib/shared";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startListingServer, type ListingServer } from "../fixtures/listing-server";

const SECRET = "sk-live-9f8e7d6c5b4a3210";
const HEAD = SECRET.slice(0, 12);
const TAIL = SECRET.slice(12);
const BODY = "quarterly totals: north 120, south 98, east 77, west 101";

const tool = (name: string): Tool => ({ name, inputSchema: { type: "object", properties: {} } }) as Tool;

let server: ListingServer;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  server = await startListingServer(
    () => ({
      tools: [tool("two_texts"), tool("text_and_resource"), tool("resource_and_resource"), tool("error_text_and_resource"), tool("cut_twice")],
    }),
    (name): CallToolResult => {
      const resource = (text: string) => ({ type: "resource" as const, resource: { uri: "mem://part", mimeType: "text/plain", text } });
      if (name === "cut_twice") return { content: [{ type: "text", text: `first key ${HEAD}` }, resource(`${TAIL}\n${BODY}\nsecond key ${HEAD}`), { type: "text", text: `${TAIL} end` }] };
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

test("a credential cut at each end of an embedded resource: each cut is blanked, the resource's own text is kept", async () => {
  const message = await callThroughGraph(graph, "s_cut_twice", {});
  const shown = String(message.content);
  expect(shown.replace(/\n/g, "")).not.toContain(SECRET);
  expect(shown).toContain(BODY);
  expect(shown).toBe(`first key [redacted]\n\n${BODY}\nsecond key [redacted]\n end`);
});

test("a key cut over three blocks that holds a short secret inside its first two is blanked whole, as one", () => {
  const key = "sk-live-9f8e7d6c5b4a3210";
  const blocks = ["key sk-li", "ve-9f8e7d", "6c5b4a3210 end"];
  // "live" (a short header value: no minimum length) lies inside the key and within the first two blocks.
  const out = scrubAcrossTextBlocks({ content: blocks.map((text) => ({ type: "text" as const, text })) }, Redactor.of([key, "live"]));
  expect(out.content.map((block) => (block as { text: string }).text)).toEqual(["key [redacted]", "", " end"]);
});
