/**
 * The toolkit's task hook for commands that only list or check tools (`tools`, `check`): the runtime's own
 * `TaskToolWrapper` applies the startup rules and the agent's view (status/cancel hidden, submit wrapped), but
 * no store is opened and nothing is ever submitted.
 */
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createMcpToolkit, type McpToolkit, type McpToolRecord, type TaskToolsInput, type ToolkitTaskHooks } from "../mcp";
import type { Logger } from "../shared/logger";
import { TaskToolWrapper, type TaskSubmitter } from "../tasks";
import type { CliIo } from "./io";

const NEVER_SUBMITS: TaskSubmitter = {
  submit: () => Promise.reject(new Error("the mcp-harness CLI lists task tools; it never submits tasks")),
};

function toolKey(server: string, rawName: string): string {
  return `${server}\u0000${rawName}`;
}

export class TaskListingHooks implements ToolkitTaskHooks {
  readonly #wrapper: TaskToolWrapper;
  /** Submit tools of the last prepared generation → their toolset's name. */
  #submitTools = new Map<string, string>();

  constructor(logger: Logger) {
    this.#wrapper = new TaskToolWrapper(NEVER_SUBMITS, logger);
  }

  attach(): void {}

  prepareTools(input: TaskToolsInput): DynamicStructuredTool[] {
    const tools = this.#wrapper.prepare(input);
    const submitTools = new Map<string, string>();
    for (const [server, config] of Object.entries(input.config.mcpServers)) {
      for (const toolset of config.task_toolsets) submitTools.set(toolKey(server, toolset.submit_tool), toolset.name);
    }
    this.#submitTools = submitTools;
    return tools;
  }

  /** The toolset a listed tool submits tasks of, or `null` for an ordinary tool. */
  taskOf(record: McpToolRecord): string | null {
    return this.#submitTools.get(toolKey(record.server, record.rawName)) ?? null;
  }
}

/** A toolkit on the CLI's config whose task tools are listed as an agent would get them. */
export function listingToolkit(configPath: string | null, io: CliIo, logger: Logger): { toolkit: McpToolkit; tasks: TaskListingHooks } {
  const tasks = new TaskListingHooks(logger);
  const toolkit = createMcpToolkit({ configPath: configPath ?? undefined, env: io.env, cwd: io.cwd, logger, taskRuntime: tasks });
  return { toolkit, tasks };
}
