/**
 * A store in a process of its own, for the cross-process tests. Commands:
 * - `migrate {url}`: opens the database, prints `ready`, waits for a line on stdin, migrates; prints the
 *   applied names as JSON.
 * - `drain {url, owner, at, leaseSeconds, batch, mixed?, busyRetries?}`: opens the store, prints `ready`, waits
 *   for a line on stdin (so that all workers start together), then runs `drain` (worker-loop.ts) until no row
 *   is due; prints its result as JSON.
 * - `hold {url, owner, at, leaseSeconds, batch, batches}`: completes `batches` batches (one line of applied ids
 *   each), then claims one more batch, prints `holding <ids>` and waits to be killed.
 */
import { createInterface } from "node:readline";
import { migrate, openTaskDatabase, openTaskStore, TaskSnapshot } from "../../../lib/tasks";
import { drain } from "./worker-loop";

interface Args {
  url: string;
  owner: string;
  at: string;
  leaseSeconds: number;
  batch: number;
  batches: number;
  mixed?: boolean;
  busyRetries?: number;
}

/** Prints `ready` and waits for a line on stdin, so that the parent can start several children together. */
async function startSignal(): Promise<void> {
  console.log("ready");
  const input = createInterface({ input: process.stdin });
  await new Promise((resolve) => input.once("line", resolve));
  input.close();
}

async function main(): Promise<void> {
  const [command, json] = process.argv.slice(2);
  const args = JSON.parse(json) as Args;
  if (command === "migrate") {
    const { db, schema } = await openTaskDatabase({ url: args.url });
    await startSignal();
    const applied = await migrate(db, { schema });
    await db.close();
    console.log(JSON.stringify(applied));
    return;
  }
  const at = new Date(args.at);
  const store = await openTaskStore({ url: args.url, clock: () => at, poolSize: 2, busyRetries: args.busyRetries });
  if (command === "drain") {
    await startSignal();
    const result = await drain(store, { owner: args.owner, leaseSeconds: args.leaseSeconds, batch: args.batch, mixed: args.mixed });
    await store.close();
    console.log(JSON.stringify(result));
    return;
  }
  const done = new TaskSnapshot({ status: "completed", result: { by: args.owner } });
  const claimBatch = () => store.claimDuePolls({ leaseOwner: args.owner, leaseSeconds: args.leaseSeconds, limit: args.batch });
  for (let i = 0; i < args.batches; i += 1) {
    const rows = await claimBatch();
    if (rows.length === 0) break;
    const results = await store.applySnapshots(rows.map((task) => ({ task, leaseOwner: args.owner, snapshot: done, nextPollAt: null })));
    const ok = rows.filter((_, j) => results[j]).map((r) => r.id);
    console.log(`applied ${JSON.stringify(ok)}`);
  }
  const held = await claimBatch();
  console.log(`holding ${JSON.stringify(held.map((r) => r.id))}`);
  await new Promise(() => undefined);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
