import type { McpRouting, McpServerConfig } from "../config";
import { getMcpRouting, getMcpToolRecord, type McpToolRouting, type ToolWithMetadata } from "./metadata";

/** Server routing, with the fields a `tools.<raw>.routing` override sets replacing the server's. */
export function resolveEffectiveRouting(server: McpServerConfig, rawName: string): McpRouting {
  const base: McpRouting = { ...server.routing, keywords: [...server.routing.keywords] };
  const override = server.tools[rawName]?.routing;
  if (!override) return base;
  return {
    mode: override.mode ?? base.mode,
    priority: override.priority ?? base.priority,
    keywords: override.keywords ? [...override.keywords] : base.keywords,
  };
}

function sameRouting(a: McpRouting, b: McpRouting): boolean {
  return a.mode === b.mode && a.priority === b.priority && a.keywords.length === b.keywords.length && a.keywords.every((k, i) => k === b.keywords[i]);
}

/**
 * The effective routing of one tool and its scope: `"server"` while it equals the server's routing (an
 * override that changes nothing included), `"tool"` once a `tools.<raw>.routing` override changed it.
 */
export function resolveToolRouting(server: McpServerConfig, rawName: string): McpToolRouting {
  const routing = resolveEffectiveRouting(server, rawName);
  return { ...routing, scope: sameRouting(routing, server.routing) ? "server" : "tool" };
}

function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function joinKeywords(keywords: string[]): string {
  if (keywords.length <= 1) return keywords.join("");
  return `${keywords.slice(0, -1).join(", ")}, or ${keywords[keywords.length - 1]}`;
}

const quoteNames = (names: readonly string[]) => names.map((n) => `\`${escapeHtml(n)}\``).join(", ");

interface Hint {
  /** The sort name: the server's name for a server-level hint, the tool's visible name otherwise. */
  name: string;
  /** Set for a server-level hint. */
  server?: string;
  priority: number;
  keywords: string[];
  /** Visible tool names, sorted. */
  tools: string[];
}

/**
 * One hint per server for the tools that carry the server's routing, one per tool for tools whose
 * `tools.<raw>.routing` changed it; only `prefer` routing with keywords.
 */
function collectHints(tools: readonly ToolWithMetadata[]): Hint[] {
  const hints: Hint[] = [];
  const byServer = new Map<string, Hint>();
  for (const tool of tools) {
    const routing = getMcpRouting(tool);
    const record = getMcpToolRecord(tool);
    if (!routing || !record) continue;
    const keywords = routing.keywords.map((k) => k.trim()).filter((k) => k.length > 0);
    if (keywords.length === 0) continue;
    if (routing.scope === "tool") {
      hints.push({ name: tool.name, priority: routing.priority, keywords, tools: [tool.name] });
      continue;
    }
    const existing = byServer.get(record.server);
    if (existing) {
      existing.tools.push(tool.name);
      continue;
    }
    const hint: Hint = { name: record.server, server: record.server, priority: routing.priority, keywords, tools: [tool.name] };
    byServer.set(record.server, hint);
    hints.push(hint);
  }
  for (const hint of hints) hint.tools.sort();
  const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return hints.sort((a, b) => b.priority - a.priority || compare(a.name, b.name));
}

function renderAdvice(hint: Hint, deferred: ReadonlySet<string>): string[] {
  const toFetch = hint.tools.filter((t) => deferred.has(t));
  if (hint.server === undefined) {
    const name = quoteNames(hint.tools);
    return [toFetch.length > 0 ? `  use \`tool_search\` to fetch ${name}, then prefer that MCP tool.` : `  prefer the ${name} tool.`];
  }
  const noun = hint.tools.length === 1 ? "tool" : "tools";
  const lines = [`  prefer the ${noun} of the MCP server \`${escapeHtml(hint.server)}\`: ${quoteNames(hint.tools)}.`];
  if (toFetch.length > 0) lines.push(`  use \`tool_search\` to fetch ${quoteNames(toFetch)} first.`);
  return lines;
}

/**
 * The routing-hints prompt section (SPEC §3.5): "" or a `<mcp_routing_hints>` block of `prefer` routing
 * with keywords, sorted by (-priority, name). Tools that carry their server's routing share one hint naming
 * them; a tool whose per-tool routing changed it gets its own. A deferred tool's hint says to fetch it with
 * `tool_search` first.
 */
export function renderRoutingHints(
  tools: readonly ToolWithMetadata[],
  deferred: Iterable<string> = [],
): string {
  const deferredNames = new Set(deferred);
  const hints = collectHints(tools);
  if (hints.length === 0) return "";
  const lines = ["<mcp_routing_hints>"];
  for (const hint of hints) {
    lines.push(`When the user's request involves ${joinKeywords(hint.keywords.map(escapeHtml))}:`);
    lines.push(...renderAdvice(hint, deferredNames));
  }
  lines.push("</mcp_routing_hints>");
  return lines.join("\n");
}
