import type { McpRouting, McpTransportType } from "../config";

/** Recorded on every harness tool at discovery; routing, sessions and tasks use it, never the visible name. */
export interface McpToolRecord {
  server: string;
  rawName: string;
  transport: McpTransportType;
}

/** The part of a LangChain tool these helpers read. */
export interface ToolWithMetadata {
  name: string;
  metadata?: Record<string, unknown>;
}

/**
 * Where a tool's routing came from: `"server"` when it is the server's `routing` unchanged (the tool shares
 * one server-level hint with its siblings), `"tool"` when a `tools.<raw>.routing` override changed it.
 */
export type McpRoutingScope = "server" | "tool";

/** The routing recorded on a harness tool: its effective routing and where that came from. */
export interface McpToolRouting extends McpRouting {
  scope: McpRoutingScope;
}

export const MCP_METADATA_KEY = "mcp";
export const MCP_ROUTING_METADATA_KEY = "mcp_routing";

export function getMcpToolRecord(tool: ToolWithMetadata): McpToolRecord | undefined {
  const value = tool.metadata?.[MCP_METADATA_KEY];
  if (!value || typeof value !== "object") return undefined;
  const record = value as Partial<McpToolRecord>;
  if (typeof record.server !== "string" || typeof record.rawName !== "string") return undefined;
  return record as McpToolRecord;
}

/** The effective routing of a harness tool, or undefined for non-MCP tools and mode "off". */
export function getMcpRouting(tool: ToolWithMetadata): McpToolRouting | undefined {
  if (!getMcpToolRecord(tool)) return undefined;
  const value = tool.metadata?.[MCP_ROUTING_METADATA_KEY];
  if (!value || typeof value !== "object") return undefined;
  const routing = value as Partial<McpToolRouting>;
  if (routing.mode !== "prefer" || typeof routing.priority !== "number" || !Array.isArray(routing.keywords)) return undefined;
  return { mode: routing.mode, priority: routing.priority, keywords: routing.keywords, scope: routing.scope === "server" ? "server" : "tool" };
}
