import type { CallbackManagerForToolRun } from "@langchain/core/callbacks/manager";
import type { RunnableConfig } from "@langchain/core/runnables";
import { DynamicStructuredTool } from "@langchain/core/tools";
import type { JSONSchema } from "@langchain/core/utils/json_schema";
import { MCP_METADATA_KEY, MCP_ROUTING_METADATA_KEY, type McpToolRecord, type McpToolRouting } from "./metadata";

export interface HarnessToolSpec {
  visibleName: string;
  description: string;
  inputSchema: JSONSchema;
  record: McpToolRecord;
  routing: McpToolRouting;
  annotations?: Record<string, unknown>;
}

/** What the toolkit does for one call: returns a ToolMessage/Command, or plain content outside a tool node. */
export type HarnessToolInvoker = (
  record: McpToolRecord,
  visibleName: string,
  args: Record<string, unknown>,
  config: RunnableConfig | undefined,
) => Promise<unknown>;

/**
 * One MCP tool as a LangChain tool. Its function receives the `ToolRuntime` (third argument) and hands
 * the call to the toolkit; `responseFormat` stays "content" so it may return a ToolMessage or a Command.
 */
export function createHarnessTool(spec: HarnessToolSpec, invoke: HarnessToolInvoker): DynamicStructuredTool {
  const metadata: Record<string, unknown> = { [MCP_METADATA_KEY]: { ...spec.record } };
  if (spec.routing.mode !== "off") metadata[MCP_ROUTING_METADATA_KEY] = { ...spec.routing, keywords: [...spec.routing.keywords] };
  if (spec.annotations) metadata.annotations = spec.annotations;
  return new DynamicStructuredTool({
    name: spec.visibleName,
    description: spec.description,
    schema: spec.inputSchema,
    metadata,
    func: (args: Record<string, unknown>, _runManager?: CallbackManagerForToolRun, config?: RunnableConfig) =>
      invoke(spec.record, spec.visibleName, args, config),
  });
}
