/**
 * `graphs/http.ts` imported outside the LangGraph server (no loopback: a plain process), with `mcpTasks.enabled`
 * false: its task runtime reads the config on the first task request, and that first request's 503 already says
 * tasks are disabled in the config, as every later one does.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import * as path from "node:path";
import { makeTempDir, writeConfig } from "../fixtures";

type ServerTasksModule = typeof import("../../graphs/server-tasks");
type HttpModule = typeof import("../../graphs/http");
/** Loaded once the environment is set: `graphs/http.ts` reads it as it is imported. */
const load = <T>(id: string): T => require(id) as T;

const VARIABLES = ["MCP_HARNESS_CONFIG", "MCP_HARNESS_DATABASE_URL", "MCP_HARNESS_DATA_DIR", "MCP_HARNESS_ADMIN_TOKEN"] as const;
const saved = Object.fromEntries(VARIABLES.map((name) => [name, process.env[name]]));
const DISABLED = { detail: "MCP task service not available: durable tasks are disabled in the config (mcpTasks.enabled is false)" };

beforeAll(async () => {
  const dir = await makeTempDir("http-outside-server-");
  process.env.MCP_HARNESS_CONFIG = await writeConfig(dir, { mcpTasks: { enabled: false }, mcpServers: {} });
  delete process.env.MCP_HARNESS_DATABASE_URL;
  process.env.MCP_HARNESS_DATA_DIR = path.join(dir, "data");
  process.env.MCP_HARNESS_ADMIN_TOKEN = "admin-token";
});

afterAll(async () => {
  await load<ServerTasksModule>("../../graphs/server-tasks").closeServerTasks();
  for (const name of VARIABLES) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
});

test("tasks disabled, outside the server: the first task request's 503 names the setting, as the later ones do", async () => {
  const { app } = load<HttpModule>("../../graphs/http");
  const route = () => app.request("/api/threads/th-1/mcp-tasks", { headers: { authorization: "Bearer admin-token" } });
  for (let i = 0; i < 2; i++) {
    const answer = await route();
    expect(answer.status).toBe(503);
    expect(await answer.json()).toEqual(DISABLED);
  }
});
