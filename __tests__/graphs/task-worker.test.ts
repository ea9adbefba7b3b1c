/**
 * graphs/mcp_task_worker.ts: registered in langgraph.json, built on the first call from the environment's
 * config and database (createTaskRuntime()), one runtime per process, and one tick per run.
 */
import { afterAll, expect, test } from "@jest/globals";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { closeMcpTaskWorker, graph } from "../../graphs/mcp_task_worker";
import { closeServerTasks } from "../../graphs/server-tasks";
import { makeTempDir, writeConfig } from "../fixtures/config";

const ROOT = path.resolve(__dirname, "..", "..");
const saved = { config: process.env.MCP_HARNESS_CONFIG, db: process.env.MCP_HARNESS_DATABASE_URL };

afterAll(async () => {
  await closeMcpTaskWorker();
  await closeServerTasks();
  for (const [name, value] of [["MCP_HARNESS_CONFIG", saved.config], ["MCP_HARNESS_DATABASE_URL", saved.db]] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

test("langgraph.json serves the worker graph; each call of the export gives the same graph, one tick per run", async () => {
  const manifest = JSON.parse(readFileSync(path.join(ROOT, "langgraph.json"), "utf8")) as { graphs: Record<string, string> };
  expect(manifest.graphs.mcp_task_worker).toBe("./graphs/mcp_task_worker.ts:graph");

  const dir = await makeTempDir("worker-graph-");
  process.env.MCP_HARNESS_CONFIG = await writeConfig(dir, { mcpTasks: { enabled: true }, mcpServers: {} });
  process.env.MCP_HARNESS_DATABASE_URL = `sqlite:${path.join(dir, "tasks.sqlite")}`;
  const first = await graph({});
  expect(await graph({})).toBe(first);
  const state = await first.invoke({ now: "2026-01-01T00:00:00.000Z" });
  expect(state).toMatchObject({ tickAt: "2026-01-01T00:00:00.000Z", claimed: 0, notified: 0, errors: 0, now: null });
  expect(Object.keys(first.nodes).sort()).toEqual(["__start__", "cancellations", "claim", "notifications", "poll"]);
});
