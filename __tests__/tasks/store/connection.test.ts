/**
 * The store's connection through sequelize (lib/tasks/store/connection.ts): what sequelize does on its own that
 * the store works around, pinned on plain sequelize where that shows why, and the store's behaviour each time.
 */
import { existsSync } from "node:fs";
import { mkdir, rename, rm, symlink } from "node:fs/promises";
import * as path from "node:path";
import { afterAll, describe, expect, jest, test } from "@jest/globals";
import { BaseError, QueryTypes, Sequelize } from "sequelize";
import { migrate, openTaskDatabase, type Db } from "../../../lib/tasks";
import { TaskSql } from "../../../lib/tasks/store/sql";
import { makeTempDir } from "../../fixtures/config";
import { ManualClock, openStore, PG_URL, seedTask, targets } from "./helpers";

async function sqliteFile(): Promise<{ dir: string; file: string; url: string }> {
  const dir = await makeTempDir("mcp-conn-");
  const file = path.join(dir, "tasks.sqlite");
  return { dir, file, url: `sqlite:${file}` };
}

describe("sequelize's sqlite dialect, as it is", () => {
  test("a plain INSERT … RETURNING loses its rows: SELECT throws after the write, RAW hands back none", async () => {
    const { file } = await sqliteFile();
    const plain = new Sequelize({ dialect: "sqlite", storage: file, logging: false });
    await plain.query("CREATE TABLE t (id TEXT PRIMARY KEY)");
    await expect(plain.query("INSERT INTO t (id) VALUES ($1) RETURNING *", { type: QueryTypes.SELECT, bind: ["a"] })).rejects.toThrow(TypeError);
    expect(await plain.query("SELECT id FROM t", { type: QueryTypes.SELECT })).toEqual([{ id: "a" }]);
    const [rows] = await plain.query("INSERT INTO t (id) VALUES ($1) RETURNING *", { type: QueryTypes.RAW, bind: ["b"] });
    expect(rows).toBeFalsy();
    await plain.close();
  });

  test("it creates a missing folder when it opens a connection", async () => {
    const { dir } = await sqliteFile();
    const plain = new Sequelize({ dialect: "sqlite", storage: path.join(dir, "no/such/tasks.sqlite"), logging: false });
    await plain.query("SELECT 1");
    await plain.close();
    expect(existsSync(path.join(dir, "no/such"))).toBe(true);
  });
});

describe("the store's SQLite connection", () => {
  test("every connection sequelize opens, the shared one and a transaction's own, has the busy timeout and NORMAL sync, in WAL mode", async () => {
    const { url } = await sqliteFile();
    const { db } = await openTaskDatabase({ url, busyTimeoutMs: 4321 });
    const settings = async (q: { rows: typeof db.rows }) => ({
      timeout: (await q.rows("PRAGMA busy_timeout"))[0].timeout,
      synchronous: (await q.rows("PRAGMA synchronous"))[0].synchronous,
      journal: (await q.rows("PRAGMA journal_mode"))[0].journal_mode,
    });
    const expected = { timeout: 4321, synchronous: 1, journal: "wal" };
    expect(await settings(db)).toEqual(expected);
    expect(await db.transaction((tx) => settings(tx))).toEqual(expected);
    await db.close();
  });

  test("a database whose folder disappears under a running store is not recreated by the next connection", async () => {
    const { dir, url } = await sqliteFile();
    const { db } = await openTaskDatabase({ url });
    await rm(dir, { recursive: true });
    await expect(db.transaction((tx) => tx.rows("SELECT 1"))).rejects.toMatchObject({ code: "SQLITE_CANTOPEN" });
    expect(existsSync(dir)).toBe(false);
    await db.close();
  });

  test("a default file in a data dir reached through a link: a transaction after the link was pointed elsewhere works on the store's own file", async () => {
    const base = await makeTempDir("mcp-conn-");
    const [first, second, link] = [path.join(base, "first"), path.join(base, "second"), path.join(base, "data")];
    await Promise.all([mkdir(first), mkdir(second)]);
    await symlink(first, link);
    const { db } = await openTaskDatabase({ env: {}, cwd: base, dataDir: link });
    await db.rows("CREATE TABLE kept (n INTEGER)");
    // A deploy points the link elsewhere while the store runs; the toolkit keeps its thread folders where they were.
    const next = path.join(base, "data.next");
    await symlink(second, next);
    await rename(next, link);
    await db.transaction((tx) => tx.rows("INSERT INTO kept (n) VALUES (1)"));
    expect(await db.rows("SELECT n FROM kept")).toEqual([{ n: 1 }]);
    expect(existsSync(path.join(second, "tasks.sqlite"))).toBe(false);
    await db.close();
  });

  test("a write lock held past every retry fails with a clear message, and the store works once it is released", async () => {
    const { url } = await sqliteFile();
    const holder = await openTaskDatabase({ url });
    let locked!: () => void;
    let release!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    const holding = holder.db.transaction(async (tx) => {
      await tx.rows("CREATE TABLE held (n INTEGER)");
      locked();
      await released;
    });
    await isLocked;
    const { db } = await openTaskDatabase({ url, busyTimeoutMs: 20, busyRetries: 1 });
    const busy = "SQLite task database stayed busy (SQLITE_BUSY) after 2 attempts";
    await expect(db.rows("CREATE TABLE other (n INTEGER)")).rejects.toThrow(busy);
    // Sequelize warns on the console when it cannot roll back a transaction that never began.
    const warn = jest.spyOn(console, "warn").mockImplementation(() => undefined);
    try {
      await expect(db.transaction((tx) => tx.rows("SELECT 1"))).rejects.toThrow(busy);
    } finally {
      warn.mockRestore();
    }
    release();
    await holding;
    expect(await db.transaction((tx) => tx.rows("INSERT INTO held (n) VALUES ($1) RETURNING n", [7]))).toEqual([{ n: 7 }]);
    await Promise.all([db.close(), holder.db.close()]);
  });
});

describe.each(targets())("the store's connection on $name", (target) => {
  afterAll(() => target.cleanup());

  /** A fresh, migrated database (on PostgreSQL its schema exists, so plain tables can be made in it). */
  async function freshDb(): Promise<Db> {
    const { db, schema } = await openTaskDatabase({ url: await target.fresh() });
    await migrate(db, { schema });
    return db;
  }

  test("INSERT … RETURNING and UPDATE … RETURNING hand back their rows", async () => {
    const db = await freshDb();
    await db.rows("CREATE TABLE returning_probe (id VARCHAR(8) PRIMARY KEY, n INTEGER NOT NULL)");
    expect(await db.rows("INSERT INTO returning_probe (id, n) VALUES ($1, $2) RETURNING *", ["a", 1])).toEqual([{ id: "a", n: 1 }]);
    expect(await db.rows("  insert into returning_probe (id, n) values ($1, $2) returning id", ["b", 2])).toEqual([{ id: "b" }]);
    expect(await db.transaction((tx) => tx.rows("INSERT INTO returning_probe (id, n) VALUES ($1, $2) RETURNING n", ["c", 3]))).toEqual([{ n: 3 }]);
    expect(await db.rows("UPDATE returning_probe SET n = n + 10 WHERE id = $1 RETURNING n", ["a"])).toEqual([{ n: 11 }]);
    await db.close();
  });

  test("errors are the driver's own: its code and constraint, no sequelize wrapper, no bound values attached", async () => {
    const db = await freshDb();
    await db.rows("CREATE TABLE error_probe (id VARCHAR(16) PRIMARY KEY)");
    await db.rows("INSERT INTO error_probe (id) VALUES ($1)", ["value-1"]);
    const err = (await db.rows("INSERT INTO error_probe (id) VALUES ($1)", ["value-1"]).catch((e: unknown) => e)) as Error & Record<string, unknown>;
    expect(err).not.toBeInstanceOf(BaseError);
    expect(err.message).toMatch(db.dialect === "sqlite" ? /UNIQUE constraint failed: error_probe\.id/ : /error_probe_pkey/);
    expect(err.code).toBe(db.dialect === "sqlite" ? "SQLITE_CONSTRAINT" : "23505");
    expect(err.parameters).toBeUndefined();
    await db.close();
  });

  test("sixteen transactions started at once in one store all commit, with no busy retry at all", async () => {
    const clock = new ManualClock();
    const store = await openStore(await target.fresh(), clock, { busyRetries: 0, busyTimeoutMs: 300 });
    const tasks = [];
    for (let i = 0; i < 16; i += 1) tasks.push(await seedTask(store));
    const claimed = await store.claimDuePolls({ leaseOwner: "w", leaseSeconds: 60, limit: 16 });
    expect(claimed).toHaveLength(16);
    const released = await Promise.all(
      claimed.map((task) => store.releaseClaim({ taskId: task.id, leaseOwner: "w", nextPollAt: clock.now(), error: "e", trackingDegradedAfterErrors: 3 })),
    );
    expect(released).toEqual(Array(16).fill(true));
    const rows = await Promise.all(tasks.map((t) => store.get(t.id, "alice")));
    expect(rows.every((r) => r?.consecutive_poll_error_count === 1 && r.lease_owner === null)).toBe(true);
    await store.close();
  });
});

(PG_URL ? describe : describe.skip)("the store's PostgreSQL connection", () => {
  const [, pgTarget] = targets();
  afterAll(() => pgTarget.cleanup());

  test("a statement the store names is a prepared statement of the connection", async () => {
    const { db, schema } = await openTaskDatabase({ url: await pgTarget.fresh(), poolSize: 1 });
    await migrate(db, { schema });
    const sql = new TaskSql("postgres").claimDuePolls();
    const now = new Date().toISOString();
    for (let i = 0; i < 2; i += 1) await db.rows(sql, ["w", now, now, 5], "mcp_tasks_claim_polls");
    const prepared = await db.rows("SELECT name FROM pg_prepared_statements");
    expect(prepared.map((r) => r.name)).toContain("mcp_tasks_claim_polls");
    await db.close();
  });
});
