/**
 * graphs/mcp_task_worker.ts with `mcpTasks.enabled` false: the graph loads (Studio shows it) and a run ends at
 * its first node with one line naming the setting; no task database appears in the data dir.
 */
import { afterAll, expect, test } from "@jest/globals";
import { readdir } from "node:fs/promises";
import * as path from "node:path";
import { closeMcpTaskWorker, graph } from "../../graphs/mcp_task_worker";
import { closeServerTasks } from "../../graphs/server-tasks";
import { makeTempDir, writeConfig } from "../fixtures/config";

const VARIABLES = ["MCP_HARNESS_CONFIG", "MCP_HARNESS_DATABASE_URL", "MCP_HARNESS_DATA_DIR"] as const;
const saved = Object.fromEntries(VARIABLES.map((name) => [name, process.env[name]]));

afterAll(async () => {
  await closeMcpTaskWorker();
  await closeServerTasks();
  for (const name of VARIABLES) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
});

test("tasks disabled: the graph loads, a run fails at once naming the setting, and no database is created", async () => {
  const dir = await makeTempDir("worker-graph-off-");
  process.env.MCP_HARNESS_CONFIG = await writeConfig(dir, { mcpTasks: { enabled: false }, mcpServers: {} });
  delete process.env.MCP_HARNESS_DATABASE_URL;
  process.env.MCP_HARNESS_DATA_DIR = path.join(dir, "data");
  const first = await graph({});
  expect(await graph({})).toBe(first);
  expect(Object.keys(first.nodes).sort()).toEqual(["__start__", "cancellations", "claim", "notifications", "poll"]);
  await expect(first.invoke({})).rejects.toThrow(/^durable tasks are disabled in the config \(mcpTasks\.enabled is false\)$/);
  await closeMcpTaskWorker();
  expect(await readdir(dir)).toEqual(["extensions_config.json"]);
});
