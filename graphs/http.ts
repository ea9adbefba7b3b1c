/**
 * The HTTP app of `langgraph.json` (`http.app`): the gateway of SPEC §8 for the process-wide toolkit the
 * graphs use (`getCachedMcpTools`), with the task routes on the server's task runtime. Its config endpoints are
 * on only when `MCP_HARNESS_ADMIN_TOKEN` is set: then `Authorization: Bearer <token>` is the admin.
 *
 * The LangGraph API server loads this module once it has bound its routes, which is when the in-server task
 * worker starts (`graphs/server-tasks.ts`; `MCP_HARNESS_SERVER_WORKER=off` keeps it out).
 */
import { adminTokenAuthorize, createGatewayApp, resetMcpToolsCache, type GatewayTaskRuntime } from "../lib";
import type { TaskRuntime } from "../lib/tasks/index";
import { getServerTasks, startServerTaskWorker } from "./server-tasks";

/** The task routes answer 503 until the runtime has started (and when tasks are off). */
class ServerTaskRoutesRuntime implements GatewayTaskRuntime {
  #runtime: TaskRuntime | null = null;

  constructor() {
    getServerTasks().then(
      (tasks) => (this.#runtime = tasks?.runtime ?? null),
      () => undefined, // the agent's first run reports a failed start
    );
  }

  get running(): boolean {
    return this.#runtime?.running ?? false;
  }

  get settings(): GatewayTaskRuntime["settings"] {
    return this.#started().settings;
  }

  get service(): GatewayTaskRuntime["service"] {
    return this.#started().service;
  }

  #started(): TaskRuntime {
    if (!this.#runtime) throw new Error("the task runtime has not started");
    return this.#runtime;
  }
}

export const app = createGatewayApp({
  toolkit: { reset: resetMcpToolsCache },
  authorize: adminTokenAuthorize(),
  taskRuntime: new ServerTaskRoutesRuntime(),
});

void startServerTaskWorker();
