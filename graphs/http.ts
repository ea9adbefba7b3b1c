/**
 * The HTTP app of `langgraph.json` (`http.app`): the gateway of SPEC §8 for the process-wide toolkit the
 * graphs use (`getCachedMcpTools`), with the task routes on the server's task runtime. Its config endpoints are
 * on only when `MCP_HARNESS_ADMIN_TOKEN` is set: then `Authorization: Bearer <token>` is the admin.
 *
 * The LangGraph API server loads this module once it has bound its routes, which is when the in-server task
 * worker starts (`graphs/server-tasks.ts`; `MCP_HARNESS_SERVER_WORKER=off` keeps it out).
 */
import { adminTokenAuthorize, createGatewayApp, type GatewayTaskRuntime } from "../lib";
import { langGraphServerLoopback, type TaskRuntime } from "../lib/tasks/index";
import { getServerTasks, resetServerTools, serverTasksConfigRead, serverTasksDisabled, startServerTaskWorker } from "./server-tasks";

/**
 * The task routes on the server's task runtime: 503 until it has started (and when tasks are off). Inside the
 * LangGraph server it starts with the server; imported anywhere else, on the first request.
 */
class ServerTaskRoutesRuntime implements GatewayTaskRuntime {
  #runtime: TaskRuntime | null = null;
  #loading = false;

  constructor() {
    if (langGraphServerLoopback()) this.#load();
  }

  #load(): void {
    this.#loading = true;
    getServerTasks().then(
      (tasks) => {
        this.#runtime = tasks?.runtime ?? null;
        // Tasks off, or a config that could not be read yet: the next request asks again (off is remembered there).
        if (tasks === null) this.#loading = false;
      },
      () => (this.#loading = false), // the agent's first run reports a failed start; the next request retries
    );
  }

  /** Starts the load when none is under way and waits for its config read: the first request already knows `enabled`. */
  async ready(): Promise<void> {
    if (!this.#loading) this.#load();
    await serverTasksConfigRead();
  }

  get running(): boolean {
    if (!this.#loading) this.#load();
    return this.#runtime?.running ?? false;
  }

  /** `false` once the config was read with tasks disabled: the 503 then says so. */
  get enabled(): boolean {
    return !serverTasksDisabled();
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
  toolkit: { reset: resetServerTools },
  authorize: adminTokenAuthorize(),
  taskRuntime: new ServerTaskRoutesRuntime(),
});

void startServerTaskWorker();
