/**
 * Several stores on one database at once: separate processes on one SQLite file, separate pools on
 * PostgreSQL. Leases are long enough never to expire, so every row must be claimed and finished exactly once.
 */
import { afterAll, afterEach, describe, expect, test } from "@jest/globals";
import { openTaskDatabase, TaskSnapshot, type TaskStore } from "../../../lib/tasks";
import { killChildren, ManualClock, openStore, startChild, T0, targets } from "./helpers";
import { drain, type LoopResult } from "./worker-loop";

const ROWS = 2_000;
const WORKERS = 4;
const BATCH = 25;

afterEach(killChildren);

async function seed(store: TaskStore, rows: number): Promise<string[]> {
  const ids = Array.from({ length: rows }, (_, i) => `race-${String(i).padStart(5, "0")}`);
  const working = new TaskSnapshot({ status: "working" });
  for (const id of ids) {
    await store.create({ id, userId: "u", threadId: "t", serverName: "s", driverName: "d", remoteTaskId: id, taskName: "job", snapshot: working, nextPollAt: T0 });
  }
  return ids;
}

function expectExactlyOnce(ids: string[], claimedLists: string[][], appliedLists: string[][]): void {
  const claimed = claimedLists.flat();
  const applied = appliedLists.flat();
  expect(claimed).toHaveLength(ids.length);
  expect(new Set(claimed).size).toBe(ids.length);
  expect([...applied].sort()).toEqual([...ids].sort());
  // Work was actually shared, not drained by one.
  expect(claimedLists.filter((l) => l.length > 0).length).toBeGreaterThan(1);
}

async function finalRows(url: string): Promise<{ status: string; poll_attempt_count: number; event_version: number }[]> {
  const { db } = await openTaskDatabase({ url });
  const rows = await db.rows("SELECT status, poll_attempt_count, event_version FROM mcp_tasks");
  await db.close();
  return rows as { status: string; poll_attempt_count: number; event_version: number }[];
}

describe.each(targets())("concurrent stores on $name", (target) => {
  afterAll(() => target.cleanup());

  /** WORKERS stores on one database, started together: processes on SQLite, separate pools on PostgreSQL. */
  async function runWorkers(url: string, opts: { mixed: boolean }): Promise<LoopResult[]> {
    const loop = { leaseSeconds: 3600, batch: BATCH, mixed: opts.mixed };
    if (target.name === "sqlite") {
      // No retry after SQLITE_BUSY: busy_timeout and IMMEDIATE transactions alone must keep it from escaping.
      const children = Array.from({ length: WORKERS }, (_, i) => startChild("drain", { url, owner: `worker-${i}`, at: T0.toISOString(), busyRetries: 0, ...loop }));
      for (const child of children) expect(await child.next()).toBe("ready");
      for (const child of children) child.send("go");
      const results = await Promise.all(children.map(async (child) => JSON.parse(await child.next()) as LoopResult));
      await Promise.all(children.map((c) => c.exit));
      return results;
    }
    const clock = new ManualClock();
    const stores = await Promise.all(Array.from({ length: WORKERS }, () => openStore(url, clock, { poolSize: 2 })));
    const results = await Promise.all(stores.map((store, i) => drain(store, { owner: `worker-${i}`, ...loop })));
    await Promise.all(stores.map((s) => s.close()));
    return results;
  }

  async function seeded(rows: number): Promise<{ url: string; ids: string[] }> {
    const url = await target.fresh();
    const seeder = await openStore(url, new ManualClock());
    const ids = await seed(seeder, rows);
    await seeder.close();
    return { url, ids };
  }

  test(`${WORKERS} stores claim and complete ${ROWS} due rows: each row claimed once and terminal once`, async () => {
    const { url, ids } = await seeded(ROWS);
    const results = await runWorkers(url, { mixed: false });
    expectExactlyOnce(ids, results.map((r) => r.claimed), results.map((r) => r.applied));
    const rows = await finalRows(url);
    expect(rows.every((r) => r.status === "completed" && r.poll_attempt_count === 1 && r.event_version === 1)).toBe(true);
  });

  test("the same with read-then-write transactions mixed in (claims given back, notification claims)", async () => {
    const { url, ids } = await seeded(ROWS / 2);
    const results = await runWorkers(url, { mixed: true });
    const released = results.flatMap((r) => r.released);
    expect([...released].sort()).toEqual(ids.filter((id) => id.endsWith("0")));
    expect([...results.flatMap((r) => r.applied)].sort()).toEqual(ids);
    // Each finished row's notification is claimed exactly once (its lease outlives the test).
    expect([...results.flatMap((r) => r.notified)].sort()).toEqual(ids);
    const rows = await finalRows(url);
    expect(rows.every((r) => r.status === "completed" && r.event_version === 1)).toBe(true);
    expect(rows.filter((r) => r.poll_attempt_count === 2)).toHaveLength(released.length);
  });

  test("two processes migrating one empty database at once end with one schema and no error; a second run is a no-op", async () => {
    const url = await target.fresh();
    const children = [startChild("migrate", { url }), startChild("migrate", { url })];
    for (const child of children) expect(await child.next()).toBe("ready");
    for (const child of children) child.send("go");
    const applied = await Promise.all(children.map(async (c) => JSON.parse(await c.next()) as string[]));
    await Promise.all(children.map((c) => c.exit));
    const all = ["0001_create_mcp_tasks", "0002_task_results", "0003_task_notifications", "0004_claim_indexes", "0005_remote_scope", "0006_poll_deferred_at"];
    expect(applied.map((a) => a.length).sort()).toEqual([0, all.length]);
    expect(applied.flat()).toEqual(all);
    const again = startChild("migrate", { url });
    expect(await again.next()).toBe("ready");
    again.send("go");
    expect(JSON.parse(await again.next())).toEqual([]);
    await again.exit;
    const { db } = await openTaskDatabase({ url });
    const log = await db.rows("SELECT name FROM mcp_harness_migrations ORDER BY name");
    await db.close();
    expect(log.map((r) => r.name)).toEqual(all);
  });
});

describe("a killed worker on SQLite", () => {
  const [sqlite] = targets();

  test("SIGKILL while holding claims: after restart on the same file nothing is lost and nothing applied twice", async () => {
    const url = await sqlite.fresh();
    const clock = new ManualClock();
    const seeder = await openStore(url, clock);
    const ids = await seed(seeder, 200);
    await seeder.close();

    const child = startChild("hold", { url, owner: "doomed", at: T0.toISOString(), leaseSeconds: 60, batch: 20, batches: 3 });
    const appliedByChild: string[] = [];
    let held: string[] = [];
    for (;;) {
      const line = await child.next();
      if (line.startsWith("applied ")) appliedByChild.push(...(JSON.parse(line.slice(8)) as string[]));
      else if (line.startsWith("holding ")) {
        held = JSON.parse(line.slice(8)) as string[];
        break;
      }
    }
    child.kill("SIGKILL");
    await child.exit;
    expect(appliedByChild).toHaveLength(60);
    expect(held).toHaveLength(20);

    // The restart comes after the dead worker's leases ran out (by the clock, not by waiting).
    clock.advance(61);
    const store = await openStore(url, clock);
    const appliedAfter: string[] = [];
    for (;;) {
      const rows = await store.claimDuePolls({ leaseOwner: "survivor", leaseSeconds: 60, limit: 50 });
      if (rows.length === 0) break;
      const ok = await store.applySnapshots(rows.map((task) => ({ task, leaseOwner: "survivor", snapshot: new TaskSnapshot({ status: "completed" }), nextPollAt: null })));
      appliedAfter.push(...rows.filter((_, j) => ok[j]).map((r) => r.id));
    }
    await store.close();
    expect(appliedAfter.filter((id) => appliedByChild.includes(id))).toEqual([]);
    expect([...appliedByChild, ...appliedAfter].sort()).toEqual([...ids].sort());
    const rows = await finalRows(url);
    expect(rows.every((r) => r.status === "completed" && r.event_version === 1)).toBe(true);
    // The held rows were claimed twice (by the dead worker, then again), the rest once.
    expect(rows.filter((r) => r.poll_attempt_count === 2)).toHaveLength(held.length);
  });
});
