import { addColumnIfMissing, type MigrationContext, type TaskStoreMigration } from "./types";

/** Bounded results: a preview with a truncation flag, and an artifact reference (columns 27–29). */
export const taskResults: TaskStoreMigration = {
  name: "0002_task_results",
  async up(ctx: MigrationContext) {
    await addColumnIfMissing(ctx, "mcp_tasks", "result_preview", "TEXT");
    await addColumnIfMissing(ctx, "mcp_tasks", "result_truncated", `${ctx.types.boolean} NOT NULL DEFAULT ${ctx.types.false}`);
    await addColumnIfMissing(ctx, "mcp_tasks", "result_artifact", ctx.types.json);
  },
};
