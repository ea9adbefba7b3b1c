/**
 * Durable tasks of a stdio task server through a real `langgraphjs dev` (in-memory, offline) serving `graphs/agent.ts`
 * with the scripted model: the job a thread submits is polled by the in-server worker in that thread's own child, also
 * across a hot reload of the config made while it is pending, and its outcome comes back into the thread as a run.
 */
import { afterAll, beforeAll, expect, jest, test } from "@jest/globals";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { Client, type Run } from "@langchain/langgraph-sdk";
import { JOB_TOOLSET, makeTempDir, stdioFixture, writeConfig } from "../fixtures";
import { startLangGraphDev, type LangGraphDevServer } from "../fixtures/langgraph-dev";
import { pidsWithMarkerAndEnv, waitUntil } from "../fixtures/processes";
import { STDIO_SERVER_PATH } from "../fixtures/stdio";
import { storedRows } from "../fixtures/task-rows";

jest.setTimeout(240_000);

const ROOT = path.resolve(__dirname, "..", "..");
let dev: LangGraphDevServer;
let client: Client;
let dataDir: string;
let hostTmp: string;
let releaseDir: string;
let configPath: string;

interface StateMessage {
  type: string;
  content: unknown;
}

/** The fixture's children of this test's server (each given this test's temp folder). */
const children = () => pidsWithMarkerAndEnv(STDIO_SERVER_PATH, `TMPDIR=${hostTmp}`);

beforeAll(async () => {
  const dir = await makeTempDir("server-tasks-stdio-");
  dataDir = path.join(dir, "data");
  hostTmp = path.join(dir, "host-tmp");
  releaseDir = path.join(dir, "released");
  await mkdir(releaseDir);
  const launch = stdioFixture({ name: "fx", toolNames: ["pid"], tasks: true, releaseDir });
  configPath = await writeConfig(dir, {
    mcpTasks: { enabled: true, poll_interval_seconds: 1 },
    mcpServers: {
      // tsx keeps its compile cache in TMPDIR: in the host's, the thread's own temp folder stays empty.
      fx: { type: "stdio", description: "jobs", ...launch, env: { ...launch.env, TMPDIR: hostTmp }, task_toolsets: [{ name: "job", ...JOB_TOOLSET }] },
    },
  });
  dev = await startLangGraphDev(
    { agent: `${path.join(ROOT, "graphs", "agent.ts")}:graph` },
    { env: { MCP_HARNESS_CONFIG: configPath, MCP_HARNESS_DATA_DIR: dataDir, MCP_HARNESS_MODEL: "" } },
  );
  client = new Client({ apiUrl: dev.url, apiKey: null });
}, 180_000);

afterAll(async () => {
  await dev?.close();
  expect(await waitUntil(() => children().length === 0, 30_000)).toBe(true);
});

/** One run of the agent on `thread` asking for `request`; the text of the ToolMessage it produced. */
async function ask(thread: string, request: string): Promise<string> {
  const before = (await client.threads.getState<{ messages?: StateMessage[] }>(thread)).values.messages?.length ?? 0;
  await client.runs.wait(thread, "agent", { input: { messages: [{ role: "human", content: request }] } });
  const tool = (await client.threads.getState<{ messages: StateMessage[] }>(thread)).values.messages.slice(before).find((m) => m.type === "tool");
  if (!tool) throw new Error(`no tool message\n${dev.output()}`);
  return String(tool.content);
}

/** Polls the thread's runs for the notification of `taskId`; gives up (throwing) after about two minutes. */
async function notificationRun(thread: string, taskId: string): Promise<Run> {
  for (let i = 0; i < 1200; i += 1) {
    const run = (await client.runs.list(thread)).find((r) => (r.metadata?.mcp_task_notification as { task_id?: string } | undefined)?.task_id === taskId);
    if (run) return run;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`no notification run for ${taskId}\n${dev.output()}`);
}

test("a thread's job is polled in the thread's own child, across a description edit made while it is pending, and delivered as a run", async () => {
  const { thread_id: thread } = await client.threads.create();
  const pid = Number(await ask(thread, "fx_pid {}"));
  expect(Number.isInteger(pid)).toBe(true);
  const submitted = JSON.parse(await ask(thread, 'fx_start_job {"label":"a","mode":"held"}')) as { task_id: string; status: string };
  expect(submitted.status).toBe("submitted");

  // A presentation field of the task server, edited while the job is held: the thread's next run reloads the tools,
  // and the child holding the pending task serves on in the new generation.
  const config = JSON.parse(await readFile(configPath, "utf8"));
  config.mcpServers.fx.description = "jobs, described anew";
  await writeFile(configPath, JSON.stringify(config));
  expect(Number(await ask(thread, "fx_pid {}"))).toBe(pid);
  const row = (await storedRows(path.join(dataDir, "tasks.sqlite"))).find((r) => r.id === submitted.task_id)!;
  expect(["submitted", "working"]).toContain(row.status);

  await writeFile(path.join(releaseDir, String(row.remote_task_id)), "");
  const run = await notificationRun(thread, submitted.task_id);
  await client.runs.join(thread, run.run_id);
  expect((await client.runs.get(thread, run.run_id)).status).toBe("success");
  const report = String((await client.threads.getState<{ messages: StateMessage[] }>(thread)).values.messages.at(-1)!.content);
  const prefix = "Background task job is completed: ";
  expect(report.startsWith(prefix)).toBe(true);
  expect(JSON.parse(report.slice(prefix.length))).toMatchObject({ label: "a", pid, cwd: path.join(dataDir, "threads", thread, "user-data", "workspace") });
  expect(children()).toContain(pid);
});
