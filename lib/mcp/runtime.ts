import type { RunnableConfig } from "@langchain/core/runnables";
import type { ToolRuntime } from "@langchain/core/tools";
import { getConfig } from "@langchain/langgraph";

/**
 * The `ToolRuntime` a tool node injected (third argument of the tool function). A tool invoked with
 * plain args inside a graph node still gets the run's context, store and writer here: core's
 * `ensureConfig` merges the ambient LangGraph config into it. Only a caller that passes no config at all
 * falls back to LangGraph's `getConfig()` (undefined outside a run).
 */
export function resolveToolRuntime(config: RunnableConfig | undefined): ToolRuntime | undefined {
  const source: RunnableConfig | undefined = config ?? getConfig();
  return source as ToolRuntime | undefined;
}

export function toolCallIdOf(runtime: ToolRuntime | undefined): string | undefined {
  if (!runtime) return undefined;
  return runtime.toolCallId || runtime.toolCall?.id || undefined;
}
