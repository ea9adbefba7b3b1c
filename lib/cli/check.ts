import { isDisabledServer, McpTaskConfigurationError, type LoadedExtensionsConfig, type McpRouting, type McpTransportType } from "../config";
import { buildCustomInterceptor, interceptorSpecs, InterceptorSpecError } from "../credentials";
import { validateStdioLaunch } from "../gateway";
import { checkedTaskServers, probeServers, type ServerProbe } from "../mcp";
import { stderrLogPrefix } from "../sessions";
import { resolveDataDir } from "../shared/data-dir";
import { RecordingLogger } from "../shared/logger";
import { parseArgs } from "./args";
import { CliConfigError, loadForCli, searchedLocations } from "./config";
import type { CliIo } from "./io";
import { renderTable } from "./table";
import { listingToolkit } from "./task-listing";

type ServerStatus = "ok" | "failed" | "skipped" | "disabled" | "unchecked";

interface ServerReport {
  name: string;
  /** `null` for a skipped entry whose transport fields are malformed. */
  transport: McpTransportType | null;
  enabled: boolean;
  status: ServerStatus;
  /** Tools listed, when the server was tried and started. */
  tools?: number;
  reason?: string;
  /** A stdio server that failed: the last lines it wrote to stderr (its secrets redacted), oldest first. */
  stderr?: string[];
  routing: McpRouting | null;
}

/** How many of a failed stdio server's last stderr lines `check` shows. */
const STDERR_LINES_SHOWN = 10;

interface InterceptorReport {
  spec: string;
  status: "ok" | "failed" | "unchecked";
  reason?: string;
}

export const CHECK_FLAGS = ["json", "offline", "allow-empty"] as const;

/** "MCP server 'gh' references … ; not starting it" → "references …": the line already names the server. */
function bareSkipReason(server: string, reason: string): string {
  const prefix = `MCP server '${server}'`;
  let bare = reason.startsWith(prefix) ? reason.slice(prefix.length).replace(/^[:\s]+/, "") : reason;
  bare = bare.replace(/; not starting it$/, "");
  return bare;
}

function serverLine(server: ServerReport): string {
  const what = server.status === "skipped" ? "not started" : "cannot start";
  return `server '${server.name}' (${server.transport ?? "unknown transport"}) ${what}: ${server.reason ?? "unknown reason"}`;
}

function interceptorLine(interceptor: InterceptorReport): string {
  return `interceptor '${interceptor.spec}' cannot be used: ${interceptor.reason ?? "unknown reason"}`;
}

async function checkInterceptors(specs: readonly string[], path: string | null): Promise<InterceptorReport[]> {
  const reports: InterceptorReport[] = [];
  // One after another, in order, as startup loads them.
  for (const spec of specs) {
    try {
      await buildCustomInterceptor(spec, path);
      reports.push({ spec, status: "ok" });
    } catch (err) {
      if (!(err instanceof InterceptorSpecError)) throw err;
      reports.push({ spec, status: "failed", reason: err.reason });
    }
  }
  return reports;
}

/**
 * The HTTP API's stdio launch policy (SPEC §8.3) applied to the file's enabled servers: the file may say
 * anything, so a miss is a warning, not a failure.
 */
function launchPolicyWarnings(loaded: LoadedExtensionsConfig, env: NodeJS.ProcessEnv): string[] {
  const servers = loaded.raw.mcpServers;
  if (typeof servers !== "object" || servers === null || Array.isArray(servers)) return [];
  const warnings: string[] = [];
  for (const [name, server] of Object.entries(servers as Record<string, unknown>)) {
    if (typeof server !== "object" || server === null || Array.isArray(server)) continue;
    if (isDisabledServer(server)) continue;
    const reason = validateStdioLaunch(server, { name, env });
    if (reason !== null) warnings.push(`stdio launch policy of the HTTP API would refuse this entry: ${reason}`);
  }
  return warnings;
}

function taskConfigurationMessage(err: unknown): string {
  if (!(err instanceof McpTaskConfigurationError)) throw err;
  return err.message;
}

/** The task runtime's startup rules on the file alone (toolsets need `mcpTasks.enabled`): the problem, or `null`. */
function taskSettingsProblem(loaded: LoadedExtensionsConfig): string | null {
  try {
    checkedTaskServers(loaded.config);
    return null;
  } catch (err) {
    return taskConfigurationMessage(err);
  }
}

/**
 * Online: discovery as an agent's toolkit runs it, with the runtime's own wrapping of task tools, so a toolset
 * naming a raw tool its server does not list fails here as it fails at startup. Only for configs with task servers.
 */
async function taskToolsetsProblem(loaded: LoadedExtensionsConfig, io: CliIo): Promise<string | null> {
  if (checkedTaskServers(loaded.config).length === 0) return null;
  const { toolkit } = listingToolkit(loaded.path, io, new RecordingLogger());
  try {
    await toolkit.getTools();
    return null;
  } catch (err) {
    return taskConfigurationMessage(err);
  } finally {
    await toolkit.close();
  }
}

/**
 * The last lines each stdio server wrote to stderr, as the session pool logs them (scrubbed of the server's secrets,
 * escaped and bounded): a server that exits at startup usually says why there.
 */
function stderrLines(logger: RecordingLogger, server: string): string[] {
  const prefix = stderrLogPrefix(server);
  return logger
    .messages("debug")
    .filter((message) => message.startsWith(prefix))
    .slice(-STDERR_LINES_SHOWN)
    .map((message) => message.slice(prefix.length));
}

/** Tries every enabled server; on a terminal, one progress line per server as it finishes. */
async function checkServers(loaded: LoadedExtensionsConfig, io: CliIo, progress: boolean, logger: RecordingLogger): Promise<Map<string, ServerProbe>> {
  const enabled = Object.values(loaded.config.mcpServers).filter((s) => s.enabled).length;
  if (enabled === 0) return new Map();
  let done = 0;
  if (progress) io.err(`checking ${enabled} enabled server(s)…`);
  const probes = await probeServers(loaded, {
    logger,
    dataDir: resolveDataDir({ env: io.env, cwd: io.cwd }),
    onResult: (probe) => {
      done += 1;
      if (!progress) return;
      const outcome = probe.ok ? `ok, ${probe.tools} tool(s)` : "failed";
      io.err(`  [${done}/${enabled}] ${probe.server} (${probe.transport}): ${outcome}`);
    },
  });
  return new Map(probes.map((p) => [p.server, p]));
}

/**
 * `check [config] [--json] [--offline] [--allow-empty]`: validate the config, then (unless `--offline`)
 * try every enabled server (connect + list tools, under its `session_init_timeout`, in parallel) and load
 * every `mcpInterceptors` entry as startup would, and apply the task runtime's startup rules (offline: the
 * settings; online also the toolsets' raw tools against what their servers list). Exit 1 when the file is invalid,
 * when no config was found (unless `--allow-empty`), or when any enabled server, interceptor or task rule fails;
 * one line per failure.
 */
export async function checkCommand(args: readonly string[], io: CliIo): Promise<number> {
  const { positional, flags } = parseArgs(args, CHECK_FLAGS, 1);
  const json = flags.has("json");
  const offline = flags.has("offline");
  const report = (value: object) => io.out(JSON.stringify(value, null, 2));

  let loaded: LoadedExtensionsConfig;
  try {
    loaded = await loadForCli(positional[0], io, new RecordingLogger());
  } catch (err) {
    if (!(err instanceof CliConfigError)) throw err;
    if (json) report({ ok: false, error: err.message });
    else io.err(err.message);
    return 1;
  }

  if (loaded.path === null) {
    const allowEmpty = flags.has("allow-empty");
    const message = allowEmpty
      ? `no extensions config found (${searchedLocations(io)}); --allow-empty: an empty config is OK`
      : `no extensions config found: ${searchedLocations(io)}. Give a file, set MCP_HARNESS_CONFIG, or pass --allow-empty`;
    if (json) report({ ok: allowEmpty, path: null, offline, error: allowEmpty ? undefined : message, servers: [], interceptors: [], failures: allowEmpty ? [] : [message], warnings: [], skipped: [] });
    else if (allowEmpty) io.out(message);
    else io.err(message);
    return allowEmpty ? 0 : 1;
  }

  const warnings = [...loaded.warnings, ...launchPolicyWarnings(loaded, io.env)];
  const specs = interceptorSpecs(loaded.config.mcpInterceptors);
  const progress = Boolean(io.interactive) && !json && !offline;
  const settingsProblem = taskSettingsProblem(loaded);
  const probeLog = new RecordingLogger();
  const [probes, interceptors, toolsetsProblem] = offline
    ? [new Map<string, ServerProbe>(), specs.map((spec): InterceptorReport => ({ spec, status: "unchecked" })), null]
    : await Promise.all([
        checkServers(loaded, io, progress, probeLog),
        checkInterceptors(specs, loaded.path),
        settingsProblem === null ? taskToolsetsProblem(loaded, io) : null,
      ]);

  const servers: ServerReport[] = Object.entries(loaded.config.mcpServers).map(([name, server]) => {
    const routing = { ...server.routing, keywords: [...server.routing.keywords] };
    const entry = (status: ServerStatus, extra: { tools?: number; reason?: string; stderr?: string[] } = {}): ServerReport => ({
      name,
      transport: server.type,
      enabled: server.enabled,
      status,
      ...extra,
      routing,
    });
    if (!server.enabled) return entry("disabled");
    const probe = probes.get(name);
    if (!probe) return entry("unchecked");
    if (probe.ok) return entry("ok", { tools: probe.tools });
    const stderr = server.type === "stdio" ? stderrLines(probeLog, name) : [];
    return entry("failed", { reason: probe.reason ?? "failed", ...(stderr.length > 0 ? { stderr } : {}) });
  });
  for (const skipped of loaded.skipped) {
    servers.push({
      name: skipped.server,
      transport: skipped.transport,
      enabled: true,
      status: "skipped",
      reason: bareSkipReason(skipped.server, skipped.reason),
      routing: null,
    });
  }

  for (const probe of probes.values()) warnings.push(...(probe.toolWarnings ?? []));

  // In the file's order.
  const order = Object.keys(loaded.raw.mcpServers && typeof loaded.raw.mcpServers === "object" ? loaded.raw.mcpServers : {});
  servers.sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));

  const failures = [
    ...servers.filter((s) => s.status === "failed" || s.status === "skipped").map(serverLine),
    ...interceptors.filter((i) => i.status === "failed").map(interceptorLine),
    ...[settingsProblem, toolsetsProblem].filter((problem): problem is string => problem !== null),
  ];
  const ok = failures.length === 0;

  if (json) {
    report({ ok, path: loaded.path, offline, servers, interceptors, failures, warnings, skipped: loaded.skipped });
    return ok ? 0 : 1;
  }
  io.out(`config: ${loaded.path}`);
  io.out(
    renderTable(
      ["server", "transport", "enabled", "status"],
      servers.map((s) => [
        s.name,
        s.transport ?? "?",
        String(s.enabled),
        s.status === "ok" ? `ok (${s.tools} tool${s.tools === 1 ? "" : "s"})` : s.status === "unchecked" ? "not checked (--offline)" : s.status,
      ]),
    ),
  );
  if (interceptors.length > 0) {
    io.out("");
    io.out(renderTable(["interceptor", "status"], interceptors.map((i) => [i.spec, i.status === "unchecked" ? "not checked (--offline)" : i.status])));
  }
  for (const warning of warnings) io.err(`warning: ${warning}`);
  for (const failure of failures) io.err(`error: ${failure}`);
  for (const server of servers) {
    if (!server.stderr) continue;
    io.err(`server '${server.name}' wrote to stderr (last ${server.stderr.length} line(s)):`);
    for (const line of server.stderr) io.err(`  | ${line}`);
  }
  if (ok) io.out(offline ? "config OK (offline: servers and interceptors were not tried)" : "config OK");
  else io.out(`check failed: ${failures.length} problem(s)`);
  return ok ? 0 : 1;
}
