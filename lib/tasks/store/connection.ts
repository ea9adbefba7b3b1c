/**
 * The store's connection: one `Sequelize` instance (dialect `sqlite` or `postgres`) behind one small interface.
 * Connections, pooling and transactions are sequelize's; statements run through `sequelize.query` (but see the
 * PostgreSQL named statements below); all SQL stays in
 * `sql.ts` and `migrations/`, written with `$1…$n` bind parameters. Statements run as `QueryTypes.RAW`, which
 * hands back the driver's rows untouched (`SELECT` copies every row; on SQLite, RAW also looks for a few
 * upper-case `PRAGMA …` words of sequelize's own, which the store's SQL does not use).
 *
 * Three things sequelize does on SQLite that the store cannot accept, and what is done about each:
 * 1. Its sqlite query layer runs any statement whose text starts with `insert into` with the driver's `run`,
 *    which returns no rows: `INSERT … RETURNING` loses them (as `QueryTypes.SELECT` it even throws after the
 *    row was written). Such a statement is sent behind a leading SQL comment, so it is run like any other
 *    statement and its rows come back. `UPDATE … RETURNING` and the PostgreSQL dialect need nothing.
 * 2. Its sqlite dialect opens connections itself (one shared, plus a new one per transaction), bypassing the
 *    pool (`pool.max` means nothing there) and the `afterConnect` hook, and keeps sqlite3's 1 s busy timeout.
 *    The sqlite3 module is handed to it as `dialectModule`, with a `Database` that sets the busy timeout and
 *    `synchronous = NORMAL` on every connection before first use; transactions are `transactionType:
 *    IMMEDIATE`, and SQLITE_BUSY that still escapes is retried by sequelize's `retry`. Statements and
 *    transactions of one store are also queued in process: concurrent transactions on their own connections
 *    each hold a libuv thread while they wait out the busy timeout, and with four waiting, the lock holder
 *    gets no thread to finish on (all of them fail after the timeout).
 * 3. It creates a missing folder (and file) whenever it opens a connection. The store checks the folder and
 *    creates the file itself, then opens connections without `OPEN_CREATE` (`dialectOptions.mode`), which
 *    sequelize takes as "do not create": an explicit path with a missing folder fails clearly, and a database
 *    removed under a running store is not silently recreated empty by the next transaction.
 * Two costs of sequelize's statement path are taken back in the same `dialectModule` shims: on SQLite it binds
 * `$n` by name, which SQLite resolves by a linear scan per parameter (the batched apply has 700), so the shim
 * binds by number; on PostgreSQL it never names a statement, so the shim sends the statements the store names
 * as prepared statements. On PostgreSQL the named statements (claims and applies, run for every batch) also skip
 * sequelize's query layer: they go as prepared statements straight to a connection of sequelize's pool or of the
 * sequelize transaction they run in (`#prepared`), since that layer's per-query work kept several workers below
 * pg-boss. Errors come out as the driver's own (sequelize's wrapper is taken off), so callers see the database's
 * codes, constraint names and messages.
 */
import { constants as fsConstants } from "node:fs";
import { mkdir, open, realpath, stat } from "node:fs/promises";
import * as path from "node:path";
import { BaseError, QueryTypes, Sequelize, Transaction, type Options } from "sequelize";
import pg from "pg";
import sqlite3 from "sqlite3";
import { describePgFailure, driverError, isSqliteBusy } from "./driver-errors";
import { type PostgresTarget, type SqliteTarget, TaskStoreConfigError } from "./url";

export type Dialect = "sqlite" | "postgres";
export type Row = Record<string, unknown>;

/** One statement at a time, inside or outside a transaction. */
export interface Queryable {
  /**
   * Runs one statement and returns its rows (`RETURNING` rows for writes). `name` identifies a statement the
   * store runs often (its text must not change under the same name).
   */
  rows(sql: string, params?: readonly unknown[], name?: string): Promise<Row[]>;
}

export interface Db extends Queryable {
  readonly dialect: Dialect;
  /**
   * Runs `fn` in one write transaction: `BEGIN IMMEDIATE` on SQLite (its start retried while the file stays
   * busy, before `fn` runs), a `READ COMMITTED` transaction on PostgreSQL. `fn` runs once.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface SqliteOptions {
  /** How long SQLite waits for another process's write lock before answering SQLITE_BUSY. */
  busyTimeoutMs?: number;
  /** Retries of a statement (or of a transaction's start) after SQLITE_BUSY still escaped the busy timeout. */
  busyRetries?: number;
  /** Refuse a SQLite file that does not exist yet instead of creating it (tools that only read or fence tasks). */
  mustExist?: boolean;
}

const DEFAULT_BUSY_TIMEOUT_MS = 5_000;
const DEFAULT_BUSY_RETRIES = 8;

const STARTS_WITH_INSERT = /^\s*insert\b/i;

/** Statements of one store through its `Sequelize` instance. */
class SequelizeDb implements Db {
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(
    readonly dialect: Dialect,
    private readonly sequelize: Sequelize,
    /** Attempts sequelize makes after SQLITE_BUSY (for the message when they run out). */
    private readonly busyAttempts: number,
    /** PostgreSQL: statement text → prepared statement name, read by the driver shim (`namedStatementsPg`). */
    private readonly statementNames?: Map<string, string>,
  ) {}

  /** SQLite: one statement or transaction at a time (see the top of this file); PostgreSQL: the pool decides. */
  #serial<T>(fn: () => Promise<T>): Promise<T> {
    if (this.dialect === "postgres") return fn();
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** The driver's error instead of sequelize's wrapper; SQLITE_BUSY that outlasted every retry says so. */
  #error(err: unknown): unknown {
    if (!(err instanceof BaseError)) return err;
    if (this.dialect === "sqlite" && isSqliteBusy(err)) {
      return new Error(`SQLite task database stayed busy (SQLITE_BUSY) after ${this.busyAttempts} attempts`, { cause: driverError(err) });
    }
    const parent = driverError(err);
    // Sequelize hangs the bound values on the driver's error; they are task data, not part of the failure.
    if (parent !== err && parent !== null && typeof parent === "object") delete (parent as { parameters?: unknown }).parameters;
    return parent;
  }

  async #query(sql: string, params: readonly unknown[], name: string | undefined, transaction?: Transaction): Promise<Row[]> {
    const sqlite = this.dialect === "sqlite";
    // Sequelize trims the text before it reaches the driver; the name is looked up by that text.
    if (name !== undefined && this.statementNames !== undefined && this.statementNames.size < 256) this.statementNames.set(sql.trim(), name);
    const text = sqlite && STARTS_WITH_INSERT.test(sql) ? `/* rows */ ${sql}` : sql;
    if (!sqlite && name !== undefined) return this.#prepared(sql, params, name, transaction);
    try {
      // RAW hands back the driver's rows as they are ([rows, metadata]); SELECT would copy every row first.
      const [rows] = await this.sequelize.query(text, {
        type: QueryTypes.RAW,
        bind: params.length === 0 ? undefined : params.map(sqlite ? toSqliteValue : toPgValue),
        transaction,
      });
      return (rows ?? []) as Row[];
    } catch (err) {
      throw this.#error(err);
    }
  }

  /**
   * PostgreSQL: a statement the store named (the claim and apply statements, run for every batch) goes as a named
   * prepared statement straight to a connection of sequelize's pool (or of its transaction). Sequelize's own query
   * layer rebuilds a batch's 700 bound values twice and scans the text with several regexes (0.5–0.8 ms a batch),
   * which kept several workers below pg-boss; the connection, pool and transaction are still sequelize's.
   */
  async #prepared(sql: string, params: readonly unknown[], name: string, transaction?: Transaction): Promise<Row[]> {
    const values = params.map(toPgValue);
    const own = transaction as unknown as { connection?: pg.Client } | undefined;
    try {
      if (own?.connection) return (await own.connection.query({ name, text: sql, values })).rows as Row[];
      const manager = this.sequelize.connectionManager as unknown as {
        getConnection(options: { type: "write" }): Promise<pg.Client>;
        releaseConnection(connection: pg.Client): Promise<void>;
      };
      const connection = await manager.getConnection({ type: "write" });
      try {
        return (await connection.query({ name, text: sql, values })).rows as Row[];
      } finally {
        await manager.releaseConnection(connection);
      }
    } catch (err) {
      throw this.#error(err);
    }
  }

  rows(sql: string, params: readonly unknown[] = [], name?: string): Promise<Row[]> {
    return this.#serial(() => this.#query(sql, params, name));
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.#serial(async () => {
      try {
        return await this.sequelize.transaction((t) => fn({ rows: (sql, params = [], name) => this.#query(sql, params, name, t) }));
      } catch (err) {
        throw this.#error(err);
      }
    });
  }

  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    return this.#serial(() => this.sequelize.close());
  }
}

function toSqliteValue(value: unknown): unknown {
  if (value === undefined) return null;
  if (typeof value === "boolean") return value ? 1 : 0;
  return value;
}

function toPgValue(value: unknown): unknown {
  return value === undefined ? null : value;
}

/**
 * sqlite3 as sequelize's sqlite dialect loads it (`dialectModule`): every connection the dialect opens, the
 * shared one and each transaction's, gets its busy timeout and sync level before anything else runs on it.
 */
function configuredSqlite3(busyTimeoutMs: number): object {
  class Database extends sqlite3.Database {
    #failed = false;

    constructor(file: string, mode: number, callback: (err: Error | null) => void) {
      let self: Database | undefined;
      super(file, mode, (err) => {
        if (err && self) self.#failed = true;
        if (err || !self) return callback(err);
        self.configure("busyTimeout", busyTimeoutMs);
        // NORMAL in WAL mode survives a process crash; it cannot be changed inside a transaction, so it is
        // set before the connection is handed over (and so before a transaction's BEGIN).
        self.exec("PRAGMA synchronous = NORMAL", callback);
      });
      self = this;
    }

    /**
     * Sequelize keeps a connection that failed to open and closes it with the rest; sqlite3 never calls back
     * for a handle that never opened, which would leave the store's `close()` waiting forever.
     */
    override close(callback?: (err: Error | null) => void): void {
      if (this.#failed) callback?.(null);
      else super.close(callback);
    }

    /**
     * Sequelize binds `$n` parameters by name (`{ $1: …, $2: … }`), and SQLite finds each name by a linear scan
     * of the statement's parameters: a batched apply (700 parameters) spent more time binding than running.
     * The same statement with `?n` placeholders binds the same values by number.
     */
    override all(sql: string, ...args: unknown[]): this {
      const [params, callback] = args as [unknown, (err: Error | null, rows: unknown[]) => void];
      if (isNumberedBind(params)) return super.all(numberedPlaceholders(sql), Object.values(params), callback);
      return super.all(sql, ...(args as []));
    }
  }
  return { ...sqlite3, Database };
}

/** `{ $1, $2, … $n }`, as sequelize's sqlite dialect builds it from a bind array (in that order). */
function isNumberedBind(params: unknown): params is Record<string, unknown> {
  if (params === null || typeof params !== "object" || Array.isArray(params)) return false;
  const keys = Object.keys(params);
  return keys.length > 0 && keys[0] === "$1" && keys[keys.length - 1] === `$${keys.length}`;
}

const placeholderCache = new Map<string, string>();

function numberedPlaceholders(sql: string): string {
  let text = placeholderCache.get(sql);
  if (text === undefined) {
    text = sql.replace(/\$(\d+)/g, "?$1");
    // The store's statements are a few dozen texts; anything beyond that is not worth keeping.
    if (placeholderCache.size < 256) placeholderCache.set(sql, text);
  }
  return text;
}

/** Creates the database file unless it exists; the folder must exist. */
async function ensureFile(file: string): Promise<void> {
  const handle = await open(file, fsConstants.O_RDWR | fsConstants.O_CREAT);
  await handle.close();
}

export async function openSqlite(target: SqliteTarget, source: string, opts: SqliteOptions = {}): Promise<Db> {
  const folder = path.dirname(target.file);
  if (opts.mustExist && !(await stat(target.file).then((s) => s.isFile(), () => false))) {
    throw new TaskStoreConfigError(`${source}: there is no task store at ${target.file} (no SQLite file there)`);
  }
  if (target.explicit) {
    const isDir = await stat(folder).then(
      (s) => s.isDirectory(),
      () => false,
    );
    if (!isDir) {
      throw new TaskStoreConfigError(`${source} names SQLite file ${target.file}, but its folder ${folder} does not exist`);
    }
  } else {
    await mkdir(folder, { recursive: true });
  }
  await ensureFile(target.file).catch((err: NodeJS.ErrnoException) => {
    throw new TaskStoreConfigError(`${source}: cannot open SQLite file ${target.file} (${err.code ?? "error"})`);
  });
  // Sequelize opens the file again by name for each transaction: by its real path, so a link on the way pointed
  // elsewhere meanwhile (a deploy's data dir) leaves every connection on the file opened here.
  const storage = await realpath(target.file).catch(() => target.file);
  const attempts = (opts.busyRetries ?? DEFAULT_BUSY_RETRIES) + 1;
  const options: Options = {
    dialect: "sqlite",
    storage,
    dialectModule: configuredSqlite3(opts.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS),
    // Without OPEN_CREATE sequelize neither creates folders nor files: the file was made above.
    dialectOptions: { mode: sqlite3.OPEN_READWRITE },
    transactionType: Transaction.TYPES.IMMEDIATE,
    retry: { max: attempts, match: [/SQLITE_BUSY/], backoffBase: 10, backoffExponent: 2, backoffJitter: 10 },
    logging: false,
  };
  const db = new SequelizeDb("sqlite", new Sequelize(options), attempts);
  if (opts.mustExist) {
    // Another application's database (or an empty file) is left as it is: not switched to WAL, no tables added.
    const found = await db.rows("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'mcp_tasks'").catch(() => null);
    if (found?.length !== 1) {
      await db.close().catch(() => undefined);
      throw new TaskStoreConfigError(`${source}: SQLite file ${target.file} is not a task store (it has no mcp_tasks table)`);
    }
  }
  try {
    // WAL lets readers run beside the one writer (a property of the file, kept from here on).
    const [mode] = await db.rows("PRAGMA journal_mode = WAL");
    if (String(mode?.journal_mode).toLowerCase() !== "wal") throw new Error("the file does not accept WAL journaling");
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

/**
 * pg as sequelize's postgres dialect loads it (`dialectModule`). Sequelize sends every statement as unnamed
 * (`client.query(text, values)`), so PostgreSQL parses and plans the 700-parameter batched apply on every call;
 * a statement the store named is sent under its name instead, and prepared once per connection.
 */
function namedStatementsPg(names: ReadonlyMap<string, string>): object {
  class Client extends pg.Client {
    override query(...args: unknown[]): never {
      const [text, values, callback] = args;
      const name = typeof text === "string" && Array.isArray(values) ? names.get(text) : undefined;
      const call = super.query as (...a: unknown[]) => never;
      return name === undefined ? call.apply(this, args) : call.call(this, { name, text, values }, callback);
    }
  }
  return { ...pg, Client };
}

export async function openPostgres(target: PostgresTarget, source: string, opts: PostgresOptions = {}): Promise<{ db: Db; schema: string | undefined }> {
  const schema = opts.schema ?? target.schema;
  const names = new Map<string, string>();
  const sequelize = new Sequelize({
    dialect: "postgres",
    dialectModule: namedStatementsPg(names),
    host: target.host,
    port: target.port,
    database: target.database,
    username: target.user,
    password: target.password,
    dialectOptions: {
      ssl: target.ssl === false ? undefined : target.ssl,
      connectionTimeoutMillis: opts.connectTimeoutMs ?? 10_000,
      application_name: "mcp-harness-tasks",
      options: schema === undefined ? undefined : `-c search_path=${schema}`,
    },
    pool: { max: opts.poolSize ?? 10, min: 0 },
    // Sequelize's default retry only matches SQLite's busy answer; PostgreSQL statements are never re-sent.
    retry: { max: 1 },
    logging: false,
  });
  const db = new SequelizeDb("postgres", sequelize, 1, names);
  try {
    await db.rows("SELECT 1");
  } catch (err) {
    await db.close().catch(() => undefined);
    throw new TaskStoreConfigError(`${source}: cannot connect to PostgreSQL at ${target.display}: ${describePgFailure(err)}`);
  }
  return { db, schema };
}
