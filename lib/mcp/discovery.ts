import { loadMcpTools } from "@langchain/mcp-adapters";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ListToolsResultSchema, ToolSchema, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { JSONSchema } from "@langchain/core/utils/json_schema";
import type { McpServerConfig } from "../config";
import type { HeaderMap } from "../shared/headers";
import { headerSecrets } from "../shared/header-secrets";
import { Redactor } from "../shared/redact";
import type { Logger } from "../shared/logger";
import { withCallSignal } from "../shared/abort";
import { DeadlineExceededError, secondsText, withDeadline } from "../shared/deadline";
import { messageWithCause } from "../shared/errors";
import { MAX_TIMER_MS } from "../shared/timers";
import { isConnectionClosed, isDroppedConnection, isExpiredSession, isExpiredWhileStarting, isGatewayProcessFailed, isLostCall, type SessionPool } from "../sessions";
import { boundText, escapeControls } from "../shared/text";
import { isUnauthorized } from "../shared/unauthorized";
import { shownToolName } from "./names";

export interface DiscoveredTool {
  /** As listed, scrubbed of the server's secrets (a definition is shown to the model). */
  definition: Tool;
  /** The output schema as listed, not scrubbed (a header value can be a word of it): checked against results, never shown. */
  outputSchema?: Tool["outputSchema"];
  /** The input schema simplified for chat models (refs resolved, combinators merged). */
  inputSchema: JSONSchema;
}

export interface ServerDiscovery {
  serverName: string;
  server: McpServerConfig;
  tools: DiscoveredTool[];
  /** Set when the server contributed nothing because it failed or timed out: the logged warning. */
  failure?: string;
  /** The same without the "Skipping MCP server" frame: "timed out after 2.0s", "fetch failed (…)". */
  reason?: string;
  /** The warnings for tools of a server that was not skipped but listed some that cannot be used (logged too). */
  toolWarnings?: string[];
}

const FAILURE_REASON_MAX_CHARS = 500;

export function initTimeoutMs(server: McpServerConfig): number | null {
  return server.session_init_timeout === null ? null : server.session_init_timeout * 1000;
}

/** A tool list longer than this many pages is not a tool list. */
export const MAX_TOOL_LIST_PAGES = 1000;

/** A listed tool the SDK's schema refuses (no name, an input schema that is not an object schema, …). */
export interface RefusedTool {
  /** Its name, when it has one. */
  name: string | undefined;
  /** 1-based, across all pages. */
  position: number;
  /** Where its definition first fails the schema (`inputSchema.type`), or "" for the definition as a whole. */
  field: string;
}

interface ToolListing {
  tools: Tool[];
  refused: RefusedTool[];
}

/**
 * Every page of `tools/list`. Each page has a signal of its own, tied to the discovery's deadline: the SDK leaves
 * a listener on the signal of each request it sends. The SDK's own 60 s request timeout is lifted: the deadline
 * (`session_init_timeout`, or none) is what bounds the listing.
 */
async function listAllTools(client: Client, signal: AbortSignal): Promise<ToolListing> {
  const listing: ToolListing = { tools: [], refused: [] };
  const cursors = new Set<string>();
  let cursor: string | undefined;
  for (let pages = 1; ; pages += 1) {
    cursor = await listPage(client, cursor, signal, listing);
    if (!cursor) return listing;
    if (cursors.has(cursor)) throw new Error(`the server sent the same tools/list cursor twice (after ${pages} pages)`);
    if (pages >= MAX_TOOL_LIST_PAGES) throw new Error(`the server's tool list did not end within ${MAX_TOOL_LIST_PAGES} pages`);
    cursors.add(cursor);
  }
}

/** A `tools/list` page read tool by tool: only the list itself and the cursor have to be well-formed. */
const LaxToolsPageSchema = z.looseObject({ tools: z.array(z.unknown()), nextCursor: z.string().optional() });

/** The SDK's result validation failed (a zod error), as opposed to the request or the server failing. */
function isSchemaError(err: unknown): boolean {
  return Array.isArray((err as { issues?: unknown })?.issues);
}

/**
 * One page into `listing`; returns its cursor. The SDK refuses a whole page for one malformed tool, hiding every
 * tool of the server: such a page is asked for again and its tools are checked one by one, the bad ones refused.
 */
async function listPage(client: Client, cursor: string | undefined, signal: AbortSignal, listing: ToolListing): Promise<string | undefined> {
  const params = cursor ? { cursor } : {};
  try {
    // Not `client.listTools()`: it would arm the SDK's output-schema checks on this one client only (OutputSchemas).
    const page = await withCallSignal(signal, (own) =>
      client.request({ method: "tools/list", params }, ListToolsResultSchema, { signal: own, timeout: MAX_TIMER_MS }),
    );
    listing.tools.push(...page.tools);
    return page.nextCursor;
  } catch (err) {
    if (!isSchemaError(err)) throw err;
  }
  const page = await withCallSignal(signal, (own) =>
    client.request({ method: "tools/list", params }, LaxToolsPageSchema, { signal: own, timeout: MAX_TIMER_MS }),
  );
  for (const raw of page.tools) {
    const position = listing.tools.length + listing.refused.length + 1;
    const parsed = ToolSchema.safeParse(raw);
    if (parsed.success) {
      listing.tools.push(parsed.data);
      continue;
    }
    const name = (raw as { name?: unknown } | null)?.name;
    listing.refused.push({ name: typeof name === "string" ? name : undefined, position, field: parsed.error.issues[0]?.path.join(".") ?? "" });
  }
  return page.nextCursor;
}

/**
 * The adapters' JSON-schema simplification, applied to tools we already listed: `loadMcpTools` gets a
 * stand-in client that answers `listTools` from memory, so there is one `tools/list` round trip. The copies are
 * named by position, so two tools a server lists under one name each get their own schema. A simplified schema
 * that lost a property the raw one declares (a `__proto__` field, which the simplification drops while keeping
 * it required) is not used: the raw schema is.
 */
async function simplifySchemas(serverName: string, tools: readonly Tool[]): Promise<(JSONSchema | undefined)[]> {
  const copies = tools.map((t, i) => ({ ...t, name: `t${i}`, inputSchema: structuredClone(t.inputSchema) }));
  const standIn = { listTools: async () => ({ tools: copies }) } as unknown as Client;
  const converted = await loadMcpTools(serverName, standIn, {
    throwOnLoadError: false,
    prefixToolNameWithServerName: false,
    additionalToolNamePrefix: "",
  });
  const byName = new Map(converted.map((t) => [t.name, t.schema as JSONSchema]));
  return tools.map((tool, i) => {
    const simplified = byName.get(`t${i}`);
    return simplified !== undefined && keepsProperties(tool.inputSchema, simplified) ? simplified : undefined;
  });
}

/** The SDK client's schema parsing drops a `__proto__` property while `required` still names it. */
function namesProtoField(tool: Tool): boolean {
  const required: unknown = tool.inputSchema.required;
  return Array.isArray(required) && required.includes("__proto__");
}

function keepsProperties(raw: Tool["inputSchema"], simplified: JSONSchema): boolean {
  const declared = raw.properties;
  if (typeof declared !== "object" || declared === null) return true;
  const kept = (simplified as { properties?: unknown }).properties;
  const keptProperties = typeof kept === "object" && kept !== null ? (kept as object) : {};
  return Object.keys(declared).every((name) => Object.prototype.hasOwnProperty.call(keptProperties, name));
}

/** What a discovery learnt besides the tools: the headers it sent and the tools it refused. */
export interface DiscoveryNotes {
  headers?: HeaderMap;
  refused?: RefusedTool[];
}

/** The server-level headers (static + OAuth) discovery connects with; resolving them may fetch a token. */
export type DiscoveryHeaders = (signal: AbortSignal) => Promise<HeaderMap>;

export interface DiscoveryTarget {
  serverName: string;
  server: McpServerConfig;
  headers: DiscoveryHeaders;
  /** The server's own secrets; with the headers sent, scrubbed from tool definitions and failure texts. */
  secrets: readonly string[];
  /**
   * The server refused `headers` with HTTP 401: their OAuth token is not used again. Whether `headers()` now gives
   * another one (absent: no token to renew).
   */
  rejected?: (headers: HeaderMap) => boolean;
}

/**
 * Connects (through the pool, so the session is kept for calls) and lists one server's tools. The whole of
 * it, token request included, runs under the server's `session_init_timeout`. Definitions are scrubbed of
 * the server's secrets: a description or schema that echoes a credential would reach every model request.
 */
export async function discoverServer(
  target: DiscoveryTarget,
  pool: SessionPool,
  seen: DiscoveryNotes = {},
): Promise<DiscoveredTool[]> {
  const { serverName, server } = target;
  const timeoutMs = initTimeoutMs(server);
  const listed = await withDeadline(async (signal) => {
    let headers = await target.headers(signal);
    seen.headers = headers;
    let expired = false;
    const listOnce = async () => {
      const lease = await pool.acquire(serverName, server, { headers, initTimeoutMs: timeoutMs, signal }).catch((err: unknown) => {
        // Forgotten between its initialize and the end of the handshake: a 404 on its id, not on `initialize`.
        expired = isExpiredWhileStarting(err);
        throw err;
      });
      try {
        return await listAllTools(lease.session.client, signal);
      } catch (err) {
        if (
          isExpiredSession(err, lease.session.client.transport) ||
          isGatewayProcessFailed(err, lease.session.client.transport) ||
          isLostCall(err) ||
          isDroppedConnection(err) ||
          (server.type === "sse" && isConnectionClosed(err))
        ) {
          pool.invalidate(lease.session);
          expired = true;
        }
        throw err;
      } finally {
        lease.release();
      }
    };
    // Listing is idempotent: a session the server forgot (HTTP 404 on its id, a listing whose stream ended
    // unanswered or whose connection was cut before its answer was read, an SSE session whose event stream ended:
    // it was closed with it; a gateway's session whose stdio process died) is re-initialized once, under the same
    // bound. A 404 to `initialize` itself (a wrong URL) is no expired session: it is not asked again. An OAuth token
    // the server refuses (HTTP 401) is replaced once, and the listing asked again.
    let reinitialized = false;
    let renewed = false;
    for (;;) {
      try {
        expired = false;
        return await listOnce();
      } catch (err) {
        if (expired && !reinitialized) {
          reinitialized = true;
          continue;
        }
        if (renewed || !isUnauthorized(err) || !target.rejected?.(headers)) throw err;
        renewed = true;
        headers = await target.headers(signal);
        seen.headers = headers;
      }
    }
  }, timeoutMs);
  seen.refused = listed.refused;
  const definitions = secretsOf(target, seen.headers).deep(listed.tools);
  const schemas = await simplifySchemas(serverName, definitions);
  return definitions.map((definition, i) => ({
    definition,
    inputSchema: schemas[i] ?? (definition.inputSchema as JSONSchema),
    ...(listed.tools[i].outputSchema ? { outputSchema: listed.tools[i].outputSchema } : {}),
  }));
}

function secretsOf(target: DiscoveryTarget, sent: HeaderMap | undefined): Redactor {
  return Redactor.of(sent ? [...target.secrets, ...headerSecrets(sent)] : target.secrets);
}

/**
 * Every server in parallel; a failing or hanging server contributes nothing and one warning. `onDone`
 * hears each server as soon as its discovery ends (for progress reports).
 */
export async function discoverAll(
  servers: readonly DiscoveryTarget[],
  pool: SessionPool,
  logger: Logger,
  onDone?: (discovery: ServerDiscovery) => void,
): Promise<ServerDiscovery[]> {
  return Promise.all(
    servers.map(async (target): Promise<ServerDiscovery> => {
      const discovery = await discoverOne(target, pool, logger);
      onDone?.(discovery);
      return discovery;
    }),
  );
}

/** The warning for a refused tool: its name and field come from the server, so both are scrubbed, escaped and cut. */
function refusedText(serverName: string, refused: RefusedTool, redactor: Redactor): string {
  const tool = refused.name === undefined ? `the tool listed at position ${refused.position}` : `MCP tool ${shownToolName(redactor.text(refused.name))}`;
  const where = refused.field === "" ? "" : ` (at ${shownToolName(redactor.text(refused.field))})`;
  return `Skipping ${tool} of server '${serverName}': its definition is not a valid MCP tool${where}; the server's other tools are kept`;
}

/** Refused tools named one by one up to this many; the rest of them are counted in one more warning. */
export const MAX_REFUSED_TOOL_WARNINGS = 20;

function refusedWarnings(serverName: string, refused: readonly RefusedTool[], redactor: Redactor): string[] {
  const warnings = refused.slice(0, MAX_REFUSED_TOOL_WARNINGS).map((tool) => refusedText(serverName, tool, redactor));
  const more = refused.length - MAX_REFUSED_TOOL_WARNINGS;
  if (more > 0) warnings.push(`Skipping ${more} more tools of server '${serverName}' whose definitions are not valid MCP tools`);
  return warnings;
}

async function discoverOne(target: DiscoveryTarget, pool: SessionPool, logger: Logger): Promise<ServerDiscovery> {
  const { serverName, server } = target;
  const seen: DiscoveryNotes = {};
  try {
    const discovered = await discoverServer(target, pool, seen);
    const warnings = refusedWarnings(serverName, seen.refused ?? [], secretsOf(target, seen.headers));
    const tools = discovered.filter((tool) => {
      if (!namesProtoField(tool.definition)) return true;
      warnings.push(
        `Dropping MCP tool ${shownToolName(tool.definition.name)} of server '${serverName}': its input schema requires a field ` +
          "named __proto__, which the MCP client drops from the schema, so no call could describe it",
      );
      return false;
    });
    for (const warning of warnings) logger.warn(warning);
    return warnings.length === 0 ? { serverName, server, tools } : { serverName, server, tools, toolWarnings: warnings };
  } catch (err) {
    let reason: string;
    let failure: string;
    if (err instanceof DeadlineExceededError) {
      const seconds = `${secondsText(err.timeoutMs)}s`;
      reason = `timed out after ${seconds}`;
      failure = `Skipping MCP server '${serverName}' after tool discovery timed out (${seconds})`;
    } else {
      // An HTTP error text can carry the server's response body, which may echo what was sent or the URL, and hold
      // line breaks or terminal controls.
      reason = boundText(escapeControls(secretsOf(target, seen.headers).text(messageWithCause(err))), FAILURE_REASON_MAX_CHARS);
      failure = `Skipping MCP server '${serverName}' after tool discovery failed: ${reason}`;
    }
    logger.warn(failure);
    await pool.closeServer(serverName);
    return { serverName, server, tools: [], failure, reason };
  }
}
