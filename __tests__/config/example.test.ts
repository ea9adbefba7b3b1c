/**
 * extensions_config.example.json as shipped: it loads without warnings, explains the durable-task fields
 * (in `"//"` keys, since JSON has no comments), and the `mcpInterceptors` module it
 * names exists next to it, loads, and does what its comment says.
 */
import { afterAll, afterEach, describe, expect, it } from "@jest/globals";
import { readFile } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, loadExtensionsConfig, RecordingLogger, type McpToolkit } from "../../lib";
import {
  ExtensionsConfigSchema,
  McpHeadersFromContextSchema,
  McpOAuthSchema,
  McpRoutingSchema,
  McpServerSchema,
  McpTaskToolsetSchema,
  McpTasksSettingsSchema,
  McpUserAuthSchema,
} from "../../lib/config/schema";
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

  it("shows every field the schema reads, as its first comment says", async () => {
    const config = await example();
    expect(config["//"]).toMatch(/^Every field this package reads is shown\./);
    const shown = (objects: Json[]): Set<string> => new Set(objects.flatMap((o) => Object.keys(o)));
    const servers = Object.values(config.mcpServers as Record<string, Json>);
    const present = (key: string) => servers.filter((s) => s[key] !== undefined && s[key] !== null).map((s) => s[key] as Json);
    // An object schema's keys; a refined or transformed one is a pipe whose input is the object.
    type Shaped = { shape?: object; in?: Shaped };
    const keysOf = (schema: Shaped): string[] => (schema.shape ? Object.keys(schema.shape) : keysOf(schema.in!));
    const missing = (schema: unknown, objects: Json[]) => keysOf(schema as Shaped).filter((key) => !shown(objects).has(key));
    expect({
      top: missing(ExtensionsConfigSchema, [config]),
      server: missing(McpServerSchema, servers),
      oauth: missing(McpOAuthSchema, present("oauth")),
      user_auth: missing(McpUserAuthSchema, present("user_auth")),
      headers_from_context: missing(McpHeadersFromContextSchema, present("headers_from_context")),
      routing: missing(McpRoutingSchema, present("routing")),
      task_toolsets: missing(McpTaskToolsetSchema, present("task_toolsets").flat() as Json[]),
      mcpTasks: missing(McpTasksSettingsSchema, [config.mcpTasks as Json]),
    }).toEqual({ top: [], server: [], oauth: [], user_auth: [], headers_from_context: [], routing: [], task_toolsets: [], mcpTasks: [] });
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
