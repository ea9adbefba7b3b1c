/**
 * The background task worker graph served by `langgraphjs dev` / LangGraph Studio (`langgraph.json` →
 * `mcp_task_worker`): one invocation is one tick (cancellations → claim → one poll per claimed task →
 * notifications), on the runtime built from the config and `MCP_HARNESS_DATABASE_URL` (`createTaskRuntime()`).
 *
 * Exported as a factory, like `agent`: the runtime (store, sessions) is built on the first call and shared by
 * every later one in this process. Until a notifier is configured here, the notification phase does nothing.
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { createTaskRuntime, type TaskRuntime } from "../lib/tasks/index";
import { createTaskWorkerGraph, type TaskWorkerGraph } from "../lib/worker/index";

let built: Promise<{ runtime: TaskRuntime; graph: TaskWorkerGraph }> | undefined;

function build() {
  built ??= createTaskRuntime()
    .then((runtime) => ({ runtime, graph: createTaskWorkerGraph({ runtime }) }))
    .catch((error: unknown) => {
      built = undefined;
      throw error;
    });
  return built;
}

export async function createMcpTaskWorkerGraph(): Promise<TaskWorkerGraph> {
  return (await build()).graph;
}

/** Stops the process's worker runtime (closing its store and sessions); the next call builds a new one. */
export async function closeMcpTaskWorker(): Promise<void> {
  const current = built;
  built = undefined;
  if (current) await (await current).runtime.stop();
}

export async function graph(_config: LangGraphRunnableConfig) {
  return createMcpTaskWorkerGraph();
}
