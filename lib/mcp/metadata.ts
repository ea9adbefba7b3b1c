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
export function getMcpRouting(tool: ToolWithMetadata): McpRouting | undefined {
  if (!getMcpToolRecord(tool)) return undefined;
  const value = tool.metadata?.[MCP_ROUTING_METADATA_KEY];
  if (!value || typeof value !== "object") return undefined;
  const routing = value as McpRouting;
  return routing.mode === "off" ? undefined : routing;
}
