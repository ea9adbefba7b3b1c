import { addColumnIfMissing, type MigrationContext, type TaskStoreMigration } from "./types";

/**
 * The notification state machine and the cancellation lease (columns 30–44) with their due indexes. Rows
 * that were already terminal and waiting for a notification get their first event version.
 */
export const taskNotifications: TaskStoreMigration = {
  name: "0003_task_notifications",
  async up(ctx: MigrationContext) {
    const { tx, types } = ctx;
    const columns: [string, string][] = [
      ["event_fingerprint", "VARCHAR(64)"],
      ["event_version", "INTEGER NOT NULL DEFAULT 0"],
      ["notified_version", "INTEGER NOT NULL DEFAULT 0"],
      ["dispatch_version", "INTEGER"],
      ["dispatch_attempt", "INTEGER NOT NULL DEFAULT 0"],
      ["dispatch_event", types.json],
      ["notification_run_id", "VARCHAR(64)"],
      ["notification_error", "TEXT"],
      ["notification_attempt_count", "INTEGER NOT NULL DEFAULT 0"],
      ["next_notification_at", types.timestamp],
      ["notification_lease_owner", "VARCHAR(128)"],
      ["notification_lease_expires_at", types.timestamp],
      ["cancel_attempt_count", "INTEGER NOT NULL DEFAULT 0"],
      ["next_cancel_at", types.timestamp],
      ["last_cancel_error", "TEXT"],
    ];
    for (const [name, definition] of columns) await addColumnIfMissing(ctx, "mcp_tasks", name, definition);
    await tx.rows("CREATE INDEX IF NOT EXISTS ix_mcp_tasks_notification_due ON mcp_tasks (notification_status, next_notification_at)");
    await tx.rows("CREATE INDEX IF NOT EXISTS ix_mcp_tasks_cancel_due ON mcp_tasks (cancel_requested_at, next_cancel_at)");
    await tx.rows(`
      UPDATE mcp_tasks SET event_version = 1, next_notification_at = updated_at
      WHERE status IN ('completed', 'failed', 'cancelled') AND notification_status = 'pending' AND event_version = 0`);
  },
};
