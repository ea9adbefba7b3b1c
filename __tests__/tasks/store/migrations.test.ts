import { afterAll, describe, expect, test } from "@jest/globals";
import { migrate, openTaskDatabase, TASK_COLUMNS, type Db } from "../../../lib/tasks";
import { ManualClock, openStore, seedTask, targets } from "./helpers";

async function columns(db: Db): Promise<string[]> {
  const rows =
    db.dialect === "sqlite"
      ? await db.rows("SELECT name FROM pragma_table_info('mcp_tasks') ORDER BY cid")
      : await db.rows("SELECT column_name AS name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'mcp_tasks' ORDER BY ordinal_position");
  return rows.map((r) => String(r.name));
}

async function indexes(db: Db): Promise<string[]> {
  const rows =
    db.dialect === "sqlite"
      ? await db.rows("SELECT name FROM pragma_index_list('mcp_tasks') WHERE origin = 'c'")
      : await db.rows("SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'mcp_tasks' AND indexname LIKE 'ix_%'");
  return rows.map((r) => String(r.name)).sort();
}

const INDEXES = [
  "ix_mcp_tasks_cancel_claim",
  "ix_mcp_tasks_cancel_due",
  "ix_mcp_tasks_due",
  "ix_mcp_tasks_next_poll_at",
  "ix_mcp_tasks_notification_claim",
  "ix_mcp_tasks_notification_due",
  "ix_mcp_tasks_notification_status",
  "ix_mcp_tasks_poll_claim",
  "ix_mcp_tasks_status",
  "ix_mcp_tasks_thread_created",
  "ix_mcp_tasks_thread_id",
  "ix_mcp_tasks_user_id",
];

describe.each(targets())("migrations on $name", (target) => {
  afterAll(() => target.cleanup());

  test("the store creates all 46 columns, every index and the named unique handle", async () => {
    const url = await target.fresh();
    await (await openStore(url, new ManualClock())).close();
    const { db } = await openTaskDatabase({ url });
    expect(await columns(db)).toEqual([...TASK_COLUMNS]);
    expect(TASK_COLUMNS).toHaveLength(46);
    expect(await indexes(db)).toEqual(INDEXES);
    if (db.dialect === "postgres") {
      const [c] = await db.rows("SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'uq_mcp_tasks_user_server_remote' AND connamespace = current_schema()::regnamespace");
      expect(c.def).toBe("UNIQUE (user_id, server_name, remote_scope, remote_task_id)");
    } else {
      const [t] = await db.rows("SELECT sql FROM sqlite_master WHERE name = 'mcp_tasks'");
      expect(String(t.sql)).toContain("CONSTRAINT uq_mcp_tasks_user_server_remote UNIQUE (user_id, server_name, remote_scope, remote_task_id)");
      expect(String(t.sql)).not.toContain("UNIQUE (user_id, server_name, remote_task_id)");
    }
    await db.close();
  });

  test("opening a store whose schema is current takes no write lock: it opens while another process holds one", async () => {
    const url = await target.fresh();
    await (await openStore(url, new ManualClock())).close();
    const { db: holder, schema } = await openTaskDatabase({ url });
    try {
      await holder.transaction(async (tx) => {
        // What a migration run takes: SQLite's write lock (the transaction itself), PostgreSQL's migration lock.
        if (holder.dialect === "postgres") await tx.rows("SELECT pg_advisory_xact_lock(hashtext($1))", [`mcp-harness-migrations:${schema ?? "public"}`]);
        else await tx.rows("UPDATE mcp_tasks SET status = status WHERE 1 = 0");
        await (await openStore(url, new ManualClock())).close();
      });
    } finally {
      await holder.close();
    }
  });

  test("a column a newer version adds while this one runs (a rolling upgrade) breaks none of its statements", async () => {
    const url = await target.fresh();
    const clock = new ManualClock();
    // One connection: its named (prepared) statements are the ones used again after the change.
    const store = await openStore(url, clock, { poolSize: 1 });
    const lease = { leaseSeconds: 30, limit: 10 };
    const first = await seedTask(store, { nextPollAt: clock.now() });
    expect(await store.claimDuePolls({ leaseOwner: "w1", ...lease })).toHaveLength(1);
    const { db } = await openTaskDatabase({ url });
    await db.rows("ALTER TABLE mcp_tasks ADD COLUMN added_by_a_newer_version TEXT");
    await db.close();
    const second = await seedTask(store, { nextPollAt: clock.now() });
    clock.advance(60);
    const claimed = await store.claimDuePolls({ leaseOwner: "w2", ...lease });
    expect(claimed.map((r) => r.id).sort()).toEqual([first.id, second.id].sort());
    expect(Object.keys(claimed[0])).not.toContain("added_by_a_newer_version");
    expect((await store.get(first.id, first.user_id))?.lease_owner).toBe("w2");
    await store.close();
  });

  test("a database created at the first migration upgrades in place, keeping its rows and backfilling their events", async () => {
    const url = await target.fresh();
    const { db, schema } = await openTaskDatabase({ url });
    expect(await migrate(db, { schema, to: "0001_create_mcp_tasks" })).toEqual(["0001_create_mcp_tasks"]);
    expect(await columns(db)).toHaveLength(26);
    const at = "2026-01-02T03:04:05.000Z";
    const ts = db.dialect === "postgres" ? "::timestamptz" : "";
    for (const [id, status, notification] of [
      ["old-done", "completed", "pending"],
      ["old-live", "working", "none"],
    ]) {
      await db.rows(
        `INSERT INTO mcp_tasks (id, user_id, thread_id, server_name, driver_name, remote_task_id, task_name, status, driver_data,
           notification_status, poll_attempt_count, consecutive_poll_error_count, created_at, updated_at)
         VALUES ($1, 'alice', 't', 'jobs', 'ordinary-tools', $1, 'report', $2, '{}', $3, 0, 0, $4${ts}, $4${ts})`,
        [id, status, notification, at],
      );
    }
    await db.close();

    const store = await openStore(url, new ManualClock());
    expect(await store.get("old-done", "alice")).toMatchObject({ event_version: 1, next_notification_at: new Date(at), result_truncated: false, dispatch_attempt: 0 });
    expect(await store.get("old-live", "alice")).toMatchObject({ event_version: 0, next_notification_at: null, status: "working" });
    await store.close();

    const again = await openTaskDatabase({ url });
    expect(await columns(again.db)).toEqual([...TASK_COLUMNS]);
    expect(await migrate(again.db, { schema: again.schema })).toEqual([]);
    await again.db.close();
  });

  test("a database at 0004 upgrades to the remote scope: rows, indexes and the handle's name kept; the key is per scope", async () => {
    const url = await target.fresh();
    const { db, schema } = await openTaskDatabase({ url });
    expect((await migrate(db, { schema, to: "0004_claim_indexes" })).at(-1)).toBe("0004_claim_indexes");
    const ts = db.dialect === "postgres" ? "::timestamptz" : "";
    const insert = (id: string, user: string, remote: string, scope?: string) =>
      db.rows(
        `INSERT INTO mcp_tasks (id, user_id, thread_id, server_name, driver_name, remote_task_id, task_name, status, driver_data,
           notification_status, poll_attempt_count, consecutive_poll_error_count, created_at, updated_at${scope === undefined ? "" : ", remote_scope"})
         VALUES ($1, $2, 't', 'jobs', 'ordinary-tools', $3, 'report', 'working', '{"k":1}', 'none', 2, 0, $4${ts}, $4${ts}${scope === undefined ? "" : ", $5"})`,
        [id, user, remote, "2026-01-02T03:04:05.000Z", ...(scope === undefined ? [] : [scope])],
      );
    await insert("a-1", "alice", "job-1");
    await insert("b-1", "bob", "job-1");
    await db.close();

    const store = await openStore(url, new ManualClock());
    expect(await store.get("a-1", "alice")).toMatchObject({ remote_task_id: "job-1", remote_scope: "", poll_attempt_count: 2, driver_data: { k: 1 }, status: "working" });
    expect(await store.get("b-1", "bob")).toMatchObject({ remote_scope: "" });
    await store.close();

    const again = await openTaskDatabase({ url });
    expect(await columns(again.db)).toEqual([...TASK_COLUMNS]);
    expect(await indexes(again.db)).toEqual(INDEXES);
    const unique = /uq_mcp_tasks_user_server_remote|mcp_tasks\.user_id, mcp_tasks\.server_name, mcp_tasks\.remote_scope, mcp_tasks\.remote_task_id/;
    const reinsert = (id: string, user: string, remote: string, scope?: string) =>
      again.db.rows(
        `INSERT INTO mcp_tasks (id, user_id, thread_id, server_name, driver_name, remote_task_id, task_name, status, driver_data,
           notification_status, poll_attempt_count, consecutive_poll_error_count, created_at, updated_at, remote_scope)
         VALUES ($1, $2, 't', 'jobs', 'ordinary-tools', $3, 'report', 'working', '{}', 'none', 0, 0, $4${ts}, $4${ts}, $5)`,
        [id, user, remote, "2026-01-02T03:04:05.000Z", scope ?? ""],
      );
    await expect(reinsert("a-2", "alice", "job-1")).rejects.toThrow(unique);
    await reinsert("a-3", "alice", "job-1", "child-x");
    await expect(reinsert("a-4", "alice", "job-1", "child-x")).rejects.toThrow(unique);
    expect(await migrate(again.db, { schema: again.schema })).toEqual([]);
    await again.db.close();
  });

  test("a database at 0005 upgrades to poll_deferred_at: its rows read null, and their first deferral sets it", async () => {
    const url = await target.fresh();
    const { db, schema } = await openTaskDatabase({ url });
    expect((await migrate(db, { schema, to: "0005_remote_scope" })).at(-1)).toBe("0005_remote_scope");
    const at = "2026-01-02T03:04:05.000Z";
    const ts = db.dialect === "postgres" ? "::timestamptz" : "";
    await db.rows(
      `INSERT INTO mcp_tasks (id, user_id, thread_id, server_name, driver_name, remote_task_id, task_name, status, driver_data,
         notification_status, poll_attempt_count, consecutive_poll_error_count, created_at, updated_at, next_poll_at)
       VALUES ('old-live', 'alice', 't', 'jobs', 'ordinary-tools', 'job-1', 'report', 'working', '{}', 'none', 1, 0, $1${ts}, $1${ts}, $1${ts})`,
      [at],
    );
    await db.close();

    const clock = new ManualClock(new Date("2026-01-02T03:05:00.000Z"));
    const store = await openStore(url, clock);
    expect(await store.get("old-live", "alice")).toMatchObject({ status: "working", poll_deferred_at: null });
    const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", leaseSeconds: 30, limit: 10 });
    expect(claimed).toMatchObject({ id: "old-live", poll_deferred_at: null });
    const next = new Date(clock.current.getTime() + 5000);
    expect(await store.deferPoll({ taskId: "old-live", leaseOwner: "w1", leaseExpiresAt: claimed.lease_expires_at, nextPollAt: next, since: clock.current })).toBe(true);
    expect(await store.get("old-live", "alice")).toMatchObject({ poll_deferred_at: clock.current, next_poll_at: next });
    await store.close();

    const again = await openTaskDatabase({ url });
    expect(await columns(again.db)).toEqual([...TASK_COLUMNS]);
    expect(await migrate(again.db, { schema: again.schema })).toEqual([]);
    await again.db.close();
  });
});
