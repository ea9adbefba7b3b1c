/**
 * For the RSS figure, in processes of their own: `seed <dir> <due> <terminal>` fills a SQLite file with due and
 * finished rows; `work <dir>` is one task worker on it: ticks (cancels, claim + apply with a zero-latency
 * driver, notifications) until nothing is due, then prints its RSS in bytes.
 */
import * as path from "node:path";
import { migrate, openTaskDatabase, openTaskStore, TaskSnapshot } from "../dist/cjs/tasks/index.cjs";
import { seedRows } from "./tasks-seed";

async function main(): Promise<void> {
  const [mode, dir, due, terminal] = process.argv.slice(2);
  const url = `sqlite:${path.join(dir, "tasks.sqlite")}`;
  const at = new Date("2026-03-01T12:00:00.000Z");
  if (mode === "seed") {
    const { db } = await openTaskDatabase({ url });
    await migrate(db);
    await seedRows(db, Number(due), Number(terminal), at);
    await db.close();
    return;
  }
  const store = await openTaskStore({ url, clock: () => at });
  const done = new TaskSnapshot({ status: "completed", result: { ok: true } });
  const lease = { leaseOwner: "rss", leaseSeconds: 60, limit: 50 };
  for (let tick = 0; ; tick += 1) {
    await store.claimCancels(lease);
    const rows = await store.claimDuePolls(lease);
    await store.applySnapshots(rows.map((task) => ({ task, leaseOwner: "rss", snapshot: done, nextPollAt: null })));
    await store.claimNotificationWork({ ...lease, trackingDegradedAfterErrors: 3 });
    if (rows.length === 0) break;
  }
  await store.listByThread("thread", "bench", { limit: 50 });
  global.gc?.();
  console.log(String(process.memoryUsage().rss));
  await store.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
