/**
 * The LangGraph server's graphs with `mcpTasks.enabled` false, loaded together as `langgraph dev` loads them
 * (`agent`, `mcp_task_worker`, the `http.app` gateway): the agent works as it does without tasks, no worker starts,
 * the task routes' 503 says tasks are disabled in the config, and no task database appears anywhere.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { readdir } from "node:fs/promises";
import * as path from "node:path";
import { getDefaultMcpToolkit } from "../../lib";
import { makeTempDir, startHttpFixture, writeConfig } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";

type ServerTasksModule = typeof import("../../graphs/server-tasks");
type HttpModule = typeof import("../../graphs/http");
type AgentModule = typeof import("../../graphs/agent");
type WorkerModule = typeof import("../../graphs/mcp_task_worker");
/** Loaded once the environment is set: `graphs/http.ts` reads it as it is imported. */
const load = <T>(id: string): T => require(id) as T;

const LOOPBACK = Symbol.for("langgraph_api:fetch");
const VARIABLES = ["MCP_HARNESS_CONFIG", "MCP_HARNESS_DATABASE_URL", "MCP_HARNESS_DATA_DIR", "MCP_HARNESS_ADMIN_TOKEN", "MCP_HARNESS_MODEL"] as const;
const saved = Object.fromEntries(VARIABLES.map((name) => [name, process.env[name]]));
const globals = globalThis as Record<symbol, unknown>;

let http: StreamableHttpFixture;
let dir: string;

beforeAll(async () => {
  http = await startHttpFixture({ name: "plain", toolNames: ["echo"] });
  dir = await makeTempDir("server-tasks-off-");
  process.env.MCP_HARNESS_CONFIG = await writeConfig(dir, { mcpTasks: { enabled: false }, mcpServers: { plain: { type: "http", url: http.url } } });
  delete process.env.MCP_HARNESS_DATABASE_URL;
  delete process.env.MCP_HARNESS_MODEL;
  process.env.MCP_HARNESS_DATA_DIR = path.join(dir, "data");
  process.env.MCP_HARNESS_ADMIN_TOKEN = "admin-token";
  globals[LOOPBACK] = async () => new Response("{}", { status: 500 });
});

afterAll(async () => {
  await load<WorkerModule>("../../graphs/mcp_task_worker").closeMcpTaskWorker();
  await load<ServerTasksModule>("../../graphs/server-tasks").closeServerTasks();
  await getDefaultMcpToolkit().close();
  delete globals[LOOPBACK];
  for (const name of VARIABLES) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
  await http.close();
});

async function filesUnder(root: string): Promise<string[]> {
  return (await readdir(root, { recursive: true })).map(String);
}

test("tasks disabled: the agent runs as without tasks, the worker graph loads, the task routes say why they answer 503", async () => {
  const serverTasks = load<ServerTasksModule>("../../graphs/server-tasks");
  const { app } = load<HttpModule>("../../graphs/http");
  expect(await serverTasks.startServerTaskWorker()).toBeNull();
  expect(await serverTasks.getServerTasks()).toBeNull();

  const route = await app.request("/api/threads/th-1/mcp-tasks", { headers: { authorization: "Bearer admin-token" } });
  expect(route.status).toBe(503);
  expect(await route.json()).toEqual({
    detail: "MCP task service not available: durable tasks are disabled in the config (mcpTasks.enabled is false)",
  });

  const agent = await load<AgentModule>("../../graphs/agent").graph({});
  const out = await agent.invoke({ messages: [new HumanMessage('please plain_echo {"text":"hi"}')] });
  expect((out.messages as BaseMessage[]).at(-1)!.text).toBe("Tool plain_echo returned: hi");
  expect(out).not.toHaveProperty("background_tasks");

  const worker = await load<WorkerModule>("../../graphs/mcp_task_worker").graph({});
  await expect(worker.invoke({})).rejects.toThrow(/^durable tasks are disabled in the config \(mcpTasks\.enabled is false\)$/);

  expect((await filesUnder(dir)).filter((file) => /sqlite/.test(file))).toEqual([]);
});
