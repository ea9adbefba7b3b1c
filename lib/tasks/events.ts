/**
 * The attention-relevant event of a task (inventory §N 121) and its fingerprint. A change of fingerprint is
 * what bumps `event_version` and queues a notification.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../shared/canonical-json";
import { ATTENTION_TASK_STATUSES, type TaskStatus } from "./model";

export const NotificationStatus = {
  NONE: "none",
  PENDING: "pending",
  CLAIMED: "claimed",
  DISPATCHED: "dispatched",
  RETRY: "retry",
  DELIVERED: "delivered",
  DEAD_LETTER: "dead_letter",
} as const;
export type NotificationStatus = (typeof NotificationStatus)[keyof typeof NotificationStatus];

/** Statuses during which a delivery is under way: a newer event does not overwrite the frozen snapshot. */
export const IN_FLIGHT_NOTIFICATION_STATUSES: readonly NotificationStatus[] = ["claimed", "dispatched", "retry"];
/** Statuses the notification worker picks up. */
export const CLAIMABLE_NOTIFICATION_STATUSES: readonly NotificationStatus[] = ["pending", "claimed", "retry", "dispatched"];

/** What a row and the event it raises share. */
interface EventFields {
  task_name: string;
  status: TaskStatus;
  result: unknown;
  result_preview: string | null;
  result_truncated: boolean;
  result_artifact: Record<string, string> | null;
  error: string | null;
  input_required: Record<string, unknown> | null;
  last_poll_error: string | null;
}

export interface TaskEvent extends EventFields {
  task_id: string;
  tracking_degraded: boolean;
}

export interface EventSource extends EventFields {
  id: string;
  consecutive_poll_error_count: number;
}

/** The event a row describes, or null when nothing about it needs anyone's attention. */
export function notificationEvent(row: EventSource, trackingDegradedAfterErrors: number): TaskEvent | null {
  const degraded = row.consecutive_poll_error_count >= trackingDegradedAfterErrors;
  if (!ATTENTION_TASK_STATUSES.has(row.status) && !degraded) return null;
  return {
    task_id: row.id,
    task_name: row.task_name,
    status: row.status,
    result: row.result,
    result_preview: row.result_preview,
    result_truncated: Boolean(row.result_truncated),
    result_artifact: row.result_artifact,
    error: row.error,
    input_required: row.input_required,
    tracking_degraded: degraded,
    last_poll_error: degraded ? row.last_poll_error : null,
  };
}

/** sha256 hex (64 characters) of the canonical JSON of the event. */
export function eventFingerprint(event: TaskEvent): string {
  return createHash("sha256").update(canonicalJson(event)).digest("hex");
}

/** The idempotency key of one delivery attempt of one event version. */
export function notificationIdempotencyKey(taskId: string, dispatchVersion: number, dispatchAttempt: number): string {
  return `mcp-task:${taskId}:${dispatchVersion}:${dispatchAttempt}`;
}
