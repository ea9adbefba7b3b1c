import { openPostgres, openSqlite, type Db, type PostgresOptions, type SqliteOptions } from "./connection";
import { migrate, pendingMigrations } from "./migrations";
import { TaskStore } from "./task-store";
import { DATABASE_URL_VARIABLE, isSqlIdentifier, resolveDatabaseTarget, TaskStoreConfigError } from "./url";

export type { Db, Dialect, Queryable } from "./connection";
export { describePgFailure, isSqliteBusy } from "./driver-errors";
export { LATEST_MIGRATION, migrate, MIGRATIONS_TABLE, TASK_STORE_MIGRATIONS, type MigrateOptions } from "./migrations";
export { TASK_COLUMNS, type TaskRecord } from "./records";
export {
  DuplicateMcpRemoteTaskError,
  REISSUED_REMOTE_TASK_ERROR,
  isRemoteTaskUniqueConflict,
  TaskStore,
  UNIQUE_REMOTE_TASK_CONSTRAINT,
  type ApplyCancelInput,
  type ApplySnapshotInput,
  type ClaimOptions,
  type CreateTaskInput,
  type DeferPollInput,
  type NotificationStep,
  type ReleaseCancelInput,
  type ReleaseClaimInput,
} from "./task-store";
export {
  DATA_DIR_VARIABLE,
  DATABASE_URL_VARIABLE,
  DEFAULT_DATA_DIR,
  DEFAULT_SQLITE_FILE,
  resolveDatabaseTarget,
  TaskStoreConfigError,
  type DatabaseTarget,
} from "./url";

export interface OpenTaskStoreOptions extends SqliteOptions, PostgresOptions {
  /** `sqlite:<path>` or `postgres://…`; default `MCP_HARNESS_DATABASE_URL` from `env`, else the default SQLite file. */
  url?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** The data dir of the default SQLite file (as the toolkit's `dataDir`); default `MCP_HARNESS_DATA_DIR`, else `./.mcp-harness`. */
  dataDir?: string;
  /** Every timestamp the store writes comes from here (UTC). */
  clock?: () => Date;
  /**
   * Run pending migrations on open (default true); `"verify"`: run none and refuse a database that holds no task
   * store or an older schema (tools that only read or fence tasks change nothing in the database).
   */
  migrate?: boolean | "verify";
}

/** Opens the database (`openTaskDatabase`), brings its schema up to date, and returns the store on it. */
export async function openTaskStore(opts: OpenTaskStoreOptions = {}): Promise<TaskStore> {
  const { db, schema } = await openTaskDatabase(opts);
  try {
    if (opts.migrate === "verify") await verifySchema(db, schema);
    else if (opts.migrate !== false) await migrate(db, { schema });
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
  return new TaskStore(db, { clock: opts.clock, schema });
}

async function verifySchema(db: Db, schema: string | undefined): Promise<void> {
  const pending = await pendingMigrations(db, schema);
  if (pending === null) {
    throw new TaskStoreConfigError("this database holds no task store (a worker or the server creates it when it first starts)");
  }
  if (pending.length > 0) {
    throw new TaskStoreConfigError(
      `the task store's schema is older than this version (missing ${pending.join(", ")}); start a worker or the server once to upgrade it`,
    );
  }
}

/** The connection alone, unmigrated (the store opens it this way; tests use it to build older schemas). */
export async function openTaskDatabase(opts: OpenTaskStoreOptions = {}): Promise<{ db: Db; schema: string | undefined }> {
  const source = opts.url !== undefined ? "the task store url" : DATABASE_URL_VARIABLE;
  const target = resolveDatabaseTarget({ url: opts.url, env: opts.env, cwd: opts.cwd, dataDir: opts.dataDir, source });
  if (target.dialect === "sqlite") return { db: await openSqlite(target, source, opts), schema: undefined };
  if (opts.schema !== undefined && !isSqlIdentifier(opts.schema)) {
    throw new TaskStoreConfigError("the task store schema must be a plain SQL identifier");
  }
  return openPostgres(target, source, opts);
}
