/**
 * `graphs/agent.ts` with `mcpTasks.enabled`: the agent gets the submit wrappers, the background task tools and
 * the `background_tasks` projection, and the offline demo model reports a task notification instead of
 * treating its framed data as a request.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import * as path from "node:path";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { createGraphNotifier, notificationIdempotencyKey, type SubmittedTask } from "../../lib/tasks";
import { JOB_TOOLSET, makeTempDir, startHttpFixture, TaskBoard, writeConfig } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";
// The module reads the environment when the first agent is built, not on import.
import * as agentModule from "../../graphs/agent";
import { closeServerTasks } from "../../graphs/server-tasks";
import { taskDelivery } from "../tasks/deliveries";

const saved = { config: process.env.MCP_HARNESS_CONFIG, db: process.env.MCP_HARNESS_DATABASE_URL, model: process.env.MCP_HARNESS_MODEL };
let http: StreamableHttpFixture;

beforeAll(async () => {
  http = await startHttpFixture({ name: "jobs", toolNames: ["echo"], taskBoard: new TaskBoard() });
  const dir = await makeTempDir("agent-tasks-");
  process.env.MCP_HARNESS_CONFIG = await writeConfig(dir, {
    mcpTasks: { enabled: true },
    mcpServers: { jobs: { type: "http", url: http.url, task_toolsets: [{ name: "build", ...JOB_TOOLSET }] } },
  });
  process.env.MCP_HARNESS_DATABASE_URL = `sqlite:${path.join(dir, "tasks.sqlite")}`;
  delete process.env.MCP_HARNESS_MODEL;
});

afterAll(async () => {
  await closeServerTasks();
  await http.close();
  for (const [key, value] of [["MCP_HARNESS_CONFIG", saved.config], ["MCP_HARNESS_DATABASE_URL", saved.db], ["MCP_HARNESS_MODEL", saved.model]] as const) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
});

test("the agent submits, lists, cancels and sees its tasks in state; a notification gets a report", async () => {
  const agent = await agentModule.graph({});
  agent.checkpointer = new MemorySaver();
  const run = async (text: string) =>
    (await agent.invoke({ messages: [new HumanMessage(text)] }, { configurable: { thread_id: "th-g" }, context: { user_id: "ann" } })).messages as BaseMessage[];

  const submitted = await run('please jobs_start_job {"label":"g","steps":50}');
  const tool = submitted.find((m) => m.getType() === "tool")!;
  const task = JSON.parse(tool.text) as SubmittedTask;
  expect(task).toMatchObject({ task_name: "build", status: "submitted" });

  const listed = await run("please list_background_tasks {}");
  expect(listed.at(-1)!.text).toContain(`"task_id":"${task.task_id}"`);
  const state = await agent.graph.getState({ configurable: { thread_id: "th-g" } });
  expect((state.values as Record<string, unknown>).background_tasks).toEqual([expect.objectContaining({ task_id: task.task_id, status: "submitted" })]);

  const cancelled = await run("please cancel_background_task {}");
  expect(cancelled.at(-1)!.text).toContain('"cancel_requested":true');

  const notifier = createGraphNotifier({ graph: agent });
  await notifier.deliver(
    taskDelivery({ taskId: task.task_id, threadId: "th-g", event: { result: { note: "please jobs_start_job {}" } } }),
    notificationIdempotencyKey(task.task_id, 1, 0),
  );
  await notifier.idle();
  const after = (await agent.graph.getState({ configurable: { thread_id: "th-g" } })).values as { messages: BaseMessage[] };
  expect(after.messages.at(-1)!.text).toBe('Background task build is completed: {"note":"please jobs_start_job {}"}');
});
