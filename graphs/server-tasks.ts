/**
 * Durable tasks inside the LangGraph API server (`npm start`, `langgraphjs dev`, a LangGraph Platform deployment
 * of this repo): one task runtime per process, shared by the `agent` graph (submit wrappers, task tools), the
 * `mcp_task_worker` graph and the gateway's task routes; its notifier delivers task events as runs of `agent`
 * through the server's own API; and the in-server worker that ticks it (started by `graphs/http.ts` once the
 * server has bound its routes).
 */
import { loadExtensionsConfig } from "../lib/config/index";
import { consoleLogger, createMcpToolkit, resetMcpToolsCache, silentLogger, type McpToolkit } from "../lib/index";
import {
  createLangGraphServerNotifier,
  createTaskRuntimeFromConfig,
  LANGGRAPH_API_URL_ENV_VAR,
  langGraphApiKeyFromEnv,
  langGraphServerLoopback,
  LOOPBACK_API_URL,
  type NotificationRun,
  type NotifierCallOptions,
  type RunLookupOptions,
  type TaskDelivery,
  type TaskNotifier,
  type TaskRuntime,
} from "../lib/tasks/index";
import { startTaskWorker, type TaskWorker } from "../lib/worker/index";

/** `off` (or `0`, `false`, `no`) keeps the worker out of the server: run `mcp-harness worker` processes or a cron instead. */
export const SERVER_WORKER_ENV_VAR = "MCP_HARNESS_SERVER_WORKER";
/** The assistant (graph id) whose runs carry task notifications. */
export const NOTIFICATION_ASSISTANT = "agent";

export interface ServerTasks {
  runtime: TaskRuntime;
  /** The toolkit whose task servers' submit tools are wrapped by `runtime`. */
  toolkit: McpToolkit;
}

/** A URL's origin for a log line: never its path, query or user info. */
export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return "not a URL";
  }
}

interface ServerApiTarget {
  apiUrl: string;
  fetch?: ReturnType<typeof langGraphServerLoopback>;
  apiKey?: string;
  description: string;
}

/**
 * Where notification runs are created: `MCP_HARNESS_LANGGRAPH_API_URL`, else the server's loopback, else
 * `127.0.0.1:$PORT`. The API key variables apply to each: the loopback passes through the server's own auth
 * middleware, so a server with custom auth needs a key its handler accepts for the worker.
 */
export function serverApiTarget(env: NodeJS.ProcessEnv = process.env): ServerApiTarget {
  const apiKey = langGraphApiKeyFromEnv(env);
  const keyed = apiKey ? ", with an API key" : "";
  const explicit = env[LANGGRAPH_API_URL_ENV_VAR]?.trim();
  if (explicit) return { apiUrl: explicit, apiKey, description: `${LANGGRAPH_API_URL_ENV_VAR} (${originOf(explicit)})${keyed}` };
  const loopback = langGraphServerLoopback();
  if (loopback) return { apiUrl: LOOPBACK_API_URL, fetch: loopback, apiKey, description: `this server (in-process)${keyed}` };
  const url = `http://127.0.0.1:${env.PORT?.trim() || "2024"}`;
  return { apiUrl: url, apiKey, description: `${url}${keyed}` };
}

/**
 * The server notifier, its target chosen at the first delivery: the graphs load before the server binds its
 * loopback, and the runtime (with its notifier) may be built by the first of them.
 */
class ServerNotifier implements TaskNotifier {
  #inner: TaskNotifier | undefined;

  #notifier(): TaskNotifier {
    if (!this.#inner) {
      const { apiUrl, fetch, apiKey } = serverApiTarget();
      this.#inner = createLangGraphServerNotifier({ apiUrl, fetch, apiKey, assistantId: NOTIFICATION_ASSISTANT });
    }
    return this.#inner;
  }

  deliver(delivery: TaskDelivery, idempotencyKey: string, options?: NotifierCallOptions): Promise<{ runId: string }> {
    return this.#notifier().deliver(delivery, idempotencyKey, options);
  }

  getRun(runId: string, userId: string, options?: RunLookupOptions): Promise<NotificationRun | null> {
    return this.#notifier().getRun(runId, userId, options);
  }
}

interface ServerTaskState {
  tasks?: Promise<ServerTasks | null>;
  worker?: Promise<TaskWorker | null>;
  /** The config read said `mcpTasks.enabled` false: `tasks` is null for good (not a config to read again). */
  disabled?: boolean;
  /** The config read of the latest `tasks` start; settled once `disabled` is known for it. */
  configRead?: Promise<unknown>;
}

// One per process even if the server's loader evaluates this module twice (once per importing graph file).
const STATE_KEY = Symbol.for("langgraph-mcp-harness:server-tasks");
function state(): ServerTaskState {
  const holder = globalThis as Record<symbol, ServerTaskState | undefined>;
  return (holder[STATE_KEY] ??= {});
}

/**
 * The process's task runtime and its toolkit when the config says `mcpTasks.enabled` (startup-only, so read
 * once), else null. A failed start is retried on the next call. Once the runtime starts inside the LangGraph
 * server, so does the worker that ticks it: a runtime the agent submits to never goes without one because the
 * config could not be read when the server started.
 */
export function getServerTasks(): Promise<ServerTasks | null> {
  const s = state();
  s.tasks ??= (async (): Promise<ServerTasks | null> => {
    const read = loadExtensionsConfig({ logger: silentLogger }).then(
      ({ config }) => {
        if (!config.mcpTasks.enabled) s.disabled = true;
        return config;
      },
      () => null, // an unreadable config is the toolkit's to report; look again on the next call
    );
    s.configRead = read;
    const config = await read;
    if (config === null) s.tasks = undefined;
    if (!config?.mcpTasks.enabled) return null;
    // On the config read above: one edited in between cannot make the routes say "not running" where it is disabled.
    const runtime = await createTaskRuntimeFromConfig(config, { notifier: new ServerNotifier() });
    return { runtime, toolkit: createMcpToolkit({ taskRuntime: runtime }) };
  })().then(
    (tasks) => {
      if (tasks !== null) void startServerTaskWorker();
      return tasks;
    },
    (error: unknown) => {
      s.tasks = undefined;
      throw error;
    },
  );
  return s.tasks;
}

/** Whether `getServerTasks()` has found `mcpTasks.enabled` false in the config (so it answers null for good). */
export function serverTasksDisabled(): boolean {
  return state().disabled === true;
}

/**
 * Settles once the config read of the latest `getServerTasks()` start has settled (`serverTasksDisabled()` then
 * answers for it), without waiting for the runtime itself to start.
 */
export async function serverTasksConfigRead(): Promise<void> {
  await state().configRead;
}

/**
 * Resets the tools the graphs use: the process-wide toolkit, and the task runtime's toolkit when it has started
 * (with `mcpTasks.enabled` the agent's tools come from that one). A runtime not started yet is not started here.
 */
export async function resetServerTools(): Promise<void> {
  await resetMcpToolsCache();
  const tasks = await state().tasks?.catch(() => null);
  await tasks?.toolkit.reset();
}

/** Whether `MCP_HARNESS_SERVER_WORKER` keeps the worker out of the server. */
export function serverWorkerDisabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return ["off", "0", "false", "no"].includes(env[SERVER_WORKER_ENV_VAR]?.trim().toLowerCase() ?? "");
}

/**
 * Starts the in-server worker once per process: only inside a LangGraph API server (its loopback is bound), with
 * `mcpTasks.enabled`, and unless `MCP_HARNESS_SERVER_WORKER=off`. Ticks every `poll_interval_seconds`. Resolves
 * to the worker, or null when none runs; never rejects (a failed start is logged). Only a started worker is kept:
 * after a null, the next call (and the runtime's own start) tries again.
 */
export function startServerTaskWorker(env: NodeJS.ProcessEnv = process.env): Promise<TaskWorker | null> {
  const s = state();
  const starting = (s.worker ??= (async () => {
    if (!langGraphServerLoopback() || serverWorkerDisabled(env)) return null;
    const tasks = await getServerTasks();
    if (tasks === null) return null;
    const { runtime } = tasks;
    const seconds = runtime.settings.poll_interval_seconds;
    const worker = startTaskWorker({ runtime, intervalMs: seconds * 1000 });
    consoleLogger.info(
      `MCP task worker started in the LangGraph server: ticking every ${seconds}s as ${runtime.service.leaseOwner} on ` +
        `${runtime.store.dialect}; notifications to ${serverApiTarget(env).description}`,
    );
    return worker;
  })()
    .catch((error: unknown) => {
      consoleLogger.error(`MCP task worker did not start in the LangGraph server: ${error instanceof Error ? error.message : String(error)}`);
      return null;
    })
    .then((worker) => {
      if (worker === null && s.worker === starting) s.worker = undefined;
      return worker;
    }));
  return starting;
}

/** Stops the in-server worker (draining its tick), then the runtime and its toolkit; the next call starts anew. */
export async function closeServerTasks(): Promise<void> {
  const s = state();
  const { worker, tasks } = s;
  s.worker = undefined;
  s.tasks = undefined;
  s.disabled = undefined;
  s.configRead = undefined;
  await (await worker)?.stop();
  const started = await tasks?.catch(() => null);
  if (!started) return;
  await started.runtime.stop();
  await started.toolkit.close();
}
