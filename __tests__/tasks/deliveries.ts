/** A delivery of a completed task's event, as the service hands it to a notifier; tests override what they need. */
import type { TaskDelivery, TaskEvent } from "../../lib/tasks";

export type DeliveryOverrides = Partial<Omit<TaskDelivery, "event">> & { event?: Partial<TaskEvent> };

export function taskDelivery(overrides: DeliveryOverrides = {}): TaskDelivery {
  const { event, ...fields } = overrides;
  const taskId = fields.taskId ?? "mcp-task-1";
  return {
    taskId,
    userId: "ann",
    threadId: "th",
    runId: null,
    dispatchVersion: 1,
    dispatchAttempt: 0,
    ...fields,
    event: {
      task_id: taskId,
      task_name: "build",
      status: "completed",
      result: { ok: true },
      result_preview: null,
      result_truncated: false,
      result_artifact: null,
      error: null,
      input_required: null,
      last_poll_error: null,
      tracking_degraded: false,
      ...event,
    },
  };
}
