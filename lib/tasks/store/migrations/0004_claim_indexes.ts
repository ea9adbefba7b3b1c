import { CLAIMABLE_NOTIFICATION_STATUSES } from "../../events";
import { POLLABLE_TASK_STATUSES, TERMINAL_TASK_STATUSES } from "../../model";
import type { MigrationContext, TaskStoreMigration } from "./types";

const list = (values: Iterable<string>) => `(${[...values].map((v) => `'${v}'`).join(", ")})`;

/**
 * Partial indexes in the exact order the three claims read (due time, then id), holding only the rows a claim
 * can take. A claim then reads its batch off the front of the index and stops, however many finished rows the
 * table holds; the inventory's composite indexes alone make it sort every due row on each claim.
 */
export const claimIndexes: TaskStoreMigration = {
  name: "0004_claim_indexes",
  async up({ tx }: MigrationContext) {
    await tx.rows(`CREATE INDEX IF NOT EXISTS ix_mcp_tasks_poll_claim ON mcp_tasks (next_poll_at, id)
      WHERE status IN ${list(POLLABLE_TASK_STATUSES)} AND cancel_requested_at IS NULL`);
    await tx.rows(`CREATE INDEX IF NOT EXISTS ix_mcp_tasks_cancel_claim ON mcp_tasks (next_cancel_at, id)
      WHERE cancel_requested_at IS NOT NULL AND status NOT IN ${list(TERMINAL_TASK_STATUSES)}`);
    await tx.rows(`CREATE INDEX IF NOT EXISTS ix_mcp_tasks_notification_claim ON mcp_tasks (next_notification_at, id)
      WHERE event_version > notified_version AND notification_status IN ${list(CLAIMABLE_NOTIFICATION_STATUSES)}`);
  },
};
