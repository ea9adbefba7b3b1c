/**
 * An interceptor whose result carries a class instance (a URL, a typed array, one of its own classes) built from what
 * the call carried: the ToolMessage artifact (graph state, sent as JSON) and the checkpoint spell it out.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";

const KEY = "sk-live-9f8e7d6c5b4a";
const CONTEXT = { user_id: "alice", secrets: { api_key: KEY } };

let http: HttpFixture;
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];
let graph: ToolNodeGraph;
const checkpointer = new MemorySaver();

/** The interceptor's own record of a call, a class instance. */
class Audit {
  constructor(readonly endpoint: string) {}
}

/** A page of results of the interceptor's own class: an array whose JSON form (`toJSON`) names where the next one is. */
class Page extends Array<string> {
  next = "";
  toJSON(): { items: string[]; next: string } {
    return { items: [...this], next: this.next };
  }
}

function page(next: string): Page {
  const made = new Page();
  made.push("first");
  made.next = next;
  return made;
}

/** Adds to the result, as the call's `text` asks, an instance built from the request's key. */
const linking: McpToolInterceptor = async (request, next) => {
  const result = (await next(request)) as CallToolResult;
  const key = request.headers["X-Api-Key"] ?? "";
  const endpoint = `https://api.example.test/v1?key=${key}`;
  const made: Record<string, object> = { url: new URL(endpoint), bytes: new TextEncoder().encode(key), audit: new Audit(endpoint), page: page(endpoint) };
  return { ...result, structuredContent: { added: made[String(request.args.text)] } };
};

beforeAll(async () => {
  http = await startHttpFixture({ name: "inst", toolNames: ["echo"] });
  const configPath = await writeConfig(await makeTempDir("mcp-echo-instances-"), {
    mcpServers: { inst: { type: "http", url: http.url, headers_from_context: { headers: { "X-Api-Key": "api_key" } } } },
  });
  toolkit = createMcpToolkit({ configPath, interceptors: [linking] });
  tools = await toolkit.getTools();
  graph = toolNodeGraph(tools, checkpointer);
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

test.each([
  ["a URL", "url"],
  ["a byte array", "bytes"],
  ["an instance of the interceptor's own class", "audit"],
  ["an array of the interceptor's own class", "page"],
])("%s built from the key: neither the artifact nor the checkpoint spells the key", async (_label, made) => {
  const threadId = `inst-${made}`;
  const message = await callThroughGraph(graph, "inst_echo", { text: made }, { context: CONTEXT, configurable: { thread_id: threadId } });
  expect(message.content).toBe(made);
  const tuples: string[] = [];
  for await (const tuple of checkpointer.list({ configurable: { thread_id: threadId } })) tuples.push(JSON.stringify(tuple));
  // The state (what the graph returns and streams) is JSON on the wire: a URL is its `href` there.
  const shown = [JSON.stringify(message.artifact), JSON.stringify(message.toDict()), ...tuples].join("\n");
  expect(shown).not.toContain(KEY);
  expect(shown).not.toContain(encodeURIComponent(KEY));
  expect(shown).not.toContain(Buffer.from(KEY).toString("base64"));
  // A byte array is spelled byte by byte: {"0":115,"1":107,…}.
  expect(shown).not.toContain([...Buffer.from(KEY)].map((byte, i) => `"${i}":${byte}`).join(","));
});
