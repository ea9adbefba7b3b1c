/**
 * The seam between the toolkit and the durable task runtime (which lives above this folder): the toolkit hands
 * every loaded generation's tools to the runtime, which enforces the startup rules and wraps task tools.
 */
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { McpTaskConfigurationError, type ExtensionsConfig } from "../config";
import type { HarnessToolSpec } from "./tool";
import type { McpToolkit } from "./toolkit";

/** A tool as discovery produced it, with the spec it was built from (a wrapper keeps its name and schema). */
export interface DiscoveredTool {
  readonly spec: HarnessToolSpec;
  readonly tool: DynamicStructuredTool;
}

export interface TaskToolsInput {
  readonly config: ExtensionsConfig;
  readonly tools: readonly DiscoveredTool[];
  /** Servers that contributed no tools, with the reason. */
  readonly failures: ReadonlyMap<string, string>;
}

export interface ToolkitTaskHooks {
  /** Called once by the toolkit's constructor: the runtime's own MCP calls go through this toolkit. */
  attach(toolkit: McpToolkit): void;
  /**
   * Called with every loaded generation; returns the tools to hand out. Throws an `McpTaskConfigurationError`
   * when a startup rule is broken (then `getTools()` fails with it).
   */
  prepareTools(input: TaskToolsInput): DynamicStructuredTool[];
}

/** `'a', 'b'`: server names as error messages list them. */
export function quotedNames(names: readonly string[]): string {
  return names.map((name) => `'${name}'`).join(", ");
}

/**
 * The enabled task servers; throws when there are some while `mcpTasks.enabled` is false (task tools are never
 * exposed as synchronous calls).
 */
export function checkedTaskServers(config: ExtensionsConfig): string[] {
  const taskServers = enabledTaskServers(config);
  if (taskServers.length > 0 && !config.mcpTasks.enabled) {
    throw new McpTaskConfigurationError(
      `MCP task_toolsets are configured (${quotedNames(taskServers)}), so mcpTasks.enabled=true is required; ` +
        "task tools are never exposed as synchronous calls",
    );
  }
  return taskServers;
}

/** Enabled servers that declare task toolsets, sorted. */
export function enabledTaskServers(config: ExtensionsConfig): string[] {
  return Object.entries(config.mcpServers)
    .filter(([, server]) => server.enabled && server.task_toolsets.length > 0)
    .map(([name]) => name)
    .sort();
}
