import { addColumnIfMissing, type MigrationContext, type TaskStoreMigration } from "./types";

/**
 * `poll_deferred_at` (column 46): when the first of the task's polls deferred since was deferred (a submit on the same
 * stdio child still unanswered, see `McpTaskAnswerUnsettledError`); null when its last poll was not deferred. Once
 * the deferrals have lasted longer than the lease, each counts as a poll error, so a task whose tracking is stuck
 * shows `tracking_degraded`.
 */
export const pollDeferredAt: TaskStoreMigration = {
  name: "0006_poll_deferred_at",
  async up(ctx: MigrationContext) {
    await addColumnIfMissing(ctx, "mcp_tasks", "poll_deferred_at", ctx.types.timestamp);
  },
};
