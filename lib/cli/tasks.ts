import {
  openTaskStore,
  TASK_LIST_DEFAULT_LIMIT,
  TASK_LIST_MAX_LIMIT,
  TaskStoreConfigError,
  TERMINAL_TASK_STATUSES,
  type TaskRecord,
  type TaskStore,
} from "../tasks";
import { parseArgs, UsageError } from "./args";
import type { CliIo } from "./io";
import { escapeControls } from "../shared/text";
import { renderTable } from "./table";

/** What the CLI shows of a task: never its remote id, driver data or server (SPEC §8.4's rule, kept here too). */
export interface TaskView {
  task_id: string;
  task_name: string;
  status: string;
  user_id: string;
  thread_id: string;
  created_at: string;
  updated_at: string;
  completed_at: string | null;
  cancel_requested: boolean;
  error: string | null;
  result: unknown;
  result_preview: string | null;
  result_truncated: boolean;
  input_required: Record<string, unknown> | null;
  notification_status: string;
}

export function taskView(record: TaskRecord): TaskView {
  return {
    task_id: record.id,
    task_name: record.task_name,
    status: record.status,
    user_id: record.user_id,
    thread_id: record.thread_id,
    created_at: record.created_at.toISOString(),
    updated_at: record.updated_at.toISOString(),
    completed_at: record.completed_at?.toISOString() ?? null,
    cancel_requested: record.cancel_requested_at !== null,
    error: record.error,
    result: record.result ?? null,
    result_preview: record.result_preview,
    result_truncated: record.result_truncated,
    input_required: record.input_required,
    notification_status: record.notification_status,
  };
}

function required(values: ReadonlyMap<string, string>, name: string, sub: string): string {
  const value = values.get(name)?.trim();
  if (!value) throw new UsageError(`tasks ${sub} needs --${name} <id>`);
  return value;
}

function parseLimit(text: string | undefined): number {
  if (text === undefined) return TASK_LIST_DEFAULT_LIMIT;
  const limit = Number(text);
  if (!Number.isInteger(limit) || limit < 1 || limit > TASK_LIST_MAX_LIMIT) throw new UsageError(`--limit must be an integer from 1 to ${TASK_LIST_MAX_LIMIT}`);
  return limit;
}

function showLines(view: TaskView): string {
  const rows = Object.entries(view).map(([key, value]) => [key, typeof value === "string" ? value : JSON.stringify(value)]);
  return renderTable(["field", "value"], rows);
}

/**
 * `tasks list|show|cancel`, on the store of `--database <url>` or `MCP_HARNESS_DATABASE_URL`, scoped to one user
 * (and thread): list a thread's tasks, show one, or request its cancellation (only the fence is persisted; a
 * running worker performs the remote cancel).
 */
export async function tasksCommand(args: readonly string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  const options = ["user", "thread", "limit", "database"];
  if (sub !== "list" && sub !== "show" && sub !== "cancel") {
    throw new UsageError(sub === undefined ? "tasks needs a subcommand: list, show or cancel" : `unknown tasks subcommand '${sub}'`);
  }
  const { positional, flags, values } = parseArgs(rest, sub === "list" ? ["json", "active"] : ["json"], sub === "list" ? 0 : 1, options);
  const json = flags.has("json");
  const user = required(values, "user", sub);
  const thread = sub === "show" ? values.get("thread")?.trim() || undefined : required(values, "thread", sub);
  const taskId = sub === "list" ? undefined : positional[0];
  if (sub !== "list" && !taskId) throw new UsageError(`tasks ${sub} needs a task id`);
  const limit = parseLimit(values.get("limit"));

  let store: TaskStore;
  try {
    // Only an existing store: run in the wrong folder, this must not create an empty one and answer "no tasks".
    store = await openTaskStore({ url: values.get("database"), env: io.env, cwd: io.cwd, mustExist: true, migrate: "verify" });
  } catch (err) {
    if (!(err instanceof TaskStoreConfigError)) throw err;
    io.err(`mcp-harness tasks: ${err.message}`);
    return 1;
  }
  try {
    if (sub === "list") {
      const views = (await store.listByThread(thread!, user, { limit, activeOnly: flags.has("active") })).map(taskView);
      if (json) io.out(JSON.stringify({ tasks: views, count: views.length }, null, 2));
      else {
        io.out(
          renderTable(
            ["task id", "name", "status", "updated", "cancel", "notification"],
            views.map((v) => [v.task_id, v.task_name, v.status, v.updated_at, v.cancel_requested ? "requested" : "-", v.notification_status]),
          ),
        );
      }
      return 0;
    }
    const found = sub === "show" ? await store.get(taskId!, user) : await store.requestCancel(taskId!, user, thread!);
    const record = found && (thread === undefined || found.thread_id === thread) ? found : null;
    if (!record) {
      const scope = thread === undefined ? `user '${user}'` : `user '${user}' on thread '${thread}'`;
      if (json) io.out(JSON.stringify({ ok: false, error: `no task '${taskId}' for ${scope}` }, null, 2));
      else io.err(`mcp-harness tasks ${sub}: no task '${taskId}' for ${scope}`);
      return 1;
    }
    const view = taskView(record);
    // A finished row keeps the fence of an earlier request; this call requested nothing.
    const requested = view.cancel_requested && !TERMINAL_TASK_STATUSES.has(record.status);
    if (json) io.out(JSON.stringify(sub === "show" ? view : { ok: true, cancel_requested: requested, task: view }, null, 2));
    else if (sub === "show") io.out(showLines(view));
    else {
      const task = `${escapeControls(view.task_id)} (${escapeControls(view.task_name)}`;
      io.out(
        requested
          ? `cancellation of ${task}, ${view.status}) requested; a running worker cancels it remotely`
          : `${task}) is already ${view.status}; nothing to cancel`,
      );
    }
    return 0;
  } finally {
    await store.close();
  }
}
