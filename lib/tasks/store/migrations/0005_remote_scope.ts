import { addColumnIfMissing, type MigrationContext, type TaskStoreMigration } from "./types";

const CONSTRAINT = "uq_mcp_tasks_user_server_remote";
const OLD_HANDLE = `CONSTRAINT ${CONSTRAINT} UNIQUE (user_id, server_name, remote_task_id)`;
const NEW_HANDLE = `CONSTRAINT ${CONSTRAINT} UNIQUE (user_id, server_name, remote_scope, remote_task_id)`;
const REBUILT = "mcp_tasks_0005_rebuild";

/**
 * `remote_scope` (column 45) and the unique handle moved onto it: a stdio server's job ids may be numbered per
 * process, and each (user, thread) has a child of its own, so the same id from two children names two jobs. Every
 * existing row keeps scope '' and with it the uniqueness it had.
 */
export const remoteScope: TaskStoreMigration = {
  name: "0005_remote_scope",
  async up(ctx: MigrationContext) {
    await addColumnIfMissing(ctx, "mcp_tasks", "remote_scope", "VARCHAR(64) NOT NULL DEFAULT ''");
    if (ctx.dialect === "postgres") {
      await ctx.tx.rows(`ALTER TABLE mcp_tasks DROP CONSTRAINT IF EXISTS ${CONSTRAINT}, ADD ${NEW_HANDLE}`);
      return;
    }
    await rebuildSqliteTable(ctx);
  },
};

/**
 * SQLite cannot drop a table's inline UNIQUE constraint: the table is rebuilt with the new one (SQLite's documented
 * way: create, copy, drop, rename, recreate the indexes), inside the migration's transaction.
 */
async function rebuildSqliteTable({ tx }: MigrationContext): Promise<void> {
  const [table] = await tx.rows("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'mcp_tasks'");
  const ddl = String(table?.sql ?? "");
  if (ddl.includes(NEW_HANDLE)) return;
  if (!ddl.includes(OLD_HANDLE)) throw new Error(`table mcp_tasks has no unique constraint ${CONSTRAINT} in the form this migration replaces`);
  const renamed = ddl.replace(OLD_HANDLE, NEW_HANDLE).replace(/^CREATE TABLE\s+(IF NOT EXISTS\s+)?("mcp_tasks"|mcp_tasks)/i, `CREATE TABLE ${REBUILT}`);
  const indexes = await tx.rows("SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'mcp_tasks' AND sql IS NOT NULL");
  const columns = (await tx.rows("SELECT name FROM pragma_table_info('mcp_tasks')")).map((row) => String(row.name)).join(", ");
  await tx.rows(renamed);
  await tx.rows(`INSERT INTO ${REBUILT} (${columns}) SELECT ${columns} FROM mcp_tasks`);
  await tx.rows("DROP TABLE mcp_tasks");
  await tx.rows(`ALTER TABLE ${REBUILT} RENAME TO mcp_tasks`);
  for (const index of indexes) await tx.rows(String(index.sql));
}
