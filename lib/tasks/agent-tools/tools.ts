/**
 * The agent's own tools for its background tasks (SPEC §7, inventory §O 137): list the thread's tasks, and
 * request a cancel by task id or name. Both act for the run's user on the run's thread; a cancel only records the
 * request, the worker performs the remote cancel. Task names and errors are neutralised before the model sees them.
 */
import { tool, type DynamicStructuredTool, type ToolRuntime } from "@langchain/core/tools";
import { z } from "zod";
import { runThreadId, runUserId, unusableRunId } from "../../shared/identity";
import { AmbiguousMcpTaskError, McpTaskLookupError } from "../service";
import type { TaskRecord } from "../store";
import { neutralizeUntrustedTags } from "../untrusted";

export const LIST_BACKGROUND_TASKS_TOOL = "list_background_tasks";
export const CANCEL_BACKGROUND_TASK_TOOL = "cancel_background_task";
/** Rows `list_background_tasks` returns. */
export const LIST_BACKGROUND_TASKS_LIMIT = 20;
const NO_THREAD = "The current thread could not be resolved.";
const CANCEL_REQUESTED =
  "Cancellation requested. The background worker cancels the task on its server and keeps retrying safely if the server is temporarily unavailable.";

/** What the tools need of the task service (`TaskRuntime.service`). */
export interface BackgroundTaskService {
  listTasks(threadId: string, userId: string, opts?: { limit?: number; activeOnly?: boolean }): Promise<TaskRecord[]>;
  cancelMatchingTask(threadId: string, userId: string, task?: string): Promise<TaskRecord>;
}

/** A task as the agent sees it: no remote id, server or driver data. */
export interface BackgroundTaskView {
  task_id: string;
  task_name: string;
  status: string;
  created_at: string;
  updated_at: string;
  error: string | null;
  cancel_requested: boolean;
}

export function backgroundTaskView(record: TaskRecord): BackgroundTaskView {
  return {
    task_id: record.id,
    task_name: neutralizeUntrustedTags(record.task_name),
    status: record.status,
    created_at: record.created_at.toISOString(),
    updated_at: record.updated_at.toISOString(),
    error: record.error === null ? null : neutralizeUntrustedTags(record.error),
    cancel_requested: record.cancel_requested_at !== null,
  };
}

/** The run's user (as the submit wrapper resolves it) and thread; or why neither can be told. */
function scope(runtime: ToolRuntime | undefined): { userId: string; threadId: string | undefined } | { refused: string } {
  const refused = unusableRunId(runtime);
  if (refused !== undefined) return { refused };
  return { userId: runUserId(runtime) ?? "default", threadId: runThreadId(runtime) };
}

/** `list_background_tasks` and `cancel_background_task` over `runtime.service` (a `TaskRuntime`). */
export function createBackgroundTaskTools(runtime: { service: BackgroundTaskService }): DynamicStructuredTool[] {
  const { service } = runtime;
  const list = tool(
    async ({ active_only }, config: ToolRuntime) => {
      const run = scope(config);
      if ("refused" in run) return JSON.stringify({ tasks: [], message: run.refused });
      const { userId, threadId } = run;
      if (threadId === undefined) return JSON.stringify({ tasks: [], message: NO_THREAD });
      const rows = await service.listTasks(threadId, userId, { limit: LIST_BACKGROUND_TASKS_LIMIT, activeOnly: active_only ?? false });
      return JSON.stringify({ tasks: rows.map(backgroundTaskView), count: rows.length });
    },
    {
      name: LIST_BACKGROUND_TASKS_TOOL,
      description:
        "List the background tasks started in this conversation (newest first, up to 20): task_id, task_name, status, " +
        "timestamps, error and whether a cancel was requested. Set active_only to list only tasks still running.",
      schema: z.object({ active_only: z.boolean().optional().describe("Only tasks that are still running") }),
    },
  );
  const cancel = tool(
    async ({ task }, config: ToolRuntime) => {
      const run = scope(config);
      if ("refused" in run) return JSON.stringify({ cancelled: false, message: run.refused });
      const { userId, threadId } = run;
      if (threadId === undefined) return JSON.stringify({ cancelled: false, message: NO_THREAD });
      try {
        const row = await service.cancelMatchingTask(threadId, userId, task);
        return JSON.stringify({ cancelled: row.status === "cancelled", task: backgroundTaskView(row), message: CANCEL_REQUESTED });
      } catch (err) {
        if (err instanceof McpTaskLookupError || err instanceof AmbiguousMcpTaskError) {
          return JSON.stringify({ cancelled: false, message: err.message });
        }
        throw err;
      }
    },
    {
      name: CANCEL_BACKGROUND_TASK_TOOL,
      description:
        "Cancel a background task of this conversation that is still running, by its task_id or task_name. Without " +
        "`task`, cancels the only running task. The cancel is carried out in the background; the outcome is reported " +
        "back into this conversation.",
      schema: z.object({ task: z.string().optional().describe("The task_id or task_name of the task to cancel") }),
    },
  );
  return [list, cancel];
}
