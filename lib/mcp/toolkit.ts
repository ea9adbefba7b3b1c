import { existsSync } from "node:fs";
import * as nodePath from "node:path";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { DynamicStructuredTool, ToolRuntime } from "@langchain/core/tools";
import {
  ConfigFileNotFoundError,
  getConfigSignature,
  launchCredentials,
  loadExtensionsConfig,
  resolveExtensionsConfigPath,
  sameConnection,
  urlCredentials,
  signaturesEqual,
  McpTaskConfigurationError,
  type ConfigSignature,
  type ExtensionsConfig,
  type McpServerConfig,
} from "../config";
import {
  credentialLayers,
  interceptorSpecs,
  loadCustomInterceptors,
  OAuthTokenManager,
  ServerHeaders,
  StdioLayerWarnings,
  type OAuthTokenManagerOptions,
} from "../credentials";
import { EMPTY_HEADERS } from "../shared/headers";
import { headerSecrets } from "../shared/header-secrets";
import { MAX_TIMER_SECONDS } from "../shared/timers";
import { withDeadline } from "../shared/deadline";
import { consoleLogger, type Logger } from "../shared/logger";
import { runDirectCall, runToolCall, toolErrorOutput, unloadableText, type CallPathOptions } from "./call";
import { discoverAll, type DiscoveryTarget } from "./discovery";
import type { McpCallOutcome, McpToolInterceptor } from "../shared/interceptor";
import type { McpToolRecord } from "./metadata";
import { assignVisibleNames } from "./names";
import { resolveDataDir, SessionPool, sessionScope, type McpSession, type SessionScope } from "../sessions";
import { onTemporaryThread } from "../shared/identity";
import { realFolderPath } from "../shared/data-dir";
import { resolveToolRouting } from "./routing";
import { createHarnessTool, type HarnessToolSpec } from "./tool";
import { OutputSchemas } from "./output-schemas";
import { checkedTaskServers, quotedNames, type DiscoveredTool, type ToolkitTaskHooks } from "./task-hooks";
import { McpToolCallError, ownText, ToolkitClosedError } from "../shared/errors";
import { resolveToolRuntime } from "./runtime";

export interface McpToolkitOptions {
  /** Explicit config file; otherwise `MCP_HARNESS_CONFIG`, then the search of SPEC §2.3. */
  configPath?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  logger?: Logger;
  /** Programmatic interceptors, outermost first; they run inside the credential layers and `mcpInterceptors`. */
  interceptors?: readonly McpToolInterceptor[];
  /** Token endpoint client settings (clock, fetch, timeout), mostly for tests. */
  oauth?: OAuthTokenManagerOptions;
  /**
   * Seconds after which an unused HTTP/SSE session closes (default 300; `null`: never). Every distinct set
   * of credentials has its own session, so without a bound they would pile up with users and tokens.
   * At most `MAX_TIMER_SECONDS` (about 24.8 days, the longest timer); a larger value throws a RangeError.
   */
  httpSessionIdleSeconds?: number | null;
  /**
   * Live HTTP/SSE sessions per server (a positive integer, default 64). A new set of headers that would
   * exceed it closes the server's least recently used idle session (upstream DELETE and GET stream too).
   * A session is never closed under a running call: while every session is busy the server may go over the
   * cap, and the surplus is closed, least recently used first, as calls finish.
   */
  maxHttpSessionsPerServer?: number;
  /**
   * Characters of a result that reach a ToolMessage (a positive integer, default 262144 = 256 Ki). Longer
   * content becomes a preview ending in a note that says how much was cut; the full result is not kept.
   * `structuredContent` / `_meta` stay in the artifact only when their JSON fits the same bound.
   */
  maxResultChars?: number;
  /**
   * Bytes of one message read from a stdio server (a positive integer, default 64 MiB; the SDK's own
   * limit of 10 MiB closed the session). A longer message is discarded: its call fails, the session stays.
   */
  stdioMaxMessageBytes?: number;
  /**
   * Live stdio children across all servers (a positive integer, default 256). Each (server, user, thread) has
   * its own child; a new scope beyond the bound closes the least recently used child (after its running calls).
   */
  maxStdioSessions?: number;
  /**
   * Seconds after which an unused stdio child of a LangGraph server's stateless run (a temporary thread, which the
   * server deletes once the run ends) is closed (default 300; `null`: only `maxStdioSessions`, a reload or `close()`
   * end it). Never during a call of its thread (on any child), nor while it holds a pending durable task; a child a run
   * with a kept thread used is an ordinary one. At most `MAX_TIMER_SECONDS`; a larger value throws a RangeError.
   */
  temporaryStdioIdleSeconds?: number | null;
  /**
   * Base folder of the thread workspaces (default `MCP_HARNESS_DATA_DIR`, else `./.mcp-harness`, from `cwd`). A
   * stdio child runs in `<dataDir>/threads/<thread>/user-data/workspace` with TMPDIR/TMP/TEMP in its `.mcp/tmp`
   * (mode 0700), unless the server's config sets `cwd` or those variables.
   */
  dataDir?: string;
  /**
   * Seconds one `mcpInterceptors` entry may take to load, its module's import and its builder together (default 30,
   * at most `MAX_TIMER_SECONDS`). One that takes longer is skipped with a warning, like one that fails.
   */
  interceptorLoadSeconds?: number;
  /**
   * The durable task runtime (`createTaskRuntime`): required when an enabled server declares `task_toolsets`.
   * Its submit tools become wrappers that return a local task id at once, its status/cancel tools are hidden,
   * and the runtime's own calls (status polls, cancels) run through this toolkit's sessions.
   */
  taskRuntime?: ToolkitTaskHooks;
  /**
   * The clock the sweep of empty thread folders left by a killed host reads (a folder must be unchanged for some
   * minutes to go), and the heartbeat of live stdio sessions' thread folders sets their times from; mostly for tests,
   * as the task runtime's `clock`.
   */
  clock?: () => Date;
}

/**
 * Throws a RangeError naming the option whose value is out of range, or a TypeError naming one of the wrong kind (a
 * JavaScript caller's), the value itself not echoed.
 */
function checkToolkitOptions(options: McpToolkitOptions): void {
  if (options.dataDir !== undefined && typeof options.dataDir !== "string") {
    throw new TypeError("McpToolkitOptions.dataDir must be a string");
  }
  if (options.clock !== undefined && typeof options.clock !== "function") {
    throw new TypeError("McpToolkitOptions.clock must be a function returning a Date");
  }
  for (const name of ["httpSessionIdleSeconds", "temporaryStdioIdleSeconds"] as const) {
    const idle = options[name];
    if (idle != null && !(typeof idle === "number" && idle > 0 && idle <= MAX_TIMER_SECONDS)) {
      throw new RangeError(
        `McpToolkitOptions.${name} must be a number of seconds above 0 and at most ${MAX_TIMER_SECONDS} (about 24.8 days), or null to never close idle sessions`,
      );
    }
  }
  const load = options.interceptorLoadSeconds;
  if (load !== undefined && !(typeof load === "number" && load > 0 && load <= MAX_TIMER_SECONDS)) {
    throw new RangeError(`McpToolkitOptions.interceptorLoadSeconds must be a number of seconds above 0 and at most ${MAX_TIMER_SECONDS}`);
  }
  for (const name of ["maxHttpSessionsPerServer", "maxResultChars", "stdioMaxMessageBytes", "maxStdioSessions"] as const) {
    const value = options[name];
    if (value !== undefined && !(Number.isSafeInteger(value) && value > 0)) {
      throw new RangeError(`McpToolkitOptions.${name} must be a positive integer`);
    }
  }
}

/** A call made outside a tool node, e.g. by the durable-task service. */
export interface McpDirectToolCall {
  server: string;
  /** The raw MCP tool name. */
  tool: string;
  args: Record<string, unknown>;
  /** The run's ToolRuntime when the call belongs to an agent run (a durable-task submit). */
  runtime?: ToolRuntime;
  /**
   * `true` (default): every credential layer, as for an agent's tool call. `false`: server-level
   * credentials only (static headers + OAuth), for calls that run outside any agent run (task status/cancel).
   */
  requestScopedHeaders?: boolean;
  signal?: AbortSignal;
  /**
   * Top-level `structuredContent` keys the caller reads as protocol (a task's id and status): a stdio result's paths
   * are translated everywhere else, these are left as the server sent them.
   */
  protocolFields?: readonly string[];
  /**
   * The stdio session to use (a durable task's user and thread); default: the runtime's scope. With `runtime` the call
   * is that run's (a stateless run's child stays temporary); without, it runs outside any run (a status or cancel
   * call) and leaves a stateless run's child as temporary as it was.
   */
  scope?: { userId: string; threadId: string };
  /** More values to scrub from the answer: secrets an earlier call sent that this one does not carry (a task's submit). */
  rememberedSecrets?: readonly string[];
  /** Told every secret the call carried (not `rememberedSecrets`), once it is over (also when it failed). */
  onCarriedSecrets?: (values: readonly string[]) => void;
  /**
   * When given, the outcome comes back as the chain produced it, not scrubbed, and this is handed every secret known
   * for the call first: for callers that must read protocol fields exactly (a task's id, its status) and scrub what
   * they keep or show themselves (`Redactor.of(secrets)`).
   */
  onUnscrubbed?: (secrets: readonly string[]) => void;
  /** Told the session the call is sent on (a durable task's calls tell its stdio child which tasks it holds). */
  onSession?: (session: McpSession) => boolean | void;
}

/** An enabled server of a generation and how its calls run: for agent calls and for server-level calls. */
interface ServerEntry {
  readonly config: McpServerConfig;
  readonly requestScoped: CallPathOptions;
  readonly serverLevel: CallPathOptions;
  /** How discovery connects (static headers + OAuth) and the server's own secrets, scrubbed from what it sends back. */
  readonly target: DiscoveryTarget;
}

/** The `mcpInterceptors` loaded at startup; they are frozen for the toolkit's life (SPEC §2.4). */
interface CustomInterceptors {
  readonly specs: readonly string[];
  /** The folder relative module names resolved from. */
  readonly dir: string | null;
  readonly interceptors: readonly McpToolInterceptor[];
}

interface ConfigState {
  path: string | null;
  signature: ConfigSignature | null;
}

interface Generation {
  readonly token: number;
  readonly path: string | null;
  readonly signature: ConfigSignature | null;
  readonly config: ExtensionsConfig;
  readonly servers: ReadonlyMap<string, ServerEntry>;
  /** Each discovered server's output schemas, by server name. */
  readonly outputs: ReadonlyMap<string, OutputSchemas>;
  readonly tools: DynamicStructuredTool[];
  readonly pool: SessionPool;
  readonly custom: CustomInterceptors;
  /** Servers that contributed no tools, with the reason (also logged). */
  readonly failures: ReadonlyMap<string, string>;
  /**
   * Why the task startup rules refused this generation's tools: `getTools()` throws it (and loads again on its next
   * call), while direct calls, a durable task's polls, still run on its sessions, except to the servers it blocks.
   */
  readonly toolsError?: McpTaskConfigurationError;
}

const MAX_LOAD_ATTEMPTS = 5;
/** How long `close()` lets a load still discovering end on its own before it closes that load's sessions. */
export const LOAD_CLOSE_GRACE_MS = 2_000;
const frozenHeaders = new WeakMap<McpServerConfig, Readonly<Record<string, string>>>();

/** The headers every call and the discovery of a server start from; one frozen object per server config. */
function baseHeaders(server: McpServerConfig): Readonly<Record<string, string>> {
  if (server.type === "stdio") return EMPTY_HEADERS;
  let headers = frozenHeaders.get(server);
  if (!headers) {
    headers = Object.freeze({ ...server.headers });
    frozenHeaders.set(server, headers);
  }
  return headers;
}

/**
 * A server's own secrets: values that came from `$VAR` anywhere in its config, static header values, credentials
 * written into a stdio launch (`GITHUB_TOKEN` in `env`, `--api-key` in `args`) or into a URL (`?api_key=`, a
 * password in `user:password@`), and the OAuth client credentials.
 * Per-call secrets (tokens, user credentials, `context.secrets`) are added per call.
 */
function configuredSecrets(server: McpServerConfig, envSecrets: readonly string[]): readonly string[] {
  return Object.freeze([
    ...envSecrets,
    ...headerSecrets(server.headers),
    ...(server.type === "stdio" ? launchCredentials(server.env, server.args) : urlCredentials(server.url)),
    ...[server.oauth?.client_secret, server.oauth?.refresh_token].filter((v): v is string => typeof v === "string" && v !== ""),
  ]);
}

/**
 * The `user_auth` credential the config maps `userId` to. A server-level call in a user's scope (a durable task's
 * status or cancel) does not carry it, but that user's submit did and the server may echo it: scrubbed from the answer
 * also in a process that did not take the submit (a worker, or one restarted since), which knows it from the config.
 */
function taskUserCredentials(server: McpServerConfig, userId: string | undefined): readonly string[] {
  const auth = server.user_auth;
  if (!auth || userId === undefined || !Object.hasOwn(auth.users, userId)) return [];
  const value = auth.users[userId];
  return typeof value === "string" && value !== "" ? headerSecrets({ [auth.header]: value }) : [];
}

/**
 * The stdio session of a direct call naming its scope (a durable task's): a submit, made by a run, is that run's (a
 * stateless run's is temporary); a call outside any run (a status or cancel call) leaves the child as the runs that
 * used it made it.
 */
function directCallScope(scope: { userId: string; threadId: string }, runtime: ToolRuntime | undefined): SessionScope {
  if (runtime !== undefined) return sessionScope(scope.userId, scope.threadId, onTemporaryThread(runtime));
  return { ...sessionScope(scope.userId, scope.threadId), background: true };
}

/** How discovery reaches one server, for the toolkit and for `mcp-harness check` alike. */
export function discoveryTarget(
  serverName: string,
  server: McpServerConfig,
  headers: ServerHeaders,
  envSecrets: readonly string[],
): DiscoveryTarget {
  const base = baseHeaders(server);
  return {
    serverName,
    server,
    headers: (signal) => headers.resolve(base, signal),
    secrets: configuredSecrets(server, envSecrets),
    rejected: (sent) => headers.rejected(sent),
  };
}

/** The refusal that keeps every call from `server` in `generation`: its task config changed since startup. */
function blockedBy(generation: Generation, server: string): McpTaskConfigurationError | undefined {
  return generation.toolsError?.blockedServers.includes(server) ? generation.toolsError : undefined;
}

export { ToolkitClosedError };

/**
 * Owns one config path, the tool cache and the session pool of the current generation.
 * `getTools()` checks the config's content signature on every call, loads lazily, shares one load
 * between concurrent callers, and discards a load whose config or generation changed underneath it.
 */
export class McpToolkit {
  private readonly logger: Logger;
  private readonly interceptors: readonly McpToolInterceptor[];
  private readonly oauth: OAuthTokenManager;
  private dataDir: string;
  /** Whether `dataDir` existed when resolved; until then a new pool's resolves it again (it may be made as a link). */
  private dataDirSettled: boolean;
  private readonly stdioWarnings = new StdioLayerWarnings();
  private custom: CustomInterceptors | null = null;
  private current: Generation | null = null;
  /** Retired pools whose sessions still run calls: `close()` closes them too. */
  private readonly retiredPools = new Set<SessionPool>();
  private loading: Promise<Generation> | null = null;
  /** Pools of loads still discovering their tools: `close()` closes them once `LOAD_CLOSE_GRACE_MS` passed. */
  private readonly loadingPools = new Set<SessionPool>();
  private token = 0;
  private closed = false;
  /** A generation whose tools were refused, whose pool the next load of the same config takes over. */
  private kept: Generation | null = null;
  /** The one close: a second `close()` resolves with the first, once every child is gone, not at once. */
  private closing: Promise<void> | null = null;

  constructor(private readonly options: McpToolkitOptions = {}) {
    checkToolkitOptions(options);
    this.logger = options.logger ?? consoleLogger;
    this.interceptors = [...(options.interceptors ?? [])];
    this.oauth = new OAuthTokenManager(options.oauth);
    // Resolved once for the toolkit's life (now, when it exists): a reload's pool resolving a link pointed elsewhere
    // meanwhile would move every thread's workspace away from its files.
    this.dataDir = resolveDataDir({ dataDir: options.dataDir, env: options.env, cwd: options.cwd });
    this.dataDirSettled = false;
    this.settledDataDir();
    options.taskRuntime?.attach(this);
  }

  async getTools(): Promise<DynamicStructuredTool[]> {
    if (this.closed) throw new ToolkitClosedError();
    const current = this.current;
    if (current) {
      const stale = await this.isStale(current);
      if (!current.toolsError && !stale) return current.tools;
      // A generation whose tools were refused is tried again on each call, as a failed load always was. With its file
      // unchanged, on the same sessions: the children threads' calls and other task servers' polls run in are kept.
      if (this.current === current) {
        if (stale) this.invalidate();
        else this.retryKeepingSessions(current);
      }
    }
    const generation = await this.ensureLoaded();
    if (generation.toolsError) throw generation.toolsError;
    return generation.tools;
  }

  /** Servers of the current generation that contributed no tools, with the logged reason. */
  get discoveryFailures(): ReadonlyMap<string, string> {
    return this.current?.failures ?? new Map();
  }

  /** Drops the cached tools (retiring their sessions first); the next use reloads. */
  async reset(): Promise<void> {
    this.invalidate();
  }

  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private async closeOnce(): Promise<void> {
    this.closed = true;
    const current = this.current;
    this.token += 1;
    this.current = null;
    const kept = this.kept;
    this.kept = null;
    const pending = this.loading;
    const retired = [...this.retiredPools];
    this.retiredPools.clear();
    await Promise.all([...(current ? [current.pool] : []), ...(kept ? [kept.pool] : []), ...retired].map((pool) => pool.close()));
    if (!pending) return;
    // A load still discovering closes its sessions when it sees `closed` (loadConsistent), so an HTTP server's session
    // is ended (DELETE) once its id is known. A server that does not answer within the grace has the load's pool
    // closed under it: one that never answers initialize (no session_init_timeout) cannot hold close().
    const ended = await withDeadline(() => pending.then(() => true, () => true), LOAD_CLOSE_GRACE_MS).catch(() => false);
    if (!ended) await Promise.all([...this.loadingPools].map((pool) => pool.close()));
    await pending.catch(() => undefined);
  }

  private invalidate(): void {
    const old = this.current;
    this.token += 1;
    // Retire the pool before clearing the state, so no session of the old generation reaches a new wrapper.
    if (old) this.retirePool(old.pool);
    this.current = null;
    this.dropKept();
  }

  /** Loads `refused` again on its own pool, which the next load takes over when the config is still the same. */
  private retryKeepingSessions(refused: Generation): void {
    this.token += 1;
    this.current = null;
    this.dropKept();
    this.kept = refused;
  }

  private dropKept(): void {
    if (this.kept) this.retirePool(this.kept.pool);
    this.kept = null;
  }

  /**
   * The data dir a new pool works in: a data dir made only after the toolkit (a deploy's link) is resolved by the first
   * pool to find it, then kept as the one made at construction is, so a reload after the link was pointed elsewhere
   * leaves every thread's workspace where its files are.
   */
  private settledDataDir(): string {
    if (!this.dataDirSettled) {
      this.dataDir = realFolderPath(this.dataDir);
      this.dataDirSettled = existsSync(this.dataDir);
    }
    return this.dataDir;
  }

  /**
   * Retires `pool`, keeping it for `close()` while its busy sessions finish their calls, and while it runs the sweep of
   * thread folders (once per process: no later pool runs it again), which `close()` stops and waits for.
   */
  private retirePool(pool: SessionPool): void {
    pool.retire();
    for (const earlier of this.retiredPools) if (earlier.live === 0 && !earlier.sweeping) this.retiredPools.delete(earlier);
    if (pool.live > 0 || pool.sweeping) this.retiredPools.add(pool);
  }

  /** The new generation's pool and config for a call whose pool was retired before it was sent (see `CallTarget`). */
  private async successor(
    serverName: string,
    server: McpServerConfig,
  ): Promise<{ pool: SessionPool; server: McpServerConfig; outputs?: OutputSchemas } | "unloadable" | undefined> {
    if (this.closed) throw new ToolkitClosedError();
    let generation: Generation;
    try {
      generation = await this.ensureLoaded();
    } catch (err) {
      this.reloadFailed(err, `to server '${serverName}'`);
      return "unloadable";
    }
    if (blockedBy(generation, serverName)) return undefined;
    const entry = generation.servers.get(serverName);
    if (!entry || !sameConnection(entry.config, server)) return undefined;
    return { pool: generation.pool, server: entry.config, outputs: generation.outputs.get(serverName) };
  }

  /** A reload a call needed failed: the config's own error, which names the file, is logged and never reaches the caller. */
  private reloadFailed(err: unknown, call: string): void {
    if (err instanceof ToolkitClosedError) throw err;
    this.logger.warn(`MCP tools could not be reloaded for a call ${call}: ${(err as Error)?.message ?? String(err)}`);
  }

  private ensureLoaded(): Promise<Generation> {
    if (this.current) return Promise.resolve(this.current);
    if (!this.loading) {
      const loading = this.loadConsistent().finally(() => {
        if (this.loading === loading) this.loading = null;
      });
      this.loading = loading;
    }
    return this.loading;
  }

  private async loadConsistent(): Promise<Generation> {
    for (let attempt = 1; ; attempt += 1) {
      if (this.closed) throw new ToolkitClosedError();
      const token = this.token;
      const before = await this.configState();
      const generation = await this.loadGeneration(token);
      const after = await this.configState();
      const consistent =
        token === this.token &&
        before.path === after.path &&
        generation.path === after.path &&
        signaturesEqual(before.signature, after.signature) &&
        signaturesEqual(generation.signature, after.signature);
      if (consistent && !this.closed) {
        this.current = generation;
        this.custom ??= generation.custom;
        // Disabled servers too: a rotated refresh token must outlive a server being switched off and on again.
        this.oauth.retain(Object.keys(generation.config.mcpServers));
        return generation;
      }
      if (this.closed) {
        // close() waits for this load: the sessions its discovery opened are closed before close() resolves.
        await generation.pool.close();
        throw new ToolkitClosedError();
      }
      this.retirePool(generation.pool);
      if (attempt >= MAX_LOAD_ATTEMPTS) {
        throw new Error(`MCP config kept changing while tools were loading (${MAX_LOAD_ATTEMPTS} attempts); try again`);
      }
      this.logger.info("MCP config or cache changed during tool discovery; discarding that load and retrying");
    }
  }

  private async loadGeneration(token: number): Promise<Generation> {
    const loaded = await loadExtensionsConfig({
      configPath: this.options.configPath,
      env: this.options.env,
      cwd: this.options.cwd,
      logger: this.logger,
    });
    const custom = await this.customInterceptors(loaded.config.mcpInterceptors, loaded.path);
    const idle = this.options.httpSessionIdleSeconds;
    const temporaryIdle = this.options.temporaryStdioIdleSeconds;
    const servers = new Map<string, ServerEntry>();
    const kept = this.kept;
    this.kept = null;
    const same = kept !== null && kept.path === loaded.path && signaturesEqual(kept.signature, loaded.signature);
    const clock = this.options.clock;
    if (kept && !same) this.retirePool(kept.pool);
    const pool = same ? kept.pool : new SessionPool(this.logger, {
      httpIdleMs: idle == null ? idle : idle * 1000,
      maxHttpSessionsPerServer: this.options.maxHttpSessionsPerServer,
      stdioMaxMessageBytes: this.options.stdioMaxMessageBytes,
      maxStdioSessions: this.options.maxStdioSessions,
      temporaryStdioIdleMs: temporaryIdle == null ? temporaryIdle : temporaryIdle * 1000,
      dataDir: this.settledDataDir(),
      ...(clock ? { now: () => clock().getTime() } : {}),
      secretsFor: (serverName) => servers.get(serverName)?.target.secrets ?? [],
    });
    for (const [serverName, server] of Object.entries(loaded.config.mcpServers)) {
      if (server.enabled) servers.set(serverName, this.serverEntry(serverName, server, custom, loaded.envSecrets[serverName] ?? []));
    }
    // Closed while the configuration loaded: close() did not see this pool.
    if (this.closed) throw new ToolkitClosedError();
    if (!same) {
      // A task server is frozen, so its children holding pending tasks serve on in this generation (see `retire`).
      const sameServer = (name: string, launched: McpServerConfig) => {
        const entry = servers.get(name);
        return entry !== undefined && sameConnection(entry.config, launched);
      };
      for (const retired of this.retiredPools) pool.adoptTaskHolders(retired, sameServer);
    }
    this.loadingPools.add(pool);
    let discoveries: Awaited<ReturnType<typeof discoverAll>>;
    try {
      discoveries = await discoverAll([...servers.values()].map((entry) => entry.target), pool, this.logger);
    } finally {
      this.loadingPools.delete(pool);
    }
    const candidates = discoveries.flatMap((d) =>
      d.tools.map((tool) => ({
        server: d.serverName,
        rawName: tool.definition.name,
        prefixed: d.server.tool_name_prefix,
        serverConfig: d.server,
        tool,
      })),
    );
    const named = assignVisibleNames(candidates, (m) => this.logger.warn(m));
    const invoke = (record: McpToolRecord, visibleName: string, args: Record<string, unknown>, config: RunnableConfig | undefined) =>
      this.invokeTool(record, visibleName, args, config);
    const discovered = named.map(({ candidate, visibleName }): DiscoveredTool => {
      const spec: HarnessToolSpec = {
        visibleName,
        description: candidate.tool.definition.description ?? "",
        inputSchema: candidate.tool.inputSchema,
        record: { server: candidate.server, rawName: candidate.rawName, transport: candidate.serverConfig.type },
        routing: resolveToolRouting(candidate.serverConfig, candidate.rawName),
        annotations: candidate.tool.definition.annotations as Record<string, unknown> | undefined,
      };
      return { spec, tool: createHarnessTool(spec, invoke) };
    });
    const failures = new Map(discoveries.filter((d) => d.failure).map((d) => [d.serverName, d.failure!]));
    let tools: DynamicStructuredTool[] = [];
    let toolsError: McpTaskConfigurationError | undefined;
    try {
      tools = this.exposedTools(loaded.config, discovered, failures);
    } catch (err) {
      // One task server that is down, or edited, must not stop the polls of every other server's tasks.
      if (!(err instanceof McpTaskConfigurationError)) {
        // No generation will own the sessions discovery opened.
        this.retirePool(pool);
        throw err;
      }
      toolsError = err;
      // Its discovery children serve the default scope, which a task's polls (in the task's own scope) never use:
      // no process is held for a generation the next getTools() replaces.
      for (const [name, entry] of servers) if (entry.config.type === "stdio") void pool.closeServer(name);
    }
    this.logger.debug(`loaded ${tools.length} MCP tools from ${discoveries.length} servers (generation ${token})`);
    return {
      token,
      path: loaded.path,
      signature: loaded.signature,
      config: loaded.config,
      servers,
      outputs: new Map(discoveries.map((d) => [d.serverName, new OutputSchemas(d.tools.map((t) => ({ name: t.definition.name, outputSchema: t.outputSchema })))])),
      tools,
      pool,
      custom,
      failures,
      ...(toolsError ? { toolsError } : {}),
    };
  }

  /** The tools handed out: task servers' tools through the task runtime, never as synchronous calls (SPEC §6.3). */
  private exposedTools(
    config: ExtensionsConfig,
    discovered: readonly DiscoveredTool[],
    failures: ReadonlyMap<string, string>,
  ): DynamicStructuredTool[] {
    const taskServers = checkedTaskServers(config);
    const hooks = this.options.taskRuntime;
    if (hooks) return hooks.prepareTools({ config, tools: discovered, failures });
    if (taskServers.length > 0) {
      throw new McpTaskConfigurationError(
        `MCP task_toolsets (${quotedNames(taskServers)}) need the durable task runtime: ` +
          "pass createTaskRuntime(...) to createMcpToolkit({ taskRuntime })",
      );
    }
    return discovered.map((d) => d.tool);
  }

  /**
   * One MCP call outside a tool node, through the same credential layers and interceptors as the tools.
   * Returns the chain's raw outcome; a failure throws an error whose text is safe to show.
   */
  async callTool(call: McpDirectToolCall): Promise<McpCallOutcome> {
    if (this.closed) throw new ToolkitClosedError();
    let generation: Generation;
    try {
      generation = this.current ?? (await this.ensureLoaded());
    } catch (err) {
      // The caller (a task's submit or poll) stores or shows the text: a line of its own, as a tool's call gets.
      this.reloadFailed(err, `to server '${call.server}'`);
      throw ownText(new McpToolCallError(unloadableText({ rawName: call.tool })));
    }
    const blocked = blockedBy(generation, call.server);
    if (blocked) throw ownText(new McpToolCallError(blocked.message));
    const entry = generation.servers.get(call.server);
    if (!entry) throw ownText(new McpToolCallError(`MCP server '${call.server}' is not configured or not enabled`));
    const requestScoped = call.requestScopedHeaders ?? true;
    const runtime = call.runtime ?? (requestScoped ? resolveToolRuntime(undefined) : undefined);
    const opts = requestScoped ? entry.requestScoped : entry.serverLevel;
    const remembered = [...(call.rememberedSecrets ?? []), ...(requestScoped ? [] : taskUserCredentials(entry.config, call.scope?.userId))];
    // A durable task's results reach its thread too: its stdio paths are shown as an agent's call shows them.
    return runDirectCall(
      {
        pool: generation.pool,
        server: entry.config,
        ...(call.scope ? { scope: directCallScope(call.scope, call.runtime) } : {}),
        ...(call.onSession ? { onSession: call.onSession } : {}),
        successor: () => this.successor(call.server, entry.config),
        outputs: generation.outputs.get(call.server),
      },
      { server: call.server, rawName: call.tool, transport: entry.config.type },
      call.args,
      runtime,
      call.signal ?? runtime?.signal,
      remembered.length === 0 ? opts : { ...opts, remembered },
      {},
      call.onCarriedSecrets,
      call.onUnscrubbed,
      call.protocolFields,
    );
  }

  /** The call path of every tool this toolkit made, including tools of earlier generations. */
  private invokeTool(
    record: McpToolRecord,
    visibleName: string,
    args: Record<string, unknown>,
    config: RunnableConfig | undefined,
  ): Promise<unknown> {
    const generation = this.current;
    if (generation) return this.invokeOn(generation, record, visibleName, args, config);
    return this.ensureLoaded().then(
      (loaded) => this.invokeOn(loaded, record, visibleName, args, config),
      (err: unknown) => {
        this.reloadFailed(err, `of '${visibleName}'`);
        return toolErrorOutput(unloadableText(record), visibleName, config);
      },
    );
  }

  private invokeOn(
    generation: Generation,
    record: McpToolRecord,
    visibleName: string,
    args: Record<string, unknown>,
    config: RunnableConfig | undefined,
  ): Promise<unknown> {
    const blocked = blockedBy(generation, record.server);
    if (blocked) return new Promise((resolve) => resolve(toolErrorOutput(blocked.message, visibleName, config)));
    const entry = generation.servers.get(record.server);
    if (!entry) {
      // In an executor, so the error outside a tool node (a throw) becomes a rejection.
      return new Promise((resolve) =>
        resolve(toolErrorOutput(`MCP server '${record.server}' is no longer configured; reload the tools`, visibleName, config)),
      );
    }
    const target = {
      pool: generation.pool,
      server: entry.config,
      successor: () => this.successor(record.server, entry.config),
      outputs: generation.outputs.get(record.server),
    };
    return runToolCall(target, record, visibleName, args, config, entry.requestScoped);
  }

  /** One server's call chains: credential layers (outermost), then `mcpInterceptors`, then the toolkit's own. */
  private serverEntry(
    serverName: string,
    server: McpServerConfig,
    custom: CustomInterceptors,
    envSecrets: readonly string[],
  ): ServerEntry {
    const headers = new ServerHeaders(serverName, server, this.oauth);
    const layers = credentialLayers(serverName, server, headers, this.logger, this.stdioWarnings);
    const target = discoveryTarget(serverName, server, headers, envSecrets);
    const chain = (credentials: readonly McpToolInterceptor[]): CallPathOptions => ({
      interceptors: [...credentials, ...custom.interceptors, ...this.interceptors],
      headers: baseHeaders(server),
      secrets: target.secrets,
      maxResultChars: this.options.maxResultChars,
    });
    return {
      config: server,
      requestScoped: chain(layers.requestScoped),
      serverLevel: chain(layers.serverLevel),
      target,
    };
  }

  /**
   * `mcpInterceptors` are loaded once and frozen: a later edit fails loudly instead of silently running
   * the startup set (SPEC §2.4). Loaded again only until a generation is installed.
   */
  private async customInterceptors(value: string | readonly string[] | null | undefined, path: string | null): Promise<CustomInterceptors> {
    const specs = interceptorSpecs(value);
    const dir = path === null ? null : nodePath.dirname(path);
    const frozen = this.custom;
    if (!frozen) {
      const seconds = this.options.interceptorLoadSeconds;
      const interceptors = await loadCustomInterceptors(specs, path, this.logger, seconds === undefined ? undefined : seconds * 1000);
      return { specs, dir, interceptors };
    }
    const sameSpecs = JSON.stringify(frozen.specs) === JSON.stringify(specs);
    if (sameSpecs && (specs.length === 0 || frozen.dir === dir)) return frozen;
    const describe = (list: readonly string[]) => (list.length === 0 ? "none" : list.map((spec) => `'${spec}'`).join(", "));
    throw new Error(
      sameSpecs
        ? `mcpInterceptors now resolve from another config folder (${frozen.dir ?? "none"} → ${dir ?? "none"}); restart the process to apply the change`
        : `mcpInterceptors changed since startup (${describe(frozen.specs)} → ${describe(specs)}); restart the process to apply the change`,
    );
  }

  /** The (path, signature) the cache compares; a vanished explicit path counts as "no change". */
  private async configState(): Promise<ConfigState> {
    const path = this.resolvePathForCache();
    if (path === undefined) return { path: this.current?.path ?? null, signature: this.current?.signature ?? null };
    return { path, signature: path ? await getConfigSignature(path) : null };
  }

  private resolvePathForCache(): string | null | undefined {
    try {
      return resolveExtensionsConfigPath({ configPath: this.options.configPath, env: this.options.env, cwd: this.options.cwd });
    } catch (err) {
      if (err instanceof ConfigFileNotFoundError) return undefined;
      throw err;
    }
  }

  private async isStale(current: Generation): Promise<boolean> {
    const { path, signature } = await this.configState();
    if (path === null) return false;
    if (path !== current.path) {
      this.logger.info(`MCP config path changed (${current.path ?? "none"} → ${path}); reloading tools`);
      return true;
    }
    // Deleted or unreadable mid-run: keep serving the last good tools.
    if (!signature || signature.sha256 === null || !current.signature) return false;
    if (signaturesEqual(signature, current.signature)) return false;
    this.logger.info(`MCP config content changed (${path}); reloading tools`);
    return true;
  }
}

export function createMcpToolkit(options?: McpToolkitOptions): McpToolkit {
  return new McpToolkit(options);
}
