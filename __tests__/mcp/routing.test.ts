import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import { createMcpToolkit, getMcpRouting, RecordingLogger, renderRoutingHints, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";

let http: HttpFixture;
let toolkit: McpToolkit;
let logger: RecordingLogger;

beforeAll(async () => {
  http = await startHttpFixture({ name: "db", toolNames: ["echo", "add", "fail"] });
  const dir = await makeTempDir("mcp-routing-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      db: {
        url: http.url,
        routing: { mode: "prefer", priority: 50, keywords: ["database", "SQL <tables>"] },
        tools: {
          add: { routing: { priority: 150 } },
          fail: { routing: { mode: "off" } },
          echo: { routing: { keywords: ["orders & users"] } },
        },
      },
    },
  });
  logger = new RecordingLogger();
  toolkit = createMcpToolkit({ configPath, env: {}, logger });
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

describe("routing hints", () => {
  test("per-tool routing overrides only the fields it sets; mode off carries no routing metadata", async () => {
    const tools = await toolkit.getTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    expect(getMcpRouting(byName.db_add)).toEqual({ mode: "prefer", priority: 100, keywords: ["database", "SQL <tables>"] });
    expect(getMcpRouting(byName.db_echo)).toEqual({ mode: "prefer", priority: 50, keywords: ["orders & users"] });
    expect(getMcpRouting(byName.db_fail)).toBeUndefined();
    expect(byName.db_fail.metadata?.mcp_routing).toBeUndefined();
    expect(logger.messages("warn").some((m) => m.includes("clamping to 100"))).toBe(true);
  });

  test("renders prefer tools with keywords, sorted by (-priority, name), escaped, deferred tools via tool_search", async () => {
    const tools = await toolkit.getTools();
    const plain = tool(async () => "x", { name: "not_mcp", description: "", schema: z.object({}) });
    expect(renderRoutingHints([...tools, plain], ["db_echo"])).toBe(
      [
        "<mcp_routing_hints>",
        "When the user's request involves database, or SQL &lt;tables&gt;:",
        "  prefer the `db_add` tool.",
        "When the user's request involves orders &amp; users:",
        "  use `tool_search` to fetch `db_echo`, then prefer that MCP tool.",
        "</mcp_routing_hints>",
      ].join("\n"),
    );
  });

  test("no hints → empty string", () => {
    expect(renderRoutingHints([])).toBe("");
  });
});
