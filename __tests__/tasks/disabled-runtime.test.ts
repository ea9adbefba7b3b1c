/**
 * createTaskRuntime with `mcpTasks.enabled` false: a runtime without a store. Nothing is created in the data dir,
 * no database connection is made (an unreachable PostgreSQL URL is fine, a real one gets no schema), and whatever
 * needs the store says in one line that tasks are disabled in the config, never a path or a value.
 */
import { afterAll, describe, expect, test } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { readdir } from "node:fs/promises";
import * as path from "node:path";
import { HumanMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { Client } from "pg";
import { createMcpToolkit, createGatewayApp, RecordingLogger, silentLogger } from "../../lib";
import { createDemoChatModel } from "../../lib/agent";
import { ExtensionsConfigSchema } from "../../lib/config";
import { createBackgroundTaskTools, createBackgroundTasksMiddleware, createTaskRuntime, McpTasksDisabledError, TaskRuntime } from "../../lib/tasks";
import { createTaskWorkerGraph, startTaskWorker } from "../../lib/worker";
import { makeTempDir, startHttpFixture, writeConfig } from "../fixtures";
import { PG_URL } from "./store/helpers";

const DISABLED = "durable tasks are disabled in the config (mcpTasks.enabled is false)";
const runtimes: TaskRuntime[] = [];

afterAll(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.stop();
});

async function disabledRuntime(env: NodeJS.ProcessEnv = {}) {
  const dir = await makeTempDir("tasks-off-");
  const dataDir = path.join(dir, "data");
  const configPath = await writeConfig(dir, { mcpTasks: { enabled: false }, mcpServers: {} });
  const runtime = await createTaskRuntime({ configPath, env: { MCP_HARNESS_DATA_DIR: dataDir, ...env }, cwd: dir, logger: silentLogger });
  runtimes.push(runtime);
  return { dir, runtime };
}

test("the default SQLite file under the data dir is never created, also after stop()", async () => {
  const { dir, runtime } = await disabledRuntime();
  expect(await readdir(dir)).toEqual(["extensions_config.json"]);
  await runtime.stop();
  expect(await readdir(dir)).toEqual(["extensions_config.json"]);
});

test("an explicit sqlite: URL is not opened either", async () => {
  const dir = await makeTempDir("tasks-off-");
  const configPath = await writeConfig(dir, { mcpTasks: { enabled: false }, mcpServers: {} });
  const runtime = await createTaskRuntime({ configPath, databaseUrl: `sqlite:${path.join(dir, "tasks.sqlite")}`, logger: silentLogger });
  runtimes.push(runtime);
  expect(await readdir(dir)).toEqual(["extensions_config.json"]);
});

test("no connection is made: an unreachable PostgreSQL URL does not fail the runtime", async () => {
  const { runtime } = await disabledRuntime({ MCP_HARNESS_DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" });
  expect(runtime.running).toBe(false);
  expect(runtime.settings.enabled).toBe(false);
});

(PG_URL ? test : test.skip)("PostgreSQL: no schema or table is created", async () => {
  const schema = `mcp_test_off_${randomBytes(6).toString("hex")}`;
  const url = `${PG_URL}${PG_URL!.includes("?") ? "&" : "?"}schema=${schema}`;
  await disabledRuntime({ MCP_HARNESS_DATABASE_URL: url });
  const client = new Client({ connectionString: PG_URL });
  await client.connect();
  try {
    const schemas = await client.query("SELECT 1 FROM information_schema.schemata WHERE schema_name = $1", [schema]);
    const tables = await client.query("SELECT 1 FROM information_schema.tables WHERE table_schema = $1", [schema]);
    expect([schemas.rowCount, tables.rowCount]).toEqual([0, 0]);
  } finally {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
  }
});

/** What `fn` threw or rejected with: a `McpTasksDisabledError` whose message is exactly the one line. */
async function refusalOf(fn: () => unknown): Promise<string> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(McpTasksDisabledError);
    return (err as Error).message;
  }
  throw new Error("no refusal");
}

test("whatever needs the store refuses in one line naming the setting; tool listing works without one", async () => {
  const { dir, runtime } = await disabledRuntime();
  expect(await refusalOf(() => runtime.store)).toBe(DISABLED);
  expect(await refusalOf(() => runtime.service)).toBe(DISABLED);
  const tick = runtime.runOnce(); // a rejected promise, not a throw: `runOnce().catch(…)` on an interval stays safe
  expect(await refusalOf(() => tick)).toBe(DISABLED);
  expect(await refusalOf(() => startTaskWorker({ runtime, intervalMs: 1000, logger: silentLogger }).stop())).toBe(DISABLED);
  expect(await refusalOf(() => createBackgroundTaskTools(runtime))).toBe(DISABLED);
  // The worker graph builds (Studio can show it); a run ends at its first node with the same line.
  const graph = createTaskWorkerGraph({ runtime });
  expect(await refusalOf(() => graph.invoke({}))).toBe(DISABLED);
  expect(await refusalOf(() => graph.invoke({ now: "2026-01-01T00:00:00.000Z" }))).toBe(DISABLED);
  // The gateway's task routes: 503 naming the setting.
  const gateway = createGatewayApp({ taskRuntime: runtime, authorize: async () => ({ userId: "ann", admin: false }), logger: silentLogger });
  const response = await gateway.request("/api/threads/th-1/mcp-tasks");
  expect(response.status).toBe(503);
  expect(await response.json()).toEqual({ detail: `MCP task service not available: ${DISABLED}` });
  // The task hooks need no store: a toolkit on this runtime lists its tools.
  const toolkit = createMcpToolkit({ configPath: path.join(dir, "extensions_config.json"), logger: silentLogger, dataDir: await makeTempDir("tasks-off-ws-"), taskRuntime: runtime });
  try {
    expect(await toolkit.getTools()).toEqual([]);
  } finally {
    await toolkit.close();
  }
  expect(await readdir(dir)).toEqual(["extensions_config.json"]);
});

test("a runtime built directly with tasks enabled and no store is refused, not taken for a disabled one", () => {
  const config = ExtensionsConfigSchema.parse({ mcpTasks: { enabled: true } });
  expect(() => new TaskRuntime(null, config, { ownsStore: false, logger: silentLogger })).toThrow(
    new TypeError("a task runtime with mcpTasks.enabled needs a task store"),
  );
});

test("startTaskWorker refuses a worker graph built on a disabled runtime too, rather than log a failed tick every interval", async () => {
  const { runtime } = await disabledRuntime();
  const logger = new RecordingLogger();
  const graph = createTaskWorkerGraph({ runtime });
  expect(await refusalOf(() => startTaskWorker({ graph, intervalMs: 0, logger }).stop())).toBe(DISABLED);
  expect(logger.lines).toEqual([]);
});

test("the background_tasks middleware refuses at creation, as the background task tools do: no warning on every run", async () => {
  const { runtime } = await disabledRuntime();
  const logger = new RecordingLogger();
  expect(await refusalOf(() => createBackgroundTasksMiddleware(runtime, { logger }))).toBe(DISABLED);
  expect(logger.lines).toEqual([]);
});

describe("a toolkit on a disabled runtime", () => {
  async function setup() {
    const http = await startHttpFixture({ name: "plain", toolNames: ["echo"] });
    const dir = await makeTempDir("tasks-off-kit-");
    const configPath = await writeConfig(dir, { mcpTasks: { enabled: false }, mcpServers: { plain: { type: "http", url: http.url } } });
    const env = { MCP_HARNESS_DATA_DIR: path.join(dir, "data") };
    const runtime = await createTaskRuntime({ configPath, env, cwd: dir, logger: silentLogger, toolkitOptions: { dataDir: path.join(dir, "ws") } });
    runtimes.push(runtime);
    const toolkit = () => createMcpToolkit({ configPath, env, cwd: dir, logger: silentLogger, dataDir: path.join(dir, "ws"), taskRuntime: runtime });
    return { http, dir, runtime, toolkit };
  }

  test("lists and calls ordinary tools, in an agent run, and no task database appears", async () => {
    const { http, dir, runtime, toolkit } = await setup();
    const kit = toolkit();
    try {
      const tools = await kit.getTools();
      expect(tools.map((t) => t.name)).toEqual(["plain_echo"]);
      const agent = createAgent({ model: createDemoChatModel(), tools, checkpointer: new MemorySaver() });
      const out = await agent.invoke({ messages: [new HumanMessage('please plain_echo {"text":"hi"}')] }, { configurable: { thread_id: "th-1" } });
      expect(out.messages.find((m) => m.getType() === "tool")!.text).toBe("hi");
    } finally {
      await kit.close();
      await runtime.stop();
      await http.close();
    }
    expect((await readdir(dir)).includes("data")).toBe(false);
  });

  test("close() and stop() in either order, twice, and with the runtime's own toolkit replaced by an agent's", async () => {
    const stopFirst = await setup();
    const a = stopFirst.toolkit();
    await a.getTools();
    await stopFirst.runtime.stop();
    await stopFirst.runtime.stop();
    await a.close();
    await a.close();
    await stopFirst.http.close();

    const closeFirst = await setup();
    const b = closeFirst.toolkit();
    await b.getTools();
    await b.close();
    await closeFirst.runtime.stop();
    await closeFirst.http.close();

    const replaced = await setup();
    const own = replaced.runtime.toolkit; // a process that asked the runtime for its toolkit before the agent made one
    expect((await own.getTools()).map((t) => t.name)).toEqual(["plain_echo"]);
    const agentKit = replaced.toolkit();
    expect((await agentKit.getTools()).map((t) => t.name)).toEqual(["plain_echo"]);
    await replaced.runtime.stop(); // waits for the own toolkit's close
    await expect(own.getTools()).rejects.toThrow();
    expect((await agentKit.getTools()).map((t) => t.name)).toEqual(["plain_echo"]);
    await agentKit.close();
    await replaced.http.close();
  });
});
