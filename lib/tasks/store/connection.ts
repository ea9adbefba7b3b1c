/**
 * The two database connections the store runs on, behind one small interface. Statements are written with
 * `$1…$n` placeholders; the SQLite side rewrites them to `?1…?n`.
 *
 * The store talks to the drivers sequelize itself uses (`sqlite3`, `pg`) directly rather than through
 * `sequelize.query`: on SQLite that layer sniffs statement text (an `INSERT … RETURNING` loses its rows),
 * opens a new connection per transaction without a busy timeout, and creates missing folders; the store needs
 * one connection with `busy_timeout`, `IMMEDIATE` writes and a clear error for a mistyped path instead.
 */
import { statSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import * as path from "node:path";
import { Pool, type PoolClient } from "pg";
import sqlite3 from "sqlite3";
import { type PostgresTarget, type SqliteTarget, TaskStoreConfigError } from "./url";

export type Dialect = "sqlite" | "postgres";
export type Row = Record<string, unknown>;

/** One statement at a time, inside or outside a transaction. */
export interface Queryable {
  /**
   * Runs one statement and returns its rows (`RETURNING` rows for writes). A `name` makes it a prepared
   * statement on PostgreSQL (parsed and planned once per connection); the same name must mean the same text.
   */
  rows(sql: string, params?: readonly unknown[], name?: string): Promise<Row[]>;
}

export interface Db extends Queryable {
  readonly dialect: Dialect;
  /**
   * Runs `fn` in one write transaction: `BEGIN IMMEDIATE` on SQLite (retried as a whole while the file stays
   * busy), a `READ COMMITTED` transaction on PostgreSQL. `fn` may run more than once on SQLite.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface SqliteOptions {
  /** How long SQLite waits for another process's write lock before answering SQLITE_BUSY. */
  busyTimeoutMs?: number;
  /** Whole attempts after SQLITE_BUSY still escaped the busy timeout. */
  busyRetries?: number;
}

const DEFAULT_BUSY_TIMEOUT_MS = 5_000;
const DEFAULT_BUSY_RETRIES = 8;

export function isSqliteBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "SQLITE_BUSY" || code === "SQLITE_LOCKED" || (err instanceof Error && /SQLITE_BUSY/.test(err.message));
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * One `sqlite3` connection per store. Statements are serialised in process (SQLite has one writer anyway, and a
 * transaction must not interleave with other statements on its connection); other processes are waited for by
 * `busy_timeout`, and a busy answer that still escapes is retried a bounded number of times.
 */
class SqliteDb implements Db {
  readonly dialect = "sqlite" as const;
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(
    private readonly db: sqlite3.Database,
    private readonly retries: number,
  ) {}

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  #all(sql: string, params: readonly unknown[]): Promise<Row[]> {
    return new Promise((resolve, reject) => {
      this.db.all(toSqlitePlaceholders(sql), params.map(toSqliteValue), (err: Error | null, rows: Row[]) =>
        err ? reject(err) : resolve(rows),
      );
    });
  }

  #exec(sql: string): Promise<void> {
    return new Promise((resolve, reject) => this.db.exec(sql, (err: Error | null) => (err ? reject(err) : resolve())));
  }

  async #withBusyRetry<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await fn();
      } catch (err) {
        if (!isSqliteBusy(err) || attempt >= this.retries) {
          if (isSqliteBusy(err)) {
            throw new Error(`SQLite task database stayed busy (SQLITE_BUSY) after ${attempt + 1} attempts`, { cause: err });
          }
          throw err;
        }
        await sleep(Math.min(500, 10 * 2 ** attempt) * (0.5 + Math.random()));
      }
    }
  }

  rows(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
    return this.#serial(() => this.#withBusyRetry(() => this.#all(sql, params)));
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.#serial(() =>
      this.#withBusyRetry(async () => {
        await this.#exec("BEGIN IMMEDIATE");
        try {
          const result = await fn({ rows: (sql, params = []) => this.#all(sql, params) });
          await this.#exec("COMMIT");
          return result;
        } catch (err) {
          await this.#exec("ROLLBACK").catch(() => undefined);
          throw err;
        }
      }),
    );
  }

  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    return this.#serial(() => new Promise<void>((resolve, reject) => this.db.close((err) => (err ? reject(err) : resolve()))));
  }
}

function toSqlitePlaceholders(sql: string): string {
  return sql.replace(/\$(\d+)/g, "?$1");
}

function toSqliteValue(value: unknown): unknown {
  if (typeof value === "boolean") return value ? 1 : 0;
  return value;
}

export async function openSqlite(target: SqliteTarget, source: string, opts: SqliteOptions = {}): Promise<Db> {
  const folder = path.dirname(target.file);
  if (target.explicit) {
    let isDir = false;
    try {
      isDir = statSync(folder).isDirectory();
    } catch {
      isDir = false;
    }
    if (!isDir) {
      throw new TaskStoreConfigError(`${source} names SQLite file ${target.file}, but its folder ${folder} does not exist`);
    }
  } else {
    await mkdir(folder, { recursive: true });
  }
  const handle = await new Promise<sqlite3.Database>((resolve, reject) => {
    const db: sqlite3.Database = new sqlite3.Database(target.file, sqlite3.OPEN_READWRITE | sqlite3.OPEN_CREATE, (err) =>
      err ? reject(err) : resolve(db),
    );
  }).catch((err: NodeJS.ErrnoException) => {
    throw new TaskStoreConfigError(`${source}: cannot open SQLite file ${target.file} (${err.code ?? "error"})`);
  });
  handle.configure("busyTimeout", opts.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS);
  const db = new SqliteDb(handle, opts.busyRetries ?? DEFAULT_BUSY_RETRIES);
  try {
    // WAL lets readers run beside the one writer; NORMAL sync in WAL mode survives a process crash.
    const [mode] = await db.rows("PRAGMA journal_mode = WAL");
    if (String(mode?.journal_mode).toLowerCase() !== "wal") throw new Error("the file does not accept WAL journaling");
    await db.rows("PRAGMA synchronous = NORMAL");
  } catch (err) {
    await db.close().catch(() => undefined);
    const code = (err as NodeJS.ErrnoException).code;
    throw new TaskStoreConfigError(
      `${source}: SQLite file ${target.file} cannot be used as the task store (${code ?? (err as Error).message})`,
    );
  }
  return db;
}

export interface PostgresOptions {
  /** Connections in the pool (default 10). */
  poolSize?: number;
  /** Schema to create the table in and to put on `search_path` (overrides the URL's `schema`). */
  schema?: string;
  connectTimeoutMs?: number;
}

class PostgresDb implements Db {
  readonly dialect = "postgres" as const;
  #closed = false;

  constructor(private readonly pool: Pool) {}

  async rows(sql: string, params: readonly unknown[] = [], name?: string): Promise<Row[]> {
    const result = await this.pool.query({ text: sql, values: params as unknown[], name });
    return result.rows as Row[];
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const client: PoolClient = await this.pool.connect();
    let broken = false;
    try {
      await client.query("BEGIN");
      try {
        const result = await fn({
          rows: async (sql, params = [], name) => (await client.query({ text: sql, values: params as unknown[], name })).rows as Row[],
        });
        await client.query("COMMIT");
        return result;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {
          broken = true;
        });
        throw err;
      }
    } finally {
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.pool.end();
  }
}

const PG_REASONS: Record<string, string> = {
  "28P01": "password authentication failed",
  "28000": "the server rejected the login (no such role, or not allowed by pg_hba.conf)",
  "3D000": "the database does not exist",
  "42501": "permission denied",
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host name lookup failed",
  EHOSTUNREACH: "host unreachable",
  ETIMEDOUT: "connection timed out",
  ECONNRESET: "connection reset",
};

/** A connection failure as text that names codes, never the server's message or the URL's password. */
export function describePgFailure(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string") return PG_REASONS[code] ?? `error code ${code}`;
  if (err instanceof Error && /timeout/i.test(err.message)) return "connection timed out";
  return "connection failed";
}

export async function openPostgres(target: PostgresTarget, source: string, opts: PostgresOptions = {}): Promise<{ db: Db; schema: string | undefined }> {
  const schema = opts.schema ?? target.schema;
  const pool = new Pool({
    host: target.host,
    port: target.port,
    database: target.database,
    user: target.user,
    password: target.password,
    ssl: target.ssl === false ? undefined : target.ssl,
    max: opts.poolSize ?? 10,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 10_000,
    application_name: "mcp-harness-tasks",
    options: schema === undefined ? undefined : `-c search_path=${schema}`,
  });
  // An idle client that dies (server restart) must not crash the process; the next query reconnects.
  pool.on("error", () => undefined);
  const db = new PostgresDb(pool);
  try {
    await db.rows("SELECT 1");
  } catch (err) {
    await db.close().catch(() => undefined);
    throw new TaskStoreConfigError(`${source}: cannot connect to PostgreSQL at ${target.display}: ${describePgFailure(err)}`);
  }
  return { db, schema };
}
