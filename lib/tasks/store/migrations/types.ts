import type { Dialect, Queryable } from "../connection";

/** What every migration receives: the migration transaction and the column types of its dialect. */
export interface MigrationContext {
  tx: Queryable;
  dialect: Dialect;
  types: { timestamp: string; json: string; boolean: string; false: string };
}

export interface TaskStoreMigration {
  /** Sorts in application order; recorded in `mcp_harness_migrations`. */
  name: string;
  up(ctx: MigrationContext): Promise<void>;
}

export function columnTypes(dialect: Dialect): MigrationContext["types"] {
  // SQLite keeps timestamps as ISO-8601 UTC text ('…T…Z', fixed width) so they compare in time order.
  return dialect === "postgres"
    ? { timestamp: "TIMESTAMPTZ", json: "JSON", boolean: "BOOLEAN", false: "false" }
    : { timestamp: "TEXT", json: "TEXT", boolean: "INTEGER", false: "0" };
}

/** `ALTER TABLE … ADD COLUMN` unless the column is already there (a half-applied upgrade, a hand-made table). */
export async function addColumnIfMissing(ctx: MigrationContext, table: string, column: string, definition: string): Promise<void> {
  if (ctx.dialect === "postgres") {
    await ctx.tx.rows(`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${column} ${definition}`);
    return;
  }
  const existing = await ctx.tx.rows(`SELECT name FROM pragma_table_info('${table}')`);
  if (existing.some((row) => row.name === column)) return;
  await ctx.tx.rows(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`);
}
