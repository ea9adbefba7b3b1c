/**
 * The background task worker graph served by `langgraphjs dev` / LangGraph Studio (`langgraph.json` →
 * `mcp_task_worker`): one invocation is one tick (cancellations → claim → one poll per claimed task →
 * notifications), on the runtime built from the config and `MCP_HARNESS_DATABASE_URL` (`createTaskRuntime()`).
 *
 * Exported as a factory, like `agent`: the runtime (store, sessions) is built on the first call and shared by
 * every later one in this process. Until a notifier is configured here, the notification phase does nothing.
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { createTaskRuntime } from "../lib/tasks/index";
import { createTaskWorkerGraph, type TaskWorkerGraph } from "../lib/worker/index";

let built: Promise<TaskWorkerGraph> | undefined;

export function createMcpTaskWorkerGraph(): Promise<TaskWorkerGraph> {
  built ??= createTaskRuntime()
    .then((runtime) => createTaskWorkerGraph({ runtime }))
    .catch((error: unknown) => {
      built = undefined;
      throw error;
    });
  return built;
}

export async function graph(_config: LangGraphRunnableConfig) {
  return createMcpTaskWorkerGraph();
}
