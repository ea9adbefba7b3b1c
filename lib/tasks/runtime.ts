/**
 * `createTaskRuntime` (SPEC §6, inventory §O 130–136): the store, the driver registry, the task tool caller and
 * the service, assembled from the config's startup-only `mcpTasks` settings and `MCP_HARNESS_DATABASE_URL`. The
 * runtime is also the toolkit's task hook: it enforces the startup rules on every loaded generation and wraps
 * task tools, and its own status/cancel calls run through that toolkit's sessions. With `mcpTasks.enabled` false
 * it has no store (none is opened, created or connected to) and no service: only the task hooks work.
 */
import {
  loadExtensionsConfig,
  McpTaskConfigurationError,
  type ExtensionsConfig,
  type McpServerConfig,
  type McpTasksSettings,
} from "../config";
import {
  checkedTaskServers,
  createMcpToolkit,
  enabledTaskServers,
  quotedNames,
  type McpToolkit,
  type McpToolkitOptions,
  type TaskToolsInput,
} from "../mcp";
import type { ToolkitTaskHooks } from "../mcp";
import { consoleLogger, type Logger } from "../shared/logger";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { toolkitTaskCaller, type TaskToolCaller } from "./caller";
import { ORDINARY_MCP_TASK_DRIVER, OrdinaryToolsDriver } from "./drivers/ordinary";
import { canonicalJson } from "../shared/canonical-json";
import { McpTaskDriverRegistry } from "./model";
import type { TaskNotifier } from "./notifier";
import { McpTaskService, type TickReport } from "./service";
import { openTaskStore, type TaskStore } from "./store";
import { SubmitSecretsMemory } from "./submit-secrets";
import { TaskToolWrapper } from "./task-tools";

/**
 * What needs the task store (the service, a tick, the worker, the background task tools) refuses with this while
 * `mcpTasks.enabled` is false: one line naming the setting.
 */
export class McpTasksDisabledError extends Error {
  constructor() {
    super("durable tasks are disabled in the config (mcpTasks.enabled is false)");
    this.name = "McpTasksDisabledError";
  }
}

/** Fields of a task server that stay hot-reloadable (presentation only). */
const PRESENTATION_FIELDS = ["description", "routing", "tools", "tool_name_prefix"] as const;

export interface TaskRuntimeOptions {
  /** The extensions config, as for `createMcpToolkit` (explicit path, else `MCP_HARNESS_CONFIG`, else the search). */
  configPath?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  logger?: Logger;
  /** `sqlite:<path>` or `postgres://…`; default `MCP_HARNESS_DATABASE_URL`, else `<data dir>/tasks.sqlite`. */
  databaseUrl?: string;
  /**
   * The data dir of that default file: this, else `toolkitOptions.dataDir`, else `MCP_HARNESS_DATA_DIR`, else
   * `./.mcp-harness`. Give the agent's toolkit the same `dataDir` to keep workspaces and tasks in one place.
   */
  dataDir?: string;
  /** PostgreSQL schema of the task table (a plain identifier; default `public`). */
  schema?: string;
  /** An opened store to use instead (the runtime does not close it; with tasks disabled it is not used). */
  store?: TaskStore;
  /** Where task events are delivered; without one the notification phase does nothing. */
  notifier?: TaskNotifier;
  /** Every timestamp of the service and the store it opens. */
  clock?: () => Date;
  leaseOwner?: string;
  /**
   * Options of the toolkit the runtime makes for its own calls when no toolkit attaches to it (a worker process
   * with no agent). In an agent process pass the runtime to `createMcpToolkit({ taskRuntime })` instead.
   */
  toolkitOptions?: Omit<McpToolkitOptions, "taskRuntime" | "configPath" | "env" | "cwd" | "logger">;
}

/** What of a task server is frozen at startup, as comparable text. */
function frozenServer(server: McpServerConfig): string {
  const copy: Record<string, unknown> = { ...server };
  for (const field of PRESENTATION_FIELDS) delete copy[field];
  return canonicalJson(copy);
}

function frozenTaskServers(config: ExtensionsConfig): Map<string, string> {
  return new Map(enabledTaskServers(config).map((name) => [name, frozenServer(config.mcpServers[name]!)]));
}

export class TaskRuntime implements ToolkitTaskHooks {
  readonly settings: McpTasksSettings;
  readonly drivers: McpTaskDriverRegistry;
  readonly #frozen: ReadonlyMap<string, string>;
  readonly #stdioServers: readonly string[];
  readonly #wrapper: TaskToolWrapper;
  readonly #options: TaskRuntimeOptions;
  readonly #ownsStore: boolean;
  /** Both null exactly when `mcpTasks.enabled` is false. */
  readonly #store: TaskStore | null;
  readonly #service: McpTaskService | null;
  #toolkit: McpToolkit | null = null;
  #ownsToolkit = false;
  /** The close of the runtime's own toolkit, replaced by an agent's: `stop()` waits for it. */
  #replacedClosing: Promise<void> | null = null;
  #stopped: Promise<void> | null = null;

  /** `store` is required with `mcpTasks.enabled` and ignored without it. */
  constructor(store: TaskStore | null, config: ExtensionsConfig, options: TaskRuntimeOptions & { ownsStore: boolean }) {
    this.#options = options;
    this.settings = config.mcpTasks;
    if (this.settings.enabled && store === null) throw new TypeError("a task runtime with mcpTasks.enabled needs a task store");
    this.#store = this.settings.enabled ? store : null;
    this.#ownsStore = this.#store !== null && options.ownsStore;
    this.#frozen = frozenTaskServers(config);
    this.#stdioServers = this.taskServers.filter((name) => config.mcpServers[name]!.type === "stdio");
    const logger = options.logger ?? consoleLogger;
    this.drivers = new McpTaskDriverRegistry();
    this.drivers.register(ORDINARY_MCP_TASK_DRIVER, new OrdinaryToolsDriver(this.caller()));
    this.#service =
      this.#store === null
        ? null
        : new McpTaskService({
            store: this.#store,
            drivers: this.drivers,
            settings: this.settings,
            notifier: options.notifier,
            clock: options.clock,
            leaseOwner: options.leaseOwner,
            logger,
          });
    // With tasks disabled no task server passes the startup rules, so no submit wrapper is ever made.
    this.#wrapper = new TaskToolWrapper({ submit: (...args) => this.service.submit(...args) }, logger);
  }

  /** The task store; throws `McpTasksDisabledError` while `mcpTasks.enabled` is false (no store is opened then). */
  get store(): TaskStore {
    if (this.#store === null) throw new McpTasksDisabledError();
    return this.#store;
  }

  /** The task service on `store`; throws `McpTasksDisabledError` while `mcpTasks.enabled` is false. */
  get service(): McpTaskService {
    if (this.#service === null) throw new McpTasksDisabledError();
    return this.#service;
  }

  /** `mcpTasks.enabled` at startup: without it the runtime has no store. */
  get enabled(): boolean {
    return this.settings.enabled;
  }

  /** `mcpTasks.enabled` at startup and not stopped: the gateway answers 503 otherwise. */
  get running(): boolean {
    return this.settings.enabled && this.#stopped === null;
  }

  /** Task servers of the startup config (enabled ones with `task_toolsets`), sorted. */
  get taskServers(): string[] {
    return [...this.#frozen.keys()];
  }

  /** The task servers among `taskServers` that run over stdio: their polls run in children of this process. */
  get stdioTaskServers(): readonly string[] {
    return this.#stdioServers;
  }

  /** The toolkit the runtime's own calls go through: the one that attached, else one of its own. */
  get toolkit(): McpToolkit {
    if (this.#toolkit === null) {
      const o = this.#options;
      this.#ownsToolkit = true;
      createMcpToolkit({ ...o.toolkitOptions, configPath: o.configPath, env: o.env, cwd: o.cwd, logger: o.logger, taskRuntime: this });
    }
    return this.#toolkit!;
  }

  attach(toolkit: McpToolkit): void {
    const previous = this.#toolkit;
    if (previous !== null && previous !== toolkit) {
      if (!this.#ownsToolkit) throw new Error("this task runtime already serves another toolkit; create one runtime per toolkit");
      // The one it made for its own calls before an agent's toolkit attached (a tick ran first): the agent's takes
      // over. The old one closes once the operations already running on it have settled: a poll cut off by the close
      // would count as a failed poll (stop() still aborts them).
      this.#ownsToolkit = false;
      this.#replacedClosing = (this.#service?.settled() ?? Promise.resolve())
        .then(() => previous.close())
        .catch(() => undefined);
    }
    this.#toolkit = toolkit;
  }

  prepareTools(input: TaskToolsInput): DynamicStructuredTool[] {
    const now = frozenTaskServers(input.config);
    const changed = [...new Set([...now.keys(), ...this.#frozen.keys()])].filter((name) => now.get(name) !== this.#frozen.get(name)).sort();
    if (changed.length > 0) {
      throw new McpTaskConfigurationError(
        `MCP task-enabled server configuration changed since startup (${quotedNames(changed)}); restart the process to use durable task tools`,
        changed,
      );
    }
    return this.#wrapper.prepare(input);
  }

  /** One pass of the service: cancellations, claim and poll, notifications. */
  runOnce(now?: Date): Promise<TickReport> {
    // The service's own promise when there is one; a rejection, never a throw, without (tasks disabled).
    return this.#service?.runOnce(now) ?? Promise.reject(new McpTasksDisabledError());
  }

  /** Stops the service (in-flight remote calls are aborted), then closes what the runtime opened. Idempotent. */
  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      await this.#service?.stop();
      if (this.#ownsToolkit) await this.#toolkit?.close();
      await this.#replacedClosing;
      if (this.#ownsStore) await this.#store?.close();
    })();
    return this.#stopped;
  }

  private caller(): TaskToolCaller {
    const memory = new SubmitSecretsMemory();
    return { callTool: (call) => toolkitTaskCaller(this.toolkit, memory).callTool(call) };
  }
}

/**
 * Reads the config, checks the startup rules, opens the store (running its migrations) and builds the service.
 * Throws an `McpTaskConfigurationError` when task toolsets are configured while `mcpTasks.enabled` is false.
 * With `mcpTasks.enabled` false nothing is opened: the runtime has no store (see `McpTasksDisabledError`).
 */
export async function createTaskRuntime(options: TaskRuntimeOptions = {}): Promise<TaskRuntime> {
  const logger = options.logger ?? consoleLogger;
  const { config } = await loadExtensionsConfig({ configPath: options.configPath, env: options.env, cwd: options.cwd, logger });
  return createTaskRuntimeFromConfig(config, options);
}

/**
 * `createTaskRuntime` on a config already read with the same `configPath`, `env` and `cwd` (the CLI worker reads
 * it first: its notifier is needed only with `mcpTasks.enabled`).
 */
export async function createTaskRuntimeFromConfig(config: ExtensionsConfig, options: TaskRuntimeOptions = {}): Promise<TaskRuntime> {
  const logger = options.logger ?? consoleLogger;
  const taskServers = checkedTaskServers(config);
  for (const name of taskServers) {
    const server = config.mcpServers[name]!;
    const declared = [server.user_auth ? "user_auth" : null, server.headers_from_context ? "headers_from_context" : null].filter(Boolean);
    if (declared.length > 0 && server.type !== "stdio") {
      logger.warn(
        `MCP task server '${name}' declares ${declared.join(" and ")}: its submit calls carry them, but status and cancel ` +
          "polls run outside any agent run with server-level credentials only (static headers and OAuth)",
      );
    }
  }
  if (!config.mcpTasks.enabled) return new TaskRuntime(null, config, { ...options, ownsStore: false });
  const store =
    options.store ??
    (await openTaskStore({
      url: options.databaseUrl,
      env: options.env,
      cwd: options.cwd,
      dataDir: options.dataDir ?? options.toolkitOptions?.dataDir,
      clock: options.clock,
      schema: options.schema,
    }));
  return new TaskRuntime(store, config, { ...options, ownsStore: options.store === undefined });
}
