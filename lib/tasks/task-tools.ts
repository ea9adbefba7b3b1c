/**
 * Task servers' tools as the agent sees them (SPEC §6.2, inventory §O 135–136): status and cancel tools are
 * hidden, and each submit tool is replaced by a wrapper with the same name and schema that persists the task and
 * returns the local task id at once. A toolset naming a tool the server does not list is a startup error: a task
 * tool is never exposed as a synchronous call.
 */
import { ToolMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { DynamicStructuredTool, ToolRuntime } from "@langchain/core/tools";
import { McpTaskConfigurationError, type McpTaskToolset } from "../config";
import {
  createHarnessTool,
  enabledTaskServers,
  McpToolCallError,
  resolveToolRuntime,
  toolCallIdOf,
  type DiscoveredTool,
  type McpToolRecord,
  type TaskToolsInput,
} from "../mcp";
import { isOwnText, ToolkitClosedError } from "../shared/errors";
import { runThreadId, runUserId, unusableRunId } from "../shared/identity";
import type { Logger } from "../shared/logger";
import { boundText } from "../shared/text";
import { TaskCallShortCircuitError } from "./caller";
import { McpTaskToolError, ORDINARY_MCP_TASK_DRIVER } from "./drivers/ordinary";
import { McpTaskProtocolError, TaskSubmitRequest, type DriverCallOptions } from "./model";
import { submitLeftRemoteTaskRunning } from "./service";
import { neutralizeUntrustedTags } from "./untrusted";
import type { TaskRecord } from "./store";
import { DuplicateMcpRemoteTaskError } from "./store";

const ROLES = ["submit_tool", "status_tool", "cancel_tool"] as const;
const SUBMIT_ERROR_MAX_CHARS = 500;

/** What the wrappers need of the task service. */
export interface TaskSubmitter {
  submit(driverName: string, request: TaskSubmitRequest, options?: DriverCallOptions): Promise<TaskRecord>;
}

/** The agent-visible answer of a submit: the local task only, never the remote id. */
export interface SubmittedTask {
  task_id: string;
  task_name: string;
  status: string;
  message: string;
}

export function submitContract(taskName: string): string {
  return (
    `Submitted as durable background task '${taskName}': returns a task ID immediately; the job runs in the background, ` +
    "its status is polled automatically, and the outcome is reported back into this conversation when it needs attention."
  );
}

/** Every raw tool a server's toolsets name, with the toolset and role. */
function roleTools(toolsets: readonly McpTaskToolset[]): Map<string, { toolset: McpTaskToolset; role: (typeof ROLES)[number] }> {
  const roles = new Map<string, { toolset: McpTaskToolset; role: (typeof ROLES)[number] }>();
  for (const toolset of toolsets) for (const role of ROLES) roles.set(toolset[role], { toolset, role });
  return roles;
}

function nonEmptyString(value: unknown): string | null {
  return typeof value === "string" && value !== "" ? value : null;
}

function runIdOf(runtime: ToolRuntime | undefined): string | null {
  const context = runtime?.context as Record<string, unknown> | undefined;
  const fromContext = typeof context === "object" && context !== null ? nonEmptyString(context.run_id) : null;
  return fromContext ?? nonEmptyString(runtime?.configurable?.run_id) ?? nonEmptyString((runtime as { runId?: unknown } | undefined)?.runId);
}

/** One line the model can act on; our own texts as they are, anything else only named (it may quote a server). */
function submitFailureText(err: unknown, taskName: string, logger: Logger): string {
  const prefix = `Background task '${taskName}' was not submitted`;
  if (err instanceof DuplicateMcpRemoteTaskError) return `${prefix}: the server returned a job that is already tracked`;
  const ours = [McpToolCallError, McpTaskProtocolError, McpTaskToolError, TaskCallShortCircuitError, RangeError];
  if (ours.some((type) => err instanceof type) || isOwnText(err)) {
    return `${prefix}: ${boundText((err as Error).message, SUBMIT_ERROR_MAX_CHARS)}`;
  }
  logger.error(`durable task submit failed (${taskName}): ${err instanceof Error ? err.name : typeof err}`);
  if (submitLeftRemoteTaskRunning(err)) {
    return `${prefix}: the task could not be stored, and the job it started on the server could not be cancelled; it may still be running there, untracked`;
  }
  return `${prefix}: the task could not be stored; nothing is running on the server`;
}

export class TaskToolWrapper {
  constructor(
    private readonly submitter: TaskSubmitter,
    private readonly logger: Logger,
  ) {}

  /** The agent-visible tools of one generation; throws when a toolset names a tool the server did not list. */
  prepare(input: TaskToolsInput): DynamicStructuredTool[] {
    const rolesByServer = new Map(
      enabledTaskServers(input.config).map((name) => [name, roleTools(input.config.mcpServers[name]!.task_toolsets)]),
    );
    this.checkToolsListed(input, rolesByServer);
    const out: DynamicStructuredTool[] = [];
    for (const discovered of input.tools) {
      const role = rolesByServer.get(discovered.spec.record.server)?.get(discovered.spec.record.rawName);
      if (!role) out.push(discovered.tool);
      else if (role.role === "submit_tool") out.push(this.wrapSubmit(discovered, role.toolset));
    }
    return out;
  }

  private checkToolsListed(input: TaskToolsInput, rolesByServer: ReadonlyMap<string, ReadonlyMap<string, unknown>>): void {
    const listed = new Map<string, Set<string>>();
    for (const { spec } of input.tools) {
      const names = listed.get(spec.record.server) ?? new Set<string>();
      names.add(spec.record.rawName);
      listed.set(spec.record.server, names);
    }
    const problems: string[] = [];
    for (const [server, roles] of rolesByServer) {
      const missing = [...roles.keys()]
        .filter((raw) => !listed.get(server)?.has(raw))
        .sort();
      if (missing.length === 0) continue;
      const failure = input.failures.get(server);
      problems.push(
        `MCP server '${server}' task_toolsets reference missing raw tool(s): ${missing.join(", ")}` +
          (failure ? ` (its discovery failed: ${boundText(failure, 300)})` : ""),
      );
    }
    if (problems.length > 0) throw new McpTaskConfigurationError(problems.join("; "));
  }

  private wrapSubmit(discovered: DiscoveredTool, toolset: McpTaskToolset): DynamicStructuredTool {
    const { spec } = discovered;
    // The operator's name, as every text that reaches the model shows it (SPEC §6.5).
    const description = `${spec.description}${spec.description ? "\n\n" : ""}${submitContract(neutralizeUntrustedTags(toolset.name))}`;
    const driverData = { submit_tool: toolset.submit_tool, status_tool: toolset.status_tool, cancel_tool: toolset.cancel_tool };
    return createHarnessTool({ ...spec, description }, (record, visibleName, args, config) =>
      this.submit(record, visibleName, args, config, toolset.name, driverData),
    );
  }

  private async submit(
    record: McpToolRecord,
    visibleName: string,
    args: Record<string, unknown>,
    config: RunnableConfig | undefined,
    taskName: string,
    driverData: Record<string, string>,
  ): Promise<unknown> {
    const runtime = resolveToolRuntime(config);
    const toolCallId = toolCallIdOf(runtime);
    const answer = (content: string, status: "success" | "error"): unknown => {
      if (toolCallId !== undefined) return new ToolMessage({ content, status, tool_call_id: toolCallId, name: visibleName });
      if (status === "error") throw new McpToolCallError(content);
      return content;
    };
    const shownName = neutralizeUntrustedTags(taskName);
    const unusable = unusableRunId(runtime);
    if (unusable !== undefined) return answer(`Background task '${shownName}' was not started: ${unusable}`, "error");
    const threadId = runThreadId(runtime);
    if (threadId === undefined) {
      return answer(`Background task '${shownName}' needs a conversation thread: run the agent with a thread_id`, "error");
    }
    let task: TaskRecord;
    try {
      const request = new TaskSubmitRequest({
        userId: runUserId(runtime) ?? "default",
        threadId,
        runId: runIdOf(runtime),
        toolCallId: toolCallId ?? null,
        serverName: record.server,
        taskName,
        arguments: args,
        driverData,
      });
      task = await this.submitter.submit(ORDINARY_MCP_TASK_DRIVER, request, { signal: runtime?.signal, runtime });
    } catch (err) {
      // A closed toolkit ends the run as it does for any tool: the submit may have reached the server, so no text
      // may say that nothing runs there.
      if (runtime?.signal?.aborted || err instanceof ToolkitClosedError) throw err;
      return answer(submitFailureText(err, shownName, this.logger), "error");
    }
    const submitted: SubmittedTask = {
      task_id: task.id,
      task_name: neutralizeUntrustedTags(task.task_name),
      status: task.status,
      message: "Task is running in the background.",
    };
    return answer(JSON.stringify(submitted), "success");
  }
}
