/**
 * A tool's declared output schema is checked against its results on every session alike. The SDK checks only on the
 * client that listed the tools (discovery's session), and only the last page's tools: the same result failed for a
 * server without per-user headers and passed for one with them. Real low-level MCP server (listing-server).
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startListingServer, type ListingServer } from "../fixtures/listing-server";

const counted = { type: "object", properties: { n: { type: "number" } }, required: ["n"] };
const tool = (name: string, outputSchema?: Record<string, unknown>): Tool =>
  ({ name, inputSchema: { type: "object", properties: { n: {} } }, ...(outputSchema ? { outputSchema } : {}) }) as Tool;

let server: ListingServer;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  // Two pages: the SDK kept the output schemas of the last page only.
  server = await startListingServer(
    (cursor) =>
      cursor === undefined
        ? { tools: [tool("counted", counted), tool("failing", counted)], nextCursor: "2" }
        : { tools: [tool("free"), tool("unreadable", { type: "object", properties: { n: { type: "no-such-type" } } })] },
    (name, args) => {
      if (name === "failing") return { isError: true, content: [{ type: "text", text: "the job failed" }] };
      const text = { type: "text" as const, text: `n=${JSON.stringify(args.n)}` };
      return args.n === undefined ? { content: [text] } : { content: [text], structuredContent: { n: args.n } };
    },
  );
  const configPath = await writeConfig(await makeTempDir("mcp-output-schemas-"), {
    mcpServers: {
      // Its calls share discovery's session; the other's each run on a session of their own header set.
      shared: { type: "http", url: server.url },
      keyed: { type: "http", url: server.url, headers_from_context: { headers: { "X-Key": "key" } } },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit?.close();
  await server?.close();
});

const call = (server: "shared" | "keyed", name: string, args: Record<string, unknown>) =>
  callThroughGraph(graph, `${server}_${name}`, args, { context: { secrets: { key: "k-1" } } });

describe("output schemas", () => {
  test.each(["shared", "keyed"] as const)("%s: every tool of every page is listed, the one whose schema does not compile too", async (name) => {
    const names = (await toolkit.getTools()).map((t) => t.name).filter((n) => n.startsWith(`${name}_`));
    expect(names.sort()).toEqual([`${name}_counted`, `${name}_failing`, `${name}_free`, `${name}_unreadable`]);
  });

  test.each(["shared", "keyed"] as const)("%s: a result the schema accepts passes, with its structuredContent as the artifact", async (name) => {
    const message = await call(name, "counted", { n: 3 });
    expect(message.status).toBe("success");
    expect(message.content).toBe("n=3");
    expect(message.artifact).toMatchObject({ structuredContent: { n: 3 } });
  });

  test.each(["shared", "keyed"] as const)("%s: a result without structuredContent fails with a clear line", async (name) => {
    const message = await call(name, "counted", {});
    expect(message.status).toBe("error");
    expect(message.content).toBe(
      `MCP tool 'counted' on server '${name}' failed: its result has no structuredContent, which its output schema requires`,
    );
  });

  test.each(["shared", "keyed"] as const)("%s: structuredContent that breaks the schema fails, naming where", async (name) => {
    const message = await call(name, "counted", { n: "three" });
    expect(message.status).toBe("error");
    expect(message.content).toBe(`MCP tool 'counted' on server '${name}' failed: its structuredContent does not match its output schema (data/n must be number)`);
  });

  test.each(["shared", "keyed"] as const)("%s: an error result is the server's text; no schema, or one that does not compile: not checked", async (name) => {
    const failing = await call(name, "failing", {});
    expect([failing.status, failing.content]).toEqual(["error", "the job failed"]);
    for (const free of ["free", "unreadable"]) {
      const message = await call(name, free, { n: "three" });
      expect([message.status, message.content]).toEqual(["success", 'n="three"']);
    }
  });
});
