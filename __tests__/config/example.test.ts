/**
 * extensions_config.example.json as shipped: it loads without warnings, explains the durable-task fields
 * (in `"//"` keys, since JSON has no comments), and the `mcpInterceptors` module it
 * names exists next to it, loads, and does what its comment says.
 */
import { afterAll, afterEach, describe, expect, it } from "@jest/globals";
import { readFile } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, loadExtensionsConfig, RecordingLogger, type McpToolkit } from "../../lib";
import { startTestMcpServer, writeTestConfig, type TestMcpHttpServer } from "../../lib/testing";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";

const ROOT = path.resolve(__dirname, "..", "..");
const EXAMPLE = path.join(ROOT, "extensions_config.example.json");

type Json = Record<string, unknown>;

const toolkits: McpToolkit[] = [];
let server: TestMcpHttpServer | undefined;

afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((t) => t.close()));
});
afterAll(async () => {
  await server?.close();
});

async function example(): Promise<Json> {
  return JSON.parse(await readFile(EXAMPLE, "utf8")) as Json;
}

describe("extensions_config.example.json", () => {
  it("documents the durable-task fields (mcpTasks, task_toolsets), and still loads without warnings", async () => {
    const config = await example();
    expect((config.mcpTasks as Json)["//"]).toMatch(/^Durable tasks, read once at startup/);
    const servers = Object.values(config.mcpServers as Record<string, Json>);
    const withToolsets = servers.filter((s) => "task_toolsets" in s);
    expect(withToolsets.length).toBeGreaterThan(0);
    for (const s of withToolsets) expect(s["//"]).toMatch(/^task_toolsets: .*Needs mcpTasks\.enabled\.$/);

    const logger = new RecordingLogger();
    const loaded = await loadExtensionsConfig({ configPath: EXAMPLE, env: {}, logger });
    expect(loaded.warnings).toEqual([]);
    expect(logger.messages("warn")).toEqual([]);
  });

  it("names an mcpInterceptors module that ships with it and loads", async () => {
    const config = await example();
    const specs = config.mcpInterceptors as string[];
    expect(specs.length).toBeGreaterThan(0);
    const logger = new RecordingLogger();
    const toolkit = createMcpToolkit({ configPath: EXAMPLE, env: {}, logger });
    toolkits.push(toolkit);
    expect(await toolkit.getTools()).toEqual([]); // every example server is disabled
    expect(logger.messages("warn")).toEqual([]);
    expect(logger.messages("info")).toEqual(expect.arrayContaining(specs.map((spec) => `Loaded MCP interceptor '${spec}'`)));
  });

  it("its interceptor sends the run's user id as X-Requested-By", async () => {
    server = await startTestMcpServer({ name: "audited", builtins: ["whoami"] });
    const configPath = await writeTestConfig({
      mcpServers: { audited: server.config },
      mcpInterceptors: [`${path.join(ROOT, "graphs", "demo", "audit-interceptor.js")}:buildAuditInterceptor`],
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    toolkits.push(toolkit);
    const graph = toolNodeGraph(await toolkit.getTools());
    await callThroughGraph(graph, "audited_whoami", {}, { context: { user_id: "alice" } });
    await callThroughGraph(graph, "audited_whoami", {});
    expect(server.calls.map((call) => call.headers["x-requested-by"])).toEqual(["alice", "anonymous"]);
  });
});
