import type { RunnableConfig } from "@langchain/core/runnables";
import type { ToolRuntime } from "@langchain/core/tools";
import { getConfig } from "@langchain/langgraph";

function looksLikeToolRuntime(value: unknown): value is ToolRuntime {
  if (!value || typeof value !== "object") return false;
  const v = value as Partial<ToolRuntime>;
  return typeof v.toolCallId === "string" || v.toolCall !== undefined || "context" in v || "state" in v;
}

/**
 * The `ToolRuntime` a tool node injected (third argument of the tool function). Only when a tool runs
 * outside a tool node does it fall back to LangGraph's `getConfig()` for the surrounding run.
 */
export function resolveToolRuntime(config: RunnableConfig | undefined): ToolRuntime | undefined {
  if (looksLikeToolRuntime(config)) return config;
  try {
    const ambient = getConfig();
    if (!ambient) return config as ToolRuntime | undefined;
    return {
      ...ambient,
      ...(config ?? {}),
      context: ambient.context,
      store: ambient.store ?? null,
      writer: ambient.writer ?? null,
      state: undefined,
      toolCallId: config?.metadata?.tool_call_id ? String(config.metadata.tool_call_id) : "",
      config: (config ?? ambient) as ToolRuntime["config"],
    } as ToolRuntime;
  } catch {
    return config as ToolRuntime | undefined;
  }
}

export function toolCallIdOf(runtime: ToolRuntime | undefined): string | undefined {
  if (!runtime) return undefined;
  return runtime.toolCallId || runtime.toolCall?.id || undefined;
}
