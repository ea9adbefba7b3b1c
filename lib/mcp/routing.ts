import type { McpRouting, McpServerConfig } from "../config";
import { getMcpRouting, type ToolWithMetadata } from "./metadata";

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

function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function joinKeywords(keywords: string[]): string {
  if (keywords.length <= 1) return keywords.join("");
  return `${keywords.slice(0, -1).join(", ")}, or ${keywords[keywords.length - 1]}`;
}

/**
 * The routing-hints prompt section: "" or a `<mcp_routing_hints>` block listing `prefer` tools that have
 * keywords, sorted by (-priority, name). A deferred tool's hint says to fetch it with `tool_search` first.
 */
export function renderRoutingHints(
  tools: readonly ToolWithMetadata[],
  deferred: Iterable<string> = [],
): string {
  const deferredNames = new Set(deferred);
  const hints = tools
    .map((tool) => ({ tool, routing: getMcpRouting(tool) }))
    .map(({ tool, routing }) => ({
      name: tool.name,
      routing,
      keywords: (routing?.keywords ?? []).map((k) => k.trim()).filter((k) => k.length > 0),
    }))
    .filter((h) => h.routing?.mode === "prefer" && h.keywords.length > 0)
    .sort((a, b) => (b.routing!.priority - a.routing!.priority) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (hints.length === 0) return "";
  const lines = ["<mcp_routing_hints>"];
  for (const hint of hints) {
    const name = escapeHtml(hint.name);
    lines.push(`When the user's request involves ${joinKeywords(hint.keywords.map(escapeHtml))}:`);
    lines.push(
      deferredNames.has(hint.name)
        ? `  use \`tool_search\` to fetch \`${name}\`, then prefer that MCP tool.`
        : `  prefer the \`${name}\` tool.`,
    );
  }
  lines.push("</mcp_routing_hints>");
  return lines.join("\n");
}
