/**
 * `langgraph-mcp-harness/testing` from the sources: the test MCP server (in-process HTTP and stdio child)
 * behind a real toolkit and a real ToolNode graph, the config writer, and the scripted model's export.
 * (The built subpath is exercised in ESM and CJS projects by __tests__/package/pack.test.ts.)
 */
import { afterAll, afterEach, describe, expect, it } from "@jest/globals";
import { readFile } from "node:fs/promises";
import * as path from "node:path";
import { z } from "zod";
import { createMcpToolkit, RecordingLogger, type ExtensionsConfigInput, type McpToolkit } from "../../lib";
import { ScriptedChatModel as AgentScriptedChatModel } from "../../lib/agent";
import {
  ScriptedChatModel,
  TEST_SERVER_BUILTIN_TOOLS,
  demoPolicy,
  startTestMcpServer,
  testStdioServer,
  testTool,
  writeTestConfig,
  type TestMcpHttpServer,
} from "../../lib/testing";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { makeTempDir } from "../fixtures/config";

const toolkits: McpToolkit[] = [];
const servers: TestMcpHttpServer[] = [];

afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((t) => t.close()));
});
afterAll(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function toolkitFor(mcpServers: NonNullable<ExtensionsConfigInput["mcpServers"]>): Promise<{ toolkit: McpToolkit; logger: RecordingLogger }> {
  const configPath = await writeTestConfig({ mcpServers });
  const logger = new RecordingLogger();
  const toolkit = createMcpToolkit({ configPath, env: {}, logger });
  toolkits.push(toolkit);
  return { toolkit, logger };
}

describe("startTestMcpServer (streamable HTTP in this process)", () => {
  it("serves the built-in and the test's own tools, and records each call with its headers", async () => {
    const server = await startTestMcpServer({
      name: "crm",
      tools: [
        testTool({
          name: "lookup",
          description: "Find a customer by id.",
          inputSchema: { id: z.number().int() },
          handler: ({ id }, { headers }) => `customer ${id} for ${headers["x-api-key"] ?? "nobody"}`,
        }),
      ],
    });
    servers.push(server);
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);

    const { toolkit } = await toolkitFor({ crm: { ...server.config, headers: { "X-Api-Key": "k-1" } } });
    const tools = await toolkit.getTools();
    expect(tools.map((t) => t.name)).toEqual([...TEST_SERVER_BUILTIN_TOOLS.map((n) => `crm_${n}`), "crm_lookup"]);

    const graph = toolNodeGraph(tools);
    // The header reached the server; its echo is scrubbed (static header values are credentials).
    expect((await callThroughGraph(graph, "crm_lookup", { id: 7 })).content).toBe("customer 7 for [redacted]");
    expect(server.calls.at(-1)?.headers["x-api-key"]).toBe("k-1");
    const add = await callThroughGraph(graph, "crm_add", { a: 2, b: 3 });
    expect(add.content).toBe("5");
    expect(add.artifact).toMatchObject({ structuredContent: { sum: 5 } });
    const fail = await callThroughGraph(graph, "crm_fail", { message: "no such order" });
    expect(fail.status).toBe("error");
    expect(fail.content).toContain("no such order");

    expect(server.calls.map((c) => [c.tool, c.args])).toEqual([
      ["lookup", { id: 7 }],
      ["add", { a: 2, b: 3 }],
      ["fail", { message: "no such order" }],
    ]);
    expect(server.calls[0].headers["x-api-key"]).toBe("k-1");
  });

  it("registers only the chosen built-in tools", async () => {
    const server = await startTestMcpServer({ name: "mini", builtins: ["echo"] });
    servers.push(server);
    const { toolkit } = await toolkitFor({ mini: server.config });
    expect((await toolkit.getTools()).map((t) => t.name)).toEqual(["mini_echo"]);
  });

  it("refuses tools it could not serve when it starts, not as an error on every request", async () => {
    const echo = testTool({ name: "echo", description: "mine", handler: () => "x" });
    await expect(startTestMcpServer({ tools: [echo] })).rejects.toThrow(
      "test MCP server: tool 'echo' is defined twice (leave it out of builtins, or name yours differently)",
    );
    await expect(startTestMcpServer({ builtins: ["nope" as never] })).rejects.toThrow("test MCP server: there is no builtin tool 'nope'");
    const server = await startTestMcpServer({ builtins: ["add"], tools: [echo] });
    servers.push(server);
    const { toolkit } = await toolkitFor({ own: server.config });
    expect((await toolkit.getTools()).map((t) => t.name).sort()).toEqual(["own_add", "own_echo"]);
  });
});

describe("testStdioServer (a stdio child process)", () => {
  it("gives a config entry that starts the test server with the chosen name and tools", async () => {
    const entry = testStdioServer({ name: "local", builtins: ["echo", "whoami"] });
    expect(entry.command).toBe(process.execPath);
    const { toolkit, logger } = await toolkitFor({ local: entry });
    const tools = await toolkit.getTools();
    expect(tools.map((t) => t.name)).toEqual(["local_echo", "local_whoami"]);
    expect(logger.messages("warn")).toEqual([]);
    const message = await callThroughGraph(toolNodeGraph(tools), "local_echo", { text: "over stdio" });
    expect(message.content).toBe("over stdio");
  });
});

describe("writeTestConfig and the scripted model", () => {
  it("writes the config as JSON into the given folder", async () => {
    const dir = await makeTempDir("mcp-testing-");
    const file = await writeTestConfig({ mcpServers: { a: { url: "http://127.0.0.1:1/mcp" } } }, { dir, fileName: "mcp.json" });
    expect(file).toBe(path.join(dir, "mcp.json"));
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual({ mcpServers: { a: { url: "http://127.0.0.1:1/mcp" } } });
  });

  it("exports the scripted model and demo policy the graphs use", async () => {
    expect(ScriptedChatModel).toBe(AgentScriptedChatModel);
    const model = new ScriptedChatModel([], { fallback: demoPolicy });
    expect((await model.invoke("hello")).text).toContain("offline demo model");
  });
});
