/**
 * Versioned migrations, run by umzug (sequelize's migration engine) when the store opens. The whole run is one
 * transaction under a lock, so two processes opening one empty database at once end with one schema: on
 * PostgreSQL a transaction-scoped advisory lock keyed by the schema, on SQLite `BEGIN IMMEDIATE`. DDL is
 * transactional on both, so a failed migration leaves nothing half done.
 */
import { Umzug, type UmzugStorage } from "umzug";
import type { Db, Queryable } from "../connection";
import { createMcpTasks } from "./0001_create_mcp_tasks";
import { taskResults } from "./0002_task_results";
import { taskNotifications } from "./0003_task_notifications";
import { claimIndexes } from "./0004_claim_indexes";
import { remoteScope } from "./0005_remote_scope";
import { pollDeferredAt } from "./0006_poll_deferred_at";
import { columnTypes, type MigrationContext, type TaskStoreMigration } from "./types";

export type { MigrationContext, TaskStoreMigration } from "./types";

export const TASK_STORE_MIGRATIONS: readonly TaskStoreMigration[] = [createMcpTasks, taskResults, taskNotifications, claimIndexes, remoteScope, pollDeferredAt];
export const LATEST_MIGRATION = TASK_STORE_MIGRATIONS[TASK_STORE_MIGRATIONS.length - 1].name;
export const MIGRATIONS_TABLE = "mcp_harness_migrations";

/**
 * The migration log lives in the migration's own transaction, so it commits with the schema it describes.
 * Not umzug's `SequelizeStorage`: it calls `model.sync()` before every step and writes outside the
 * transaction (on SQLite, on another connection that waits for the migration's own write lock), and its table
 * has no `applied_at`, which databases made so far already have.
 */
class TransactionStorage implements UmzugStorage<MigrationContext> {
  constructor(private readonly tx: Queryable) {}
  async executed(): Promise<string[]> {
    const rows = await this.tx.rows(`SELECT name FROM ${MIGRATIONS_TABLE} ORDER BY name`);
    return rows.map((row) => String(row.name));
  }
  async logMigration({ name }: { name: string }): Promise<void> {
    await this.tx.rows(`INSERT INTO ${MIGRATIONS_TABLE} (name, applied_at) VALUES ($1, $2)`, [name, new Date().toISOString()]);
  }
  async unlogMigration({ name }: { name: string }): Promise<void> {
    await this.tx.rows(`DELETE FROM ${MIGRATIONS_TABLE} WHERE name = $1`, [name]);
  }
}

export interface MigrateOptions {
  /** PostgreSQL schema the store lives in (created if missing); the lock is per schema. */
  schema?: string;
  /** Stop after this migration (tests build databases at earlier versions). */
  to?: string;
}

/**
 * The migrations this database still lacks, read without a write lock; `null` when it holds no migration log (not a
 * task store, or an empty database). The log is looked up in `schema` itself, never elsewhere on the search path.
 */
export async function pendingMigrations(db: Queryable, schema?: string): Promise<string[] | null> {
  let rows;
  try {
    rows = await db.rows(`SELECT name FROM ${schema === undefined ? "" : `${schema}.`}${MIGRATIONS_TABLE}`);
  } catch {
    return null;
  }
  const applied = new Set(rows.map((row) => String(row.name)));
  return TASK_STORE_MIGRATIONS.map((m) => m.name).filter((name) => !applied.has(name));
}

/**
 * Applies pending migrations; returns the names applied (empty when the schema was current). A current schema is
 * recognised by a read first: opening a store takes no write lock then (on SQLite a write lock waits for any other
 * writer, so a read-only tool would stall behind it).
 */
export async function migrate(db: Db, opts: MigrateOptions = {}): Promise<string[]> {
  if (opts.to === undefined && (await pendingMigrations(db, opts.schema))?.length === 0) return [];
  return db.transaction(async (tx) => {
    if (db.dialect === "postgres") {
      await tx.rows("SELECT pg_advisory_xact_lock(hashtext($1))", [`mcp-harness-migrations:${opts.schema ?? "public"}`]);
      if (opts.schema !== undefined) await tx.rows(`CREATE SCHEMA IF NOT EXISTS ${opts.schema}`);
    }
    await tx.rows(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (name VARCHAR(255) NOT NULL PRIMARY KEY, applied_at VARCHAR(32) NOT NULL)`);
    const context: MigrationContext = { tx, dialect: db.dialect, types: columnTypes(db.dialect) };
    const umzug = new Umzug<MigrationContext>({
      migrations: TASK_STORE_MIGRATIONS.map((m) => ({ name: m.name, up: ({ context: ctx }) => m.up(ctx) })),
      context,
      storage: new TransactionStorage(tx),
      logger: undefined,
    });
    const applied = await umzug.up(opts.to === undefined ? undefined : { to: opts.to });
    return applied.map((m) => m.name);
  });
}
