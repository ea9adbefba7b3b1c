/**
 * The task routes of SPEC §8.4 (inventory §P 143–146): a thread's durable tasks for their owner, through an
 * allowlist of fields (never the remote id, the driver data or the server name), and cancellation that returns
 * once the request is stored. 503 while the task runtime is not running: a cancel is never acknowledged
 * without a worker to carry it out.
 */
import type { Context, Hono } from "hono";
import { cutCodePoints, McpTasksDisabledError, TASK_LIST_DEFAULT_LIMIT, TASK_LIST_MAX_LIMIT, type TaskRecord } from "../tasks";

/** What the routes need of a task runtime (`TaskRuntime` fits). */
export interface GatewayTaskRuntime {
  /**
   * Awaited by each request before it reads `running` and `enabled`: a runtime that reads its config lazily (the
   * LangGraph server's, imported in a plain process) reads it here, so its first 503 already says why.
   */
  ready?(): Promise<void>;
  readonly running: boolean;
  /** `false`: durable tasks are disabled in the config, and the 503 says so. */
  readonly enabled?: boolean;
  readonly settings: { readonly tracking_degraded_after_errors: number };
  readonly service: {
    listTasks(threadId: string, userId: string, opts: { limit?: number }): Promise<TaskRecord[]>;
    getTask(taskId: string, userId: string): Promise<TaskRecord | null>;
    cancelTask(taskId: string, threadId: string, userId: string): Promise<TaskRecord | null>;
  };
}

export const PUBLIC_ERROR_MAX_CHARS = 500;
const THREAD_ID = /^[A-Za-z0-9_-]{1,128}$/;
const TASK_ID_MAX_LENGTH = 64;
const NOT_FOUND = "MCP task not found";
const NOT_RUNNING = "MCP task service not available";
const DISABLED = `${NOT_RUNNING}: ${new McpTasksDisabledError().message}`;

export interface TaskRouteErrors {
  /** Throws the gateway's HTTP error with this status and detail. */
  fail(status: 400 | 401 | 404 | 503, detail: string): never;
}

function publicText(text: string | null): string | null {
  return text === null ? null : cutCodePoints(text, PUBLIC_ERROR_MAX_CHARS);
}

function iso(date: Date | null): string | null {
  return date === null ? null : date.toISOString();
}

/** The list item: the fields an owner may see about a task at a glance. */
export function publicTaskSummary(task: TaskRecord, degradedAfter: number) {
  return {
    task_id: task.id,
    task_name: task.task_name,
    status: task.status,
    created_at: iso(task.created_at),
    updated_at: iso(task.updated_at),
    error: publicText(task.error),
    tracking_degraded: task.consecutive_poll_error_count >= degradedAfter,
    cancel_requested: task.cancel_requested_at !== null,
  };
}

/** The detail view: the summary plus polling, cancellation, delivery and result fields. */
export function publicTaskDetail(task: TaskRecord, degradedAfter: number) {
  return {
    ...publicTaskSummary(task, degradedAfter),
    last_polled_at: iso(task.last_polled_at),
    last_poll_error: publicText(task.last_poll_error),
    last_cancel_error: publicText(task.last_cancel_error),
    cancel_attempt_count: task.cancel_attempt_count,
    notification_status: task.notification_status,
    notification_error: publicText(task.notification_error),
    notification_attempt_count: task.notification_attempt_count,
    result: task.result,
    result_preview: task.result_preview,
    result_truncated: task.result_truncated,
    result_artifact: task.result_artifact,
    input_required: task.input_required,
  };
}

/**
 * Registers the routes. `userOf` resolves the caller (the `authorize` hook, else the LangGraph server's
 * authenticated user) or fails with 401.
 */
export function registerTaskRoutes(
  app: Hono,
  runtime: GatewayTaskRuntime | undefined,
  userOf: (c: Context) => Promise<string>,
  errors: TaskRouteErrors,
): void {
  const scope = async (c: Context): Promise<{ runtime: GatewayTaskRuntime; userId: string; threadId: string }> => {
    const userId = await userOf(c);
    await runtime?.ready?.();
    if (runtime === undefined || !runtime.running) errors.fail(503, runtime?.enabled === false ? DISABLED : NOT_RUNNING);
    const threadId = c.req.param("threadId") ?? "";
    if (!THREAD_ID.test(threadId)) errors.fail(400, "thread_id must be 1 to 128 letters, digits, '_' or '-'");
    return { runtime, userId, threadId };
  };
  const taskIdOf = (c: Context): string => {
    const taskId = c.req.param("taskId") ?? "";
    if (taskId.length > TASK_ID_MAX_LENGTH) errors.fail(404, NOT_FOUND);
    return taskId;
  };

  app.get("/api/threads/:threadId/mcp-tasks", async (c) => {
    const s = await scope(c);
    const raw = c.req.query("limit");
    const limit = raw === undefined ? TASK_LIST_DEFAULT_LIMIT : Number(raw);
    if (!Number.isInteger(limit) || limit < 1 || limit > TASK_LIST_MAX_LIMIT) {
      errors.fail(400, `limit must be an integer from 1 to ${TASK_LIST_MAX_LIMIT}`);
    }
    const tasks = await s.runtime.service.listTasks(s.threadId, s.userId, { limit });
    const degradedAfter = s.runtime.settings.tracking_degraded_after_errors;
    return c.json(tasks.map((task) => publicTaskSummary(task, degradedAfter)));
  });

  app.get("/api/threads/:threadId/mcp-tasks/:taskId", async (c) => {
    const s = await scope(c);
    const task = await s.runtime.service.getTask(taskIdOf(c), s.userId);
    if (task === null || task.thread_id !== s.threadId) errors.fail(404, NOT_FOUND);
    return c.json(publicTaskDetail(task, s.runtime.settings.tracking_degraded_after_errors));
  });

  app.post("/api/threads/:threadId/mcp-tasks/:taskId/cancel", async (c) => {
    const s = await scope(c);
    // Scoped by user and thread in the store: another user's or thread's task is simply not found.
    const task = await s.runtime.service.cancelTask(taskIdOf(c), s.threadId, s.userId);
    if (task === null) errors.fail(404, NOT_FOUND);
    return c.json(publicTaskDetail(task, s.runtime.settings.tracking_degraded_after_errors));
  });
}
