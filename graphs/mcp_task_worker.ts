/**
 * The background task worker graph served by `langgraphjs dev` / LangGraph Studio (`langgraph.json` →
 * `mcp_task_worker`): one invocation is one tick (cancellations → claim → one poll per claimed task →
 * notifications). With `mcpTasks.enabled` it runs on the server's task runtime (`graphs/server-tasks.ts`), so a
 * tick from Studio or from a LangGraph Platform cron delivers task events as runs of `agent`, as the in-server
 * worker does. Otherwise it runs on a runtime of its own, which with tasks disabled has no store (none is created):
 * the graph still loads in Studio, and each run fails at once with `McpTasksDisabledError`, naming the setting.
 *
 * Exported as a factory, like `agent`: the graph is built on the first call and shared by every later one.
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { createTaskRuntime, type TaskRuntime } from "../lib/tasks/index";
import { createTaskWorkerGraph, type TaskWorkerGraph } from "../lib/worker/index";
import { getServerTasks } from "./server-tasks";

let built: Promise<{ graph: TaskWorkerGraph; ownRuntime: TaskRuntime | null }> | undefined;

function build() {
  built ??= (async () => {
    const tasks = await getServerTasks();
    if (tasks !== null) return { graph: createTaskWorkerGraph({ runtime: tasks.runtime }), ownRuntime: null };
    const runtime = await createTaskRuntime();
    return { graph: createTaskWorkerGraph({ runtime }), ownRuntime: runtime };
  })().catch((error: unknown) => {
    built = undefined;
    throw error;
  });
  return built;
}

export async function createMcpTaskWorkerGraph(): Promise<TaskWorkerGraph> {
  return (await build()).graph;
}

/** Stops a runtime this module opened for itself (the server's shared one is left running); the next call builds anew. */
export async function closeMcpTaskWorker(): Promise<void> {
  const current = built;
  built = undefined;
  const runtime = current ? (await current.catch(() => null))?.ownRuntime : null;
  await runtime?.stop();
}

export async function graph(_config: LangGraphRunnableConfig) {
  return createMcpTaskWorkerGraph();
}
