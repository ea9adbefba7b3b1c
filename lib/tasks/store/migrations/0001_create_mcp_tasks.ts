import type { MigrationContext, TaskStoreMigration } from "./types";

/** The table as first shipped (inventory §2, columns 1–26), its unique handle and its first indexes. */
export const createMcpTasks: TaskStoreMigration = {
  name: "0001_create_mcp_tasks",
  async up({ tx, types }: MigrationContext) {
    await tx.rows(`
      CREATE TABLE IF NOT EXISTS mcp_tasks (
        id VARCHAR(64) NOT NULL PRIMARY KEY,
        user_id VARCHAR(64) NOT NULL,
        thread_id VARCHAR(64) NOT NULL,
        run_id VARCHAR(64),
        tool_call_id VARCHAR(128),
        server_name VARCHAR(128) NOT NULL,
        driver_name VARCHAR(64) NOT NULL,
        remote_task_id VARCHAR(255) NOT NULL,
        task_name VARCHAR(255) NOT NULL,
        status VARCHAR(32) NOT NULL,
        result ${types.json},
        error TEXT,
        input_required ${types.json},
        driver_data ${types.json} NOT NULL,
        notification_status VARCHAR(16) NOT NULL,
        next_poll_at ${types.timestamp},
        last_polled_at ${types.timestamp},
        last_poll_error TEXT,
        poll_attempt_count INTEGER NOT NULL,
        consecutive_poll_error_count INTEGER NOT NULL,
        lease_owner VARCHAR(128),
        lease_expires_at ${types.timestamp},
        cancel_requested_at ${types.timestamp},
        completed_at ${types.timestamp},
        created_at ${types.timestamp} NOT NULL,
        updated_at ${types.timestamp} NOT NULL,
        CONSTRAINT uq_mcp_tasks_user_server_remote UNIQUE (user_id, server_name, remote_task_id)
      )`);
    for (const [name, columns] of [
      ["ix_mcp_tasks_user_id", "user_id"],
      ["ix_mcp_tasks_thread_id", "thread_id"],
      ["ix_mcp_tasks_status", "status"],
      ["ix_mcp_tasks_notification_status", "notification_status"],
      ["ix_mcp_tasks_next_poll_at", "next_poll_at"],
      ["ix_mcp_tasks_thread_created", "thread_id, created_at"],
      ["ix_mcp_tasks_due", "status, next_poll_at"],
    ]) {
      await tx.rows(`CREATE INDEX IF NOT EXISTS ${name} ON mcp_tasks (${columns})`);
    }
  },
};
