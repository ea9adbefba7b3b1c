import * as nodePath from "node:path";
import type { z } from "zod";
import { headerNameProblem, headerValueProblem, invalidHeaderMessage } from "../shared/headers";
import { cwdSecrets, resolvedPathSecrets } from "./path-secrets";
import { consoleLogger, type Logger } from "../shared/logger";
import { resolveEnvReferences } from "./env";
import { ConfigReadError, ConfigValidationError, formatIssuePath, shownKey, type ConfigIssue } from "./errors";
import { parseJsonBytes } from "./json";
import { laxServer, laxTaskSettings, withoutSettings } from "./lax";
import { resolveExtensionsConfigPath } from "./path";
import {
  ExtensionsConfigSchema,
  isBlank,
  normalizeTransportName,
  resolveTransport,
  ROUTING_PRIORITY_MAX,
  ROUTING_PRIORITY_MIN,
  type ExtensionsConfig,
  type McpTransportType,
} from "./schema";
import { readSignedFile, type ConfigSignature } from "./signature";
import { urlValueProblem, userInfoReferenceProblem } from "./url-user-info";
import { literalReferenceWarnings } from "./literal-references";

export interface LoadExtensionsConfigOptions {
  configPath?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  logger?: Logger;
}

/** An enabled server that is not started; `reason` names fields and variables, never values. */
export interface SkippedServer {
  server: string;
  /** The transport the entry declares or implies; `null` when its transport fields are malformed. */
  transport: McpTransportType | null;
  reason: string;
  missingVariables?: string[];
}

export interface LoadedExtensionsConfig {
  /** The resolved file; `null` when none was found (empty config). */
  path: string | null;
  /** Of the bytes that were parsed. */
  signature: ConfigSignature | null;
  /** Validated and `$VAR`-resolved; skipped servers are removed from `mcpServers`. */
  config: ExtensionsConfig;
  /** The parsed JSON before `$VAR` resolution, for writers that must keep placeholders. */
  raw: Record<string, unknown>;
  skipped: SkippedServer[];
  warnings: string[];
  /**
   * Per started server, the values that came from `$VAR` expansion anywhere in its config (url, env, args,
   * headers, …): secrets, whatever field they landed in (SPEC §4.3).
   */
  envSecrets: Readonly<Record<string, readonly string[]>>;
}

/**
 * Reads, `$VAR`-resolves and validates the extensions config (SPEC §2). An enabled server that
 * references an unset variable, puts a value into a URL's user info that would end it there (or takes a whole URL whose
 * user info is not percent-encoded from one), or lacks the
 * `command`/`url` its transport needs, is skipped with a warning while the others load; anything else invalid throws a
 * `ConfigValidationError`.
 */
export async function loadExtensionsConfig(opts: LoadExtensionsConfigOptions = {}): Promise<LoadedExtensionsConfig> {
  const env = opts.env ?? process.env;
  const logger = opts.logger ?? consoleLogger;
  const path = resolveExtensionsConfigPath({ configPath: opts.configPath, env, cwd: opts.cwd });
  if (path === null) {
    return { path: null, signature: null, config: ExtensionsConfigSchema.parse({}), raw: {}, skipped: [], warnings: [], envSecrets: {} };
  }

  let file;
  try {
    file = await readSignedFile(path);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new ConfigReadError(path, (err as NodeJS.ErrnoException)?.code, reason);
  }

  const parsed = parseJsonBytes(file.bytes, path);
  if (!isRecord(parsed)) {
    throw new ConfigValidationError(path, [{ path: formatIssuePath([]), message: "expected a JSON object" }]);
  }

  const { servers, skipped, envSecrets, warnings: referenceWarnings } = prepareServers(parsed.mcpServers, env);
  const input: Record<string, unknown> = servers === undefined ? { ...parsed } : { ...parsed, mcpServers: servers };
  if (parsed.mcpInterceptors !== undefined) input.mcpInterceptors = resolveInterceptorSpecs(parsed.mcpInterceptors, env, path);
  if (parsed.mcpTasks !== undefined) input.mcpTasks = laxTaskSettings(parsed.mcpTasks);
  const warnings = [...referenceWarnings, ...priorityWarnings(servers)];

  const result = ExtensionsConfigSchema.safeParse(input);
  if (!result.success) throw new ConfigValidationError(path, result.error.issues.map(toConfigIssue));

  const config = result.data;
  const base = nodePath.dirname(path);
  for (const [name, server] of Object.entries(config.mcpServers)) {
    const secrets = envSecrets[name] as string[] | undefined;
    if (server.cwd !== undefined && server.cwd !== "") {
      const cwd = nodePath.resolve(base, server.cwd);
      if (secrets) secrets.push(...cwdSecrets(server.cwd, cwd, secrets));
      // An absolute one is spawned as written.
      if (!nodePath.isAbsolute(server.cwd)) config.mcpServers[name] = { ...server, cwd };
    }
    const resolved = config.mcpServers[name];
    if (resolved.type === "stdio" && secrets) secrets.push(...resolvedPathSecrets(secrets, resolved.cwd || undefined));
  }

  for (const entry of skipped) logger.warn(entry.reason);
  for (const warning of warnings) logger.warn(warning);
  return { path, signature: file.signature, config, raw: parsed, skipped, warnings, envSecrets };
}

/**
 * Resolves `$VAR`s of each enabled server and drops the enabled servers that cannot start. Disabled
 * servers and anything that is not a server object pass through for the schema to judge.
 */
function prepareServers(
  rawServers: unknown,
  env: NodeJS.ProcessEnv,
): { servers: Record<string, unknown> | undefined; skipped: SkippedServer[]; envSecrets: Record<string, string[]>; warnings: string[] } {
  const skipped: SkippedServer[] = [];
  const envSecrets: Record<string, string[]> = {};
  const warnings: string[] = [];
  if (!isRecord(rawServers)) return { servers: undefined, skipped, envSecrets, warnings };

  const kept: [string, unknown][] = [];
  for (const [name, written] of Object.entries(rawServers)) {
    const server = laxServer(written);
    if (!isRecord(server) || server.enabled === false) {
      kept.push([name, server]);
      continue;
    }
    if (name === "__proto__") {
      // The schema's records drop this key without an issue: say so instead of losing the server silently.
      skipped.push({ server: name, transport: transportOf(server), reason: "MCP server name '__proto__' is reserved; not starting it" });
      continue;
    }
    warnings.push(...literalReferenceWarnings(name, server, env));
    const { value, missing, expanded } = resolveServer(server, env);
    if (missing.length > 0) {
      skipped.push({
        server: name,
        transport: transportOf(server),
        reason: `MCP server '${name}' references unset environment variable(s) ${missing.join(", ")}; not starting it`,
        missingVariables: missing,
      });
      continue;
    }
    const resolved = laxServer(value) as Record<string, unknown>;
    const problem =
      missingTransportField(name, resolved) ??
      staticHeadersProblem(name, resolved) ??
      userInfoReferenceProblem(name, server, env) ??
      urlValueProblem(name, server, env);
    if (problem !== null) {
      skipped.push({ server: name, transport: transportOf(resolved), reason: problem });
      continue;
    }
    kept.push([name, resolved]);
    if (expanded.length > 0) Object.defineProperty(envSecrets, name, { value: expanded, enumerable: true });
  }
  return { servers: Object.fromEntries(kept), skipped, envSecrets, warnings };
}

/**
 * A server's `$VAR`s. Only values outside its scalar settings count as its secrets (`"tool_call_timeout": "$T"` is a
 * setting: see `withoutSettings`).
 */
function resolveServer(server: Record<string, unknown>, env: NodeJS.ProcessEnv): { value: unknown; missing: string[]; expanded: string[] } {
  const { value, missing } = resolveEnvReferences(server, env);
  return { value, missing, expanded: resolveEnvReferences(withoutSettings(server), env).expanded };
}

/**
 * `$VAR`s in `mcpInterceptors` (the Python original resolves the whole file). Fail closed: an interceptor may be
 * what guards the calls, so an unset variable stops the load instead of leaving the interceptor out.
 */
function resolveInterceptorSpecs(specs: unknown, env: NodeJS.ProcessEnv, path: string): unknown {
  const { value, missing } = resolveEnvReferences(specs, env);
  if (missing.length === 0) return value;
  throw new ConfigValidationError(path, [
    { path: formatIssuePath(["mcpInterceptors"]), message: `references unset environment variable(s) ${missing.join(", ")}` },
  ]);
}

/** The transport a raw server object resolves to; `null` when its transport fields are malformed (the schema reports those). */
function transportOf(server: Record<string, unknown>): McpTransportType | null {
  const { type, transport, url, command } = server;
  if (!isOptionalString(type) || !isOptionalString(transport)) return null;
  if (!isOptionalString(url ?? undefined) || !isOptionalString(command ?? undefined)) return null;
  const declared = isBlank(type) ? (isBlank(transport) ? undefined : transport) : type;
  if (declared !== undefined && normalizeTransportName(declared) === undefined) return null;
  return resolveTransport({
    type,
    transport,
    url: typeof url === "string" ? url : undefined,
    command: typeof command === "string" ? command : undefined,
  });
}

/** The Python original's start-up checks, applied at load: a stdio server needs `command`, an HTTP/SSE one needs `url`. */
function missingTransportField(name: string, server: Record<string, unknown>): string | null {
  const kind = transportOf(server);
  if (kind === null) return null;
  const value = kind === "stdio" ? server.command : server.url;
  if (typeof value === "string" && value.trim() !== "") return null;
  return `MCP server '${name}' with ${kind} transport requires '${kind === "stdio" ? "command" : "url"}' field`;
}

/**
 * The static header layer is checked once, at load, after `$VAR` resolution: an HTTP/SSE server whose
 * headers cannot be sent (bad name or value, one header in two spellings) is not started.
 */
function staticHeadersProblem(name: string, server: Record<string, unknown>): string | null {
  const { headers } = server;
  if (!isRecord(headers) || transportOf(server) === "stdio") return null;
  const spellings = new Map<string, string>();
  for (const [header, value] of Object.entries(headers)) {
    if (typeof value !== "string") return null; // the schema reports it
    const problem = headerNameProblem(header) ?? headerValueProblem(value);
    if (problem !== null) return `${invalidHeaderMessage(name, header, "static", problem)}; not starting it`;
    const previous = spellings.get(header.toLowerCase());
    if (previous !== undefined) {
      return `MCP server '${name}' names static header '${previous}' twice (as '${previous}' and '${header}'); not starting it`;
    }
    spellings.set(header.toLowerCase(), header);
  }
  return null;
}

/** The schema clamps routing priorities silently; the warnings are raised here, with their JSON path. */
function priorityWarnings(servers: Record<string, unknown> | undefined): string[] {
  const warnings: string[] = [];
  if (servers === undefined) return warnings;
  const check = (routing: unknown, path: PropertyKey[]) => {
    if (!isRecord(routing)) return;
    const priority = routing.priority;
    if (typeof priority !== "number" || !Number.isInteger(priority)) return;
    const where = formatIssuePath([...path, "priority"]);
    if (priority < ROUTING_PRIORITY_MIN) {
      warnings.push(
        `MCP routing priority ${priority} for ${where} is below ${ROUTING_PRIORITY_MIN}; clamping to ${ROUTING_PRIORITY_MIN}.`,
      );
    } else if (priority > ROUTING_PRIORITY_MAX) {
      warnings.push(
        `MCP routing priority ${priority} for ${where} is above ${ROUTING_PRIORITY_MAX}; clamping to ${ROUTING_PRIORITY_MAX}.`,
      );
    }
  };
  for (const [name, server] of Object.entries(servers)) {
    if (!isRecord(server)) continue;
    check(server.routing, ["mcpServers", name, "routing"]);
    if (!isRecord(server.tools)) continue;
    for (const [tool, override] of Object.entries(server.tools)) {
      if (isRecord(override)) check(override.routing, ["mcpServers", name, "tools", tool, "routing"]);
    }
  }
  return warnings;
}

/** How many unrecognized keys one issue lists; the rest are counted. */
export const MAX_LISTED_KEYS = 5;

/**
 * zod 4 messages name types and options, not received values, except the keys of an `unrecognized_keys`
 * issue, which come from the user's file: those are shown bounded and escaped. Nested reasons are lifted
 * into the line.
 */
function issueMessage(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case "unrecognized_keys": {
      const listed = issue.keys.slice(0, MAX_LISTED_KEYS).map(shownKey).join(", ");
      const more = issue.keys.length > MAX_LISTED_KEYS ? ` and ${issue.keys.length - MAX_LISTED_KEYS} more` : "";
      return `Unrecognized key${issue.keys.length === 1 ? "" : "s"}: ${listed}${more}`;
    }
    case "invalid_key":
    case "invalid_element": {
      const inner = issue.issues.map(issueMessage).join("; ");
      return inner ? `${issue.message}: ${inner}` : issue.message;
    }
    case "invalid_union": {
      const branches = issue.errors.map((branch) => branch.map(issueMessage).join("; ")).filter(Boolean);
      return branches.length > 0 ? `${issue.message} (${branches.join(" | ")})` : issue.message;
    }
    default:
      return issue.message;
  }
}

/** A zod issue as a config issue: its JSON path and a message that never quotes a value. */
export function toConfigIssue(issue: z.core.$ZodIssue): ConfigIssue {
  return { path: formatIssuePath(issue.path), message: issueMessage(issue) };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isOptionalString(value: unknown): value is string | undefined {
  return value === undefined || typeof value === "string";
}
