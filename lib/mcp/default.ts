import type { DynamicStructuredTool } from "@langchain/core/tools";
import { McpToolkit } from "./toolkit";

let defaultToolkit: McpToolkit | null = null;

/** The process-wide toolkit (config from the environment), for graphs that LangGraph Studio loads. */
export function getDefaultMcpToolkit(): McpToolkit {
  defaultToolkit ??= new McpToolkit();
  return defaultToolkit;
}

export function getCachedMcpTools(): Promise<DynamicStructuredTool[]> {
  return getDefaultMcpToolkit().getTools();
}

export async function resetMcpToolsCache(): Promise<void> {
  await defaultToolkit?.reset();
}
