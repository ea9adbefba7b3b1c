import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import { resolveEnvReferences } from "../config/env";
import { ConfigJsonSyntaxError, ConfigValidationError, describeConfigIssues, shownKey } from "../config/errors";
import { parseJsonBytes } from "../config/json";
import { toConfigIssue } from "../config/load";
import { isDisabledServer, laxServer, withoutSettings } from "../config/lax";
import { ExtensionsConfigSchema, McpServerSchema } from "../config/schema";
import { consoleLogger, type Logger } from "../shared/logger";
import { ConfigFile } from "./config-file";
import { ConfigLockTimeoutError, type FileLockOptions } from "./file-lock";
import { validateStdioLaunch } from "./launch-policy";
import { isRecord, MaskedValueError, maskServers, restoreMaskedServers } from "./masking";
import { registerTaskRoutes, type GatewayTaskRuntime } from "./task-routes";
import type { WriteStep } from "./write";

/** Who is calling, as the `authorize` hook decides. */
export interface GatewayUser {
  userId: string;
  admin: boolean;
}

/** `null`: not authenticated (401). A non-admin user gets 403 on the config endpoints. */
export type GatewayAuthorize = (request: Request) => GatewayUser | null | Promise<GatewayUser | null>;

/** What the gateway needs of a toolkit: `reset()` (an `McpToolkit` fits). */
export interface GatewayToolkit {
  reset(): Promise<void> | void;
}

export interface GatewayAppOptions {
  /** Reset after every config write and by `POST /api/mcp/cache/reset`. */
  toolkit?: GatewayToolkit;
  /** The config file; else `MCP_HARNESS_CONFIG`, else the search of SPEC §2.3 (a PUT creates `<cwd>/extensions_config.json`). */
  configPath?: string;
  /** Environment for the config path, the stdio allowlist and `$VAR` screening; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /**
   * The durable task runtime (`createTaskRuntime`) for the task routes of SPEC §8.4; without one, or while it is
   * stopped, they answer 503 (saying so when `enabled` is false: tasks disabled in the config).
   */
  taskRuntime?: GatewayTaskRuntime;
  /**
   * Guards the config endpoints (admin only; without it they answer 403) and names the caller of the task routes
   * (any authenticated user; without it, the LangGraph server's authenticated user, else 401).
   */
  authorize?: GatewayAuthorize;
  logger?: Logger;
  /** Waiting for and breaking the sidecar file lock. */
  lock?: FileLockOptions;
  /** Fault injection for tests: runs before each step of a config write and may throw. */
  onWriteStep?: (step: WriteStep) => void | Promise<void>;
  /** Largest accepted request body (default 1 MiB). */
  maxBodyBytes?: number;
}

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
export const ADMIN_REQUIRED = "Admin privileges required to manage MCP configuration.";
export const AUTHENTICATION_REQUIRED = "Authentication required";
const CONFIG_OFF = "MCP configuration endpoints are disabled: no authorize hook is configured.";

/** A response the handlers choose: status and a `detail` line (names fields, never values). */
export class GatewayHttpError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 413 | 500 | 503,
    readonly detail: string,
  ) {
    super(detail);
    this.name = "GatewayHttpError";
  }
}

const PatchBodySchema = z.strictObject({
  server_name: z.string().min(1),
  enabled: z.boolean(),
});

/**
 * The HTTP API of SPEC §8 as a Hono app: `langgraph.json` `http.app` mounts it beside the LangGraph API.
 * Config endpoints (§8.1): GET/PUT/PATCH `/api/mcp/config`, POST `/api/mcp/cache/reset`.
 */
export function createGatewayApp(options: GatewayAppOptions = {}): Hono {
  const env = options.env ?? process.env;
  const logger = options.logger ?? consoleLogger;
  const file = new ConfigFile({
    configPath: options.configPath,
    env,
    cwd: options.cwd,
    lock: options.lock,
    onWriteStep: options.onWriteStep,
  });
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const app = new Hono();

  app.onError((err, c) => {
    if (err instanceof GatewayHttpError) return c.json({ detail: err.detail }, err.status);
    // The full texts name the config file and its lock: logged here, never answered.
    if (err instanceof ConfigLockTimeoutError) {
      logger.warn(`MCP gateway: ${err.message}`);
      return c.json({ detail: "Timed out waiting for the config file lock; another process is writing the config" }, 503);
    }
    if (err instanceof ConfigValidationError) {
      logger.error(`MCP gateway: ${err.message}`);
      return c.json({ detail: describeConfigIssues(err.issues) }, 500);
    }
    const code = (err as NodeJS.ErrnoException).code;
    logger.error(`MCP gateway: ${c.req.method} ${c.req.path} failed${code ? ` (${code})` : ""}`);
    const what = c.req.path.startsWith("/api/mcp/") ? "the MCP configuration request" : "the MCP task request";
    return c.json({ detail: `Failed to handle ${what}${code ? ` (${code})` : ""}` }, 500);
  });

  app.use("/api/mcp/*", async (c, next) => {
    if (options.authorize === undefined) throw new GatewayHttpError(403, CONFIG_OFF);
    const user = await options.authorize(c.req.raw);
    if (user === null) throw new GatewayHttpError(401, AUTHENTICATION_REQUIRED);
    if (!user.admin) throw new GatewayHttpError(403, ADMIN_REQUIRED);
    await next();
  });

  const limit = bodyLimit({
    maxSize: maxBodyBytes,
    onError: () => {
      throw new GatewayHttpError(413, `request body is larger than ${maxBodyBytes} bytes`);
    },
  });
  app.use("/api/mcp/config", async (c, next) => (c.req.method === "GET" ? next() : limit(c, next)));

  app.get("/api/mcp/config", async (c) => {
    const { raw } = await file.read();
    return c.json({ mcp_servers: maskServers(raw.mcpServers) });
  });

  app.put("/api/mcp/config", async (c) => {
    const body = await readJsonBody(c);
    const { field, servers } = serversOfPutBody(body);
    const written = await file.update((current) => {
      const restored = restoreOrReject(servers, current.mcpServers, field);
      assertValidServers(restored, field, env);
      for (const [name, server] of Object.entries(restored)) assertLaunchAllowed(name, server, env);
      return withServers(current, restored);
    });
    await resetToolkit(options.toolkit, logger);
    return c.json({ mcp_servers: maskServers(written.raw.mcpServers) });
  });

  app.patch("/api/mcp/config", async (c) => {
    const body = await readJsonBody(c);
    const parsed = PatchBodySchema.safeParse(body);
    if (!parsed.success) throw new GatewayHttpError(400, describeIssues(parsed.error.issues, []));
    const { server_name: name, enabled } = parsed.data;
    if (file.locate() === null) throw notFound(name);
    const written = await file.update((current) => {
      const servers = current.mcpServers;
      if (!isRecord(servers) || !Object.prototype.hasOwnProperty.call(servers, name) || !isRecord(servers[name])) throw notFound(name);
      const server = { ...servers[name], enabled };
      if (enabled) {
        const result = McpServerSchema.safeParse(validationView(server, env));
        if (!result.success) throw new GatewayHttpError(400, describeIssues(result.error.issues, ["mcpServers", name]));
        assertLaunchAllowed(name, server, env);
      }
      return withServers(current, replaceEntry(servers, name, server));
    });
    await resetToolkit(options.toolkit, logger);
    return c.json({ mcp_servers: maskServers(written.raw.mcpServers) });
  });

  app.post("/api/mcp/cache/reset", async (c) => {
    await resetToolkit(options.toolkit, logger);
    return c.json({ success: true, message: "MCP tools cache reset. Tools will reload on next use." });
  });

  registerTaskRoutes(app, options.taskRuntime, (c) => taskRouteUser(c, options.authorize), {
    fail(status, detail) {
      throw new GatewayHttpError(status, detail);
    },
  });
  return app;
}

interface LangGraphServerAuth {
  user?: { identity?: unknown; is_authenticated?: unknown };
}

/**
 * The caller of a task route: the `authorize` hook's user, else the LangGraph server's authenticated user. A hook
 * that knows only the admin (`MCP_HARNESS_ADMIN_TOKEN`) must not lock every other signed-in user out of their tasks.
 */
async function taskRouteUser(c: Context, authorize: GatewayAuthorize | undefined): Promise<string> {
  if (authorize !== undefined) {
    const user = await authorize(c.req.raw);
    if (user !== null && user.userId !== "") return user.userId;
  }
  // Set by the LangGraph API server's auth middleware, which runs before a mounted `http.app`.
  const auth = (c.var as Record<string, unknown>).auth as LangGraphServerAuth | undefined;
  const identity = auth?.user?.identity;
  if (typeof identity === "string" && identity !== "" && auth?.user?.is_authenticated !== false) return identity;
  throw new GatewayHttpError(401, AUTHENTICATION_REQUIRED);
}

async function resetToolkit(toolkit: GatewayToolkit | undefined, logger: Logger): Promise<void> {
  if (toolkit === undefined) return;
  try {
    await toolkit.reset();
  } catch (err) {
    // The write happened; a toolkit that cannot reset picks the change up through the content signature.
    logger.warn(`MCP gateway: toolkit reset failed: ${err instanceof Error ? err.name : "error"}`);
  }
}

/** The body as JSON; its size is bounded by the `bodyLimit` middleware, also for a body sent without a length. */
async function readJsonBody(c: Context): Promise<unknown> {
  const bytes = new Uint8Array(await c.req.arrayBuffer());
  try {
    return parseJsonBytes(bytes, "request body");
  } catch (err) {
    if (err instanceof ConfigJsonSyntaxError) {
      const where = err.line === null ? "" : ` at line ${err.line} column ${err.column}`;
      throw new GatewayHttpError(400, `request body is not valid JSON: ${err.reason}${where}`);
    }
    if (err instanceof ConfigValidationError) throw new GatewayHttpError(400, `request body: ${err.issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`);
    throw err;
  }
}

/** `{ "mcp_servers": {...} }` (the original API's name; `mcpServers` accepted too). */
function serversOfPutBody(body: unknown): { field: string; servers: Record<string, unknown> } {
  if (!isRecord(body)) throw new GatewayHttpError(400, "request body must be a JSON object with 'mcp_servers'");
  const field = Object.prototype.hasOwnProperty.call(body, "mcp_servers") ? "mcp_servers" : "mcpServers";
  const servers = Object.prototype.hasOwnProperty.call(body, field) ? body[field] : undefined;
  if (!isRecord(servers)) throw new GatewayHttpError(400, `${field}: expected an object of servers`);
  return { field, servers };
}

function restoreOrReject(servers: Record<string, unknown>, stored: unknown, field: string): Record<string, unknown> {
  try {
    return restoreMaskedServers(servers, stored, field);
  } catch (err) {
    if (err instanceof MaskedValueError) throw new GatewayHttpError(400, err.message);
    throw err;
  }
}

function assertValidServers(servers: Record<string, unknown>, field: string, env: NodeJS.ProcessEnv): void {
  const viewed = Object.fromEntries(Object.entries(servers).map(([name, server]) => [name, validationView(server, env)]));
  const result = ExtensionsConfigSchema.safeParse({ mcpServers: viewed });
  if (!result.success) throw new GatewayHttpError(400, describeIssues(result.error.issues, [], field));
}

/**
 * A server as the loader judges it (SPEC §2.2): an enabled one with its `$VAR`s resolved from this process's
 * environment, so `"session_init_timeout": "$TIMEOUT"` is the number it names. With a variable unset here (the loader
 * would not start the server) its scalar settings cannot be judged: the rest of it is. The file keeps what was written.
 */
function validationView(server: unknown, env: NodeJS.ProcessEnv): unknown {
  const lax = laxServer(server);
  if (!isRecord(lax) || lax.enabled === false) return lax;
  const { value, missing } = resolveEnvReferences(lax, env);
  return missing.length === 0 ? laxServer(value) : withoutSettings(lax);
}

/** Screened as written and as its `$VAR`s resolve here (a reference could hide a flag). */
function assertLaunchAllowed(name: string, server: unknown, env: NodeJS.ProcessEnv): void {
  if (!isRecord(server) || isDisabledServer(server)) return;
  const resolved = resolveEnvReferences(server, env).value as Record<string, unknown>;
  const reason = validateStdioLaunch(server, { name, env }) ?? validateStdioLaunch(resolved, { name, env });
  if (reason !== null) throw new GatewayHttpError(400, reason);
}

/** One line per issue, paths in the request's terms (`mcp_servers.github.args[1]: expected string`). */
function describeIssues(issues: readonly z.core.$ZodIssue[], prefix: readonly PropertyKey[], field?: string): string {
  const lines = issues.slice(0, 10).map((issue) => {
    const converted = toConfigIssue({ ...issue, path: [...prefix, ...issue.path] } as z.core.$ZodIssue);
    const path = field !== undefined && converted.path.startsWith("mcpServers") ? `${field}${converted.path.slice("mcpServers".length)}` : converted.path;
    return `${path}: ${converted.message}`;
  });
  const more = issues.length > 10 ? `; and ${issues.length - 10} more` : "";
  return `Invalid MCP configuration: ${lines.join("; ")}${more}`;
}

function notFound(name: string): GatewayHttpError {
  const shown = /^[A-Za-z0-9_.-]{1,64}$/.test(name) ? `'${name}'` : shownKey(name);
  return new GatewayHttpError(404, `MCP server ${shown} not found`);
}

/** The document with `mcpServers` replaced; every other top-level key kept, in place. */
function withServers(current: Record<string, unknown>, servers: Record<string, unknown>): Record<string, unknown> {
  const next: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(current)) define(next, key, key === "mcpServers" ? servers : value);
  if (!Object.prototype.hasOwnProperty.call(next, "mcpServers")) define(next, "mcpServers", servers);
  return next;
}

function replaceEntry(record: Record<string, unknown>, name: string, value: unknown): Record<string, unknown> {
  const next: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(record)) define(next, key, key === name ? value : item);
  return next;
}

function define(record: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
}

