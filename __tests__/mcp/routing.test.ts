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
  http = await startHttpFixture({ name: "db", toolNames: ["echo", "add", "fail", "image", "pid"] });
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
          pid: { routing: { priority: 50 } },
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
  test("per-tool routing overrides only the fields it sets; an override that changes nothing keeps the server scope", async () => {
    const tools = await toolkit.getTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    const serverKeywords = ["database", "SQL <tables>"];
    expect(getMcpRouting(byName.db_add)).toEqual({ mode: "prefer", priority: 100, keywords: serverKeywords, scope: "tool" });
    expect(getMcpRouting(byName.db_echo)).toEqual({ mode: "prefer", priority: 50, keywords: ["orders & users"], scope: "tool" });
    expect(getMcpRouting(byName.db_image)).toEqual({ mode: "prefer", priority: 50, keywords: serverKeywords, scope: "server" });
    expect(getMcpRouting(byName.db_pid)).toEqual({ mode: "prefer", priority: 50, keywords: serverKeywords, scope: "server" });
    expect(getMcpRouting(byName.db_fail)).toBeUndefined();
    expect(byName.db_fail.metadata?.mcp_routing).toBeUndefined();
    expect(logger.messages("warn").some((m) => m.includes("clamping to 100"))).toBe(true);
  });

  test("one server-level hint names the server's tools; per-tool routing gets its own hint; sorted, escaped", async () => {
    const tools = await toolkit.getTools();
    const plain = tool(async () => "x", { name: "not_mcp", description: "", schema: z.object({}) });
    const hints = renderRoutingHints([...tools, plain]);
    expect(hints).toBe(
      [
        "<mcp_routing_hints>",
        "When the user's request involves database, or SQL &lt;tables&gt;:",
        "  prefer the `db_add` tool.",
        "When the user's request involves database, or SQL &lt;tables&gt;:",
        "  prefer the tools of the MCP server `db`: `db_image`, `db_pid`.",
        "When the user's request involves orders &amp; users:",
        "  prefer the `db_echo` tool.",
        "</mcp_routing_hints>",
      ].join("\n"),
    );
    // The server's keywords appear once for the server, not once per tool that inherits them.
    expect(hints.match(/prefer the tools of the MCP server/g)).toHaveLength(1);
  });

  test("deferred tools are to be fetched with tool_search first, in per-tool and server-level hints", async () => {
    const tools = await toolkit.getTools();
    expect(renderRoutingHints(tools, ["db_echo", "db_pid"])).toBe(
      [
        "<mcp_routing_hints>",
        "When the user's request involves database, or SQL &lt;tables&gt;:",
        "  prefer the `db_add` tool.",
        "When the user's request involves database, or SQL &lt;tables&gt;:",
        "  prefer the tools of the MCP server `db`: `db_image`, `db_pid`.",
        "  use `tool_search` to fetch `db_pid` first.",
        "When the user's request involves orders &amp; users:",
        "  use `tool_search` to fetch `db_echo`, then prefer that MCP tool.",
        "</mcp_routing_hints>",
      ].join("\n"),
    );
  });

  test("several servers: one hint each, sorted by (-priority, server name); keywords-less and off routing give none; server names escaped", () => {
    const mcpTool = (name: string, server: string, routing: object | undefined) => ({
      name,
      metadata: { mcp: { server, rawName: name, transport: "http" }, ...(routing ? { mcp_routing: routing } : {}) },
    });
    const prefer = (priority: number, keywords: string[]) => ({ mode: "prefer", priority, keywords, scope: "server" });
    const hints = renderRoutingHints([
      mcpTool("zeta_a", "zeta", prefer(10, ["z"])),
      mcpTool("alpha_b", "alpha", prefer(10, ["a"])),
      mcpTool("alpha_a", "alpha", prefer(10, ["a"])),
      mcpTool("top_x", "top", prefer(90, ["t"])),
      mcpTool("none_x", "none", prefer(90, [" "])),
      mcpTool("off_x", "off", { mode: "off", priority: 90, keywords: ["o"], scope: "server" }),
      mcpTool("bare_x", "bare", undefined),
      mcpTool("odd_x", "<odd&>", prefer(5, ["o"])),
    ]);
    expect(hints.split("\n").filter((l) => l.startsWith("  "))).toEqual([
      "  prefer the tool of the MCP server `top`: `top_x`.",
      "  prefer the tools of the MCP server `alpha`: `alpha_a`, `alpha_b`.",
      "  prefer the tool of the MCP server `zeta`: `zeta_a`.",
      "  prefer the tool of the MCP server `&lt;odd&amp;&gt;`: `odd_x`.",
    ]);
  });

  test("no hints → empty string", () => {
    expect(renderRoutingHints([])).toBe("");
  });
});
