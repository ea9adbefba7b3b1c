/** A row of `mcp_tasks` as the store hands it out, and the conversions between the two dialects' values. */
import type { NotificationStatus } from "../events";
import type { TaskStatus } from "../model";
import type { Dialect, Row } from "./connection";
import { isPlainObject } from "../../shared/plain-object";

export interface TaskRecord {
  id: string;
  user_id: string;
  thread_id: string;
  run_id: string | null;
  tool_call_id: string | null;
  server_name: string;
  driver_name: string;
  remote_task_id: string;
  task_name: string;
  status: TaskStatus;
  result: unknown;
  error: string | null;
  input_required: Record<string, unknown> | null;
  driver_data: Record<string, unknown>;
  notification_status: NotificationStatus;
  next_poll_at: Date | null;
  last_polled_at: Date | null;
  last_poll_error: string | null;
  poll_attempt_count: number;
  consecutive_poll_error_count: number;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  cancel_requested_at: Date | null;
  completed_at: Date | null;
  created_at: Date;
  updated_at: Date;
  result_preview: string | null;
  result_truncated: boolean;
  result_artifact: Record<string, string> | null;
  event_fingerprint: string | null;
  event_version: number;
  notified_version: number;
  dispatch_version: number | null;
  dispatch_attempt: number;
  dispatch_event: Record<string, unknown> | null;
  notification_run_id: string | null;
  notification_error: string | null;
  notification_attempt_count: number;
  next_notification_at: Date | null;
  notification_lease_owner: string | null;
  notification_lease_expires_at: Date | null;
  cancel_attempt_count: number;
  next_cancel_at: Date | null;
  last_cancel_error: string | null;
  /**
   * Where the remote id was issued: for a stdio task, the child process (session) that accepted it, whose job ids
   * may be numbered per process; '' for HTTP/SSE, whose ids are the server's own.
   */
  remote_scope: string;
  /**
   * When the calls deferred since were first deferred (see migration 0006): the polls, then, once a cancel is requested
   * (no poll runs after it), the cancels; null when the last call was not deferred.
   */
  poll_deferred_at: Date | null;
}

/** All 46 columns, in table order. */
export const TASK_COLUMNS = [
  "id",
  "user_id",
  "thread_id",
  "run_id",
  "tool_call_id",
  "server_name",
  "driver_name",
  "remote_task_id",
  "task_name",
  "status",
  "result",
  "error",
  "input_required",
  "driver_data",
  "notification_status",
  "next_poll_at",
  "last_polled_at",
  "last_poll_error",
  "poll_attempt_count",
  "consecutive_poll_error_count",
  "lease_owner",
  "lease_expires_at",
  "cancel_requested_at",
  "completed_at",
  "created_at",
  "updated_at",
  "result_preview",
  "result_truncated",
  "result_artifact",
  "event_fingerprint",
  "event_version",
  "notified_version",
  "dispatch_version",
  "dispatch_attempt",
  "dispatch_event",
  "notification_run_id",
  "notification_error",
  "notification_attempt_count",
  "next_notification_at",
  "notification_lease_owner",
  "notification_lease_expires_at",
  "cancel_attempt_count",
  "next_cancel_at",
  "last_cancel_error",
  "remote_scope",
  "poll_deferred_at",
] as const satisfies readonly (keyof TaskRecord)[];

const TIMESTAMP_COLUMNS = new Set<string>([
  "next_poll_at",
  "last_polled_at",
  "lease_expires_at",
  "cancel_requested_at",
  "completed_at",
  "created_at",
  "updated_at",
  "next_notification_at",
  "notification_lease_expires_at",
  "next_cancel_at",
  "poll_deferred_at",
]);
const JSON_COLUMNS = new Set<string>(["result", "input_required", "driver_data", "result_artifact", "dispatch_event"]);

/** A timestamp as a statement parameter: ISO-8601 UTC with milliseconds, the one form SQLite compares in order. */
export function dbTime(date: Date): string {
  return date.toISOString();
}

/**
 * PostgreSQL cannot store U+0000 in text (nor `\u0000` in JSON); SQLite would keep it. The store writes U+FFFD
 * in its place on both databases, in every string it writes (`TaskStore` passes every bound value through here).
 */
export function storedText(value: string): string {
  return value.includes("\u0000") ? value.replace(/\u0000/g, "\uFFFD") : value;
}

/**
 * `value` with U+0000 replaced in every string, object key included (plain objects and arrays; others as they
 * are). What holds none is returned as it is, not copied: every applied snapshot goes through here.
 */
export function storedValue<T>(value: T): T {
  if (typeof value === "string") return storedText(value) as T;
  if (Array.isArray(value)) {
    const items = value.map(storedValue);
    return (items.every((item, i) => item === value[i]) ? value : items) as T;
  }
  if (!isPlainObject(value)) return value;
  const entries = Object.entries(value).map(([key, item]): [string, unknown] => [storedText(key), storedValue(item)]);
  const unchanged = entries.every(([key, item]) => Object.hasOwn(value, key) && item === value[key]);
  return (unchanged ? value : Object.fromEntries(entries)) as T;
}

/** JSON text of a value for a JSON column, U+0000 replaced inside its strings and keys (see `storedText`). */
export function dbJson(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const text = JSON.stringify(value);
  // JSON.stringify writes U+0000 as the escape `\u0000`; only then is the value walked.
  return text.includes("\\u0000") ? JSON.stringify(storedValue(value)) : text;
}

function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(String(value));
}

export function toRecord(row: Row, dialect: Dialect): TaskRecord {
  const out: Record<string, unknown> = {};
  for (const column of TASK_COLUMNS) {
    const value = row[column];
    if (TIMESTAMP_COLUMNS.has(column)) out[column] = toDate(value);
    // pg parses JSON columns itself; SQLite hands back the text.
    else if (JSON_COLUMNS.has(column)) out[column] = dialect === "sqlite" && typeof value === "string" ? JSON.parse(value) : (value ?? null);
    else if (column === "result_truncated") out[column] = Boolean(value);
    else out[column] = value ?? null;
  }
  return out as unknown as TaskRecord;
}
