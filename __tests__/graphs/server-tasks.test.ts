/**
 * The task runtime inside the LangGraph server (`graphs/server-tasks.ts`, `graphs/http.ts`) when its config could
 * not be read as the server started: once the operator fixes the file, the runtime the agent gets has the worker
 * that ticks it, the task routes answer instead of 503 for good, and the gateway's cache reset reaches the agent's
 * toolkit. The server's loopback is a stand-in fetch:
 * only its presence matters here.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import { writeFile } from "node:fs/promises";
import * as path from "node:path";
import { JOB_TOOLSET, makeTempDir, startHttpFixture, TaskBoard, writeConfig } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";

type ServerTasksModule = typeof import("../../graphs/server-tasks");
type HttpModule = typeof import("../../graphs/http");
/** Loaded once the environment is set: `graphs/http.ts` reads it, and starts the worker, as it is imported. */
const load = <T>(id: string): T => require(id) as T;

const LOOPBACK = Symbol.for("langgraph_api:fetch");
const VARIABLES = ["MCP_HARNESS_CONFIG", "MCP_HARNESS_DATABASE_URL", "MCP_HARNESS_DATA_DIR", "MCP_HARNESS_ADMIN_TOKEN"] as const;
const saved = Object.fromEntries(VARIABLES.map((name) => [name, process.env[name]]));
const globals = globalThis as Record<symbol, unknown>;

let http: StreamableHttpFixture;
let dir: string;

beforeAll(async () => {
  http = await startHttpFixture({ name: "jobs", toolNames: ["echo"], taskBoard: new TaskBoard() });
  dir = await makeTempDir("server-tasks-");
  process.env.MCP_HARNESS_CONFIG = path.join(dir, "extensions_config.json");
  await writeFile(process.env.MCP_HARNESS_CONFIG, '{"mcpServers": oops');
  process.env.MCP_HARNESS_DATABASE_URL = `sqlite:${path.join(dir, "tasks.sqlite")}`;
  process.env.MCP_HARNESS_DATA_DIR = dir;
  process.env.MCP_HARNESS_ADMIN_TOKEN = "admin-token";
  globals[LOOPBACK] = async () => new Response("{}", { status: 500 });
});

afterAll(async () => {
  await load<ServerTasksModule>("../../graphs/server-tasks").closeServerTasks();
  delete globals[LOOPBACK];
  for (const name of VARIABLES) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
  await http.close();
});

test("a config fixed after startup gets the runtime its worker and its task routes", async () => {
  const serverTasks = load<ServerTasksModule>("../../graphs/server-tasks");
  const { app } = load<HttpModule>("../../graphs/http");
  const route = () => app.request("/api/threads/th-1/mcp-tasks", { headers: { authorization: "Bearer admin-token" } });
  expect(await serverTasks.startServerTaskWorker()).toBeNull();
  expect((await route()).status).toBe(503);
  expect(await serverTasks.getServerTasks()).toBeNull(); // the load that request started has read the broken file

  await writeConfig(dir, {
    mcpTasks: { enabled: true, poll_interval_seconds: 300 },
    mcpServers: { jobs: { type: "http", url: http.url, task_toolsets: [{ name: "build", ...JOB_TOOLSET }] } },
  });
  expect((await route()).status).toBe(503); // this request starts the runtime; it is not running yet
  const tasks = await serverTasks.getServerTasks();
  expect(tasks?.runtime.running).toBe(true);
  // The runtime's start started its worker; nothing else asked for one.
  const started = (globals[Symbol.for("langgraph-mcp-harness:server-tasks")] as { worker?: Promise<unknown> }).worker;
  expect(started).toBeDefined();
  const worker = await started;
  expect(worker).not.toBeNull();
  expect(await serverTasks.startServerTaskWorker()).toBe(worker);
  const answer = await route();
  expect(answer.status).toBe(200);
  expect(await answer.json()).toEqual([]);

  // The gateway's cache reset reaches the toolkit the agent's tools come from when tasks are on.
  const before = await tasks!.toolkit.getTools();
  const reset = await app.request("/api/mcp/cache/reset", { method: "POST", headers: { authorization: "Bearer admin-token" } });
  expect(reset.status).toBe(200);
  const after = await tasks!.toolkit.getTools();
  expect(after.map((t) => t.name)).toEqual(before.map((t) => t.name));
  expect(after[0]).not.toBe(before[0]);
});

test("notifications go to the loopback, an explicit URL or the port, each with the API key the environment gives", () => {
  const { serverApiTarget } = load<ServerTasksModule>("../../graphs/server-tasks");
  const keyed = serverApiTarget({ MCP_HARNESS_LANGGRAPH_API_KEY: "lg-key-1" });
  expect(keyed).toMatchObject({ apiUrl: "http://langgraph-api.loopback", apiKey: "lg-key-1", description: "this server (in-process), with an API key" });
  expect(serverApiTarget({})).toMatchObject({ apiKey: undefined, description: "this server (in-process)" });
  const explicit = serverApiTarget({ MCP_HARNESS_LANGGRAPH_API_URL: "https://lg.example/x?y=1", LANGGRAPH_API_KEY: "lg-key-2" });
  expect(explicit).toMatchObject({ apiUrl: "https://lg.example/x?y=1", apiKey: "lg-key-2" });
  expect(explicit.description).toBe("MCP_HARNESS_LANGGRAPH_API_URL (https://lg.example), with an API key");
});
