/** The worker loop the concurrency tests run, in child processes (SQLite) or beside each other (PostgreSQL). */
import { TaskSnapshot, type TaskStore } from "../../../lib/tasks";

export interface LoopOptions {
  owner: string;
  leaseSeconds: number;
  batch: number;
  /** Also give back every row whose id ends in 0 on its first claim (release with an error, due again at
   * once), and claim notification work after each batch: transactions that read before they write. */
  mixed?: boolean;
}

export interface LoopResult {
  claimed: string[];
  applied: string[];
  released: string[];
  notified: string[];
}

export async function drain(store: TaskStore, opts: LoopOptions): Promise<LoopResult> {
  const done = new TaskSnapshot({ status: "completed", result: { by: opts.owner } });
  const out: LoopResult = { claimed: [], applied: [], released: [], notified: [] };
  const lease = { leaseOwner: opts.owner, leaseSeconds: opts.leaseSeconds, limit: opts.batch };
  for (;;) {
    const rows = await store.claimDuePolls(lease);
    if (opts.mixed) out.notified.push(...(await store.claimNotificationWork({ ...lease, trackingDegradedAfterErrors: 3 })).map((r) => r.id));
    if (rows.length === 0) break;
    out.claimed.push(...rows.map((r) => r.id));
    const giveBack = opts.mixed ? rows.filter((r) => r.id.endsWith("0") && r.poll_attempt_count === 1) : [];
    for (const row of giveBack) {
      const ok = await store.releaseClaim({ taskId: row.id, leaseOwner: opts.owner, nextPollAt: store.now(), error: "transient", trackingDegradedAfterErrors: 3 });
      if (ok) out.released.push(row.id);
    }
    const rest = rows.filter((r) => !giveBack.includes(r));
    const results = await store.applySnapshots(rest.map((task) => ({ task, leaseOwner: opts.owner, snapshot: done, nextPollAt: null })));
    out.applied.push(...rest.filter((_, j) => results[j]).map((r) => r.id));
  }
  if (opts.mixed) out.notified.push(...(await store.claimNotificationWork({ ...lease, limit: 1000, trackingDegradedAfterErrors: 3 })).map((r) => r.id));
  return out;
}
