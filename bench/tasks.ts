/**
 * The task store figures: claim + apply throughput with 10,000 due rows and a zero-latency driver (1 worker on
 * SQLite; 1, 2 and 4 on PostgreSQL), p99 claim latency, the same work done by pg-boss (`fetch` + `complete`) on
 * the same PostgreSQL with the same batch size and worker counts, and worker RSS with 1,000 vs 100,000 rows.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import { promisify } from "node:util";
import { Client } from "pg";
import PgBoss from "pg-boss";
import "./built";
import { migrate, openTaskDatabase, openTaskStore, TaskSnapshot } from "../dist/cjs/tasks/index.cjs";
import { makeTempDir } from "../__tests__/fixtures/config";
import { TSX_CJS_REGISTER } from "../__tests__/fixtures/stdio";
import { fmtMs, median, type Row } from "./stats";
import { seedRows } from "./tasks-seed";

const ROWS = Number(process.env.BENCH_TASK_ROWS ?? 10_000);
const BATCH = Number(process.env.BENCH_TASK_BATCH ?? 50);
const PG_URL = process.env.MCP_HARNESS_BENCH_POSTGRES_URL ?? process.env.MCP_HARNESS_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";
/** Runs of each configuration, ours and pg-boss alternating; the table shows medians. */
const REPEAT = Number(process.env.BENCH_TASK_REPEAT ?? 3);
const AT = new Date("2026-03-01T12:00:00.000Z");
const run = promisify(execFile);

function p99(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)];
}

interface Throughput {
  perSecond: number;
  claimP99: number;
}

/** `workers` stores (own connections each) drain `ROWS` due rows: claim a batch, apply it, repeat. */
async function ours(url: string, workers: number): Promise<Throughput> {
  const { db, schema } = await openTaskDatabase({ url });
  await migrate(db, { schema });
  await seedRows(db, ROWS, 0, AT);
  // Statistics as autovacuum would have them on a table that grew by itself (pg-boss's gets the same).
  await db.rows("ANALYZE mcp_tasks");
  await db.close();
  const stores = await Promise.all(Array.from({ length: workers }, () => openTaskStore({ url, clock: () => AT, poolSize: 2 })));
  const done = new TaskSnapshot({ status: "completed", result: { ok: true } });
  const claims: number[] = [];
  let applied = 0;
  const t = performance.now();
  await Promise.all(
    stores.map(async (store, i) => {
      const owner = `bench-${i}`;
      for (;;) {
        const c = performance.now();
        const rows = await store.claimDuePolls({ leaseOwner: owner, leaseSeconds: 300, limit: BATCH });
        claims.push(performance.now() - c);
        if (rows.length === 0) return;
        const ok = await store.applySnapshots(rows.map((task) => ({ task, leaseOwner: owner, snapshot: done, nextPollAt: null })));
        applied += ok.filter(Boolean).length;
      }
    }),
  );
  const elapsed = performance.now() - t;
  await Promise.all(stores.map((s) => s.close()));
  if (applied !== ROWS) throw new Error(`applied ${applied} of ${ROWS}`);
  return { perSecond: (ROWS / elapsed) * 1000, claimP99: p99(claims) };
}

/** The peer: pg-boss workers `fetch` a batch and `complete` it, on the same PostgreSQL. */
async function pgBoss(baseUrl: string, schema: string, workers: number): Promise<Throughput> {
  const options = { connectionString: baseUrl, schema, max: 2, supervise: false, schedule: false, migrate: true } as const;
  const seeder = new PgBoss({ ...options, max: 4 });
  seeder.on("error", () => undefined);
  await seeder.start();
  await seeder.createQueue("bench");
  for (let start = 0; start < ROWS; start += 1000) {
    await seeder.insert(Array.from({ length: Math.min(1000, ROWS - start) }, (_, i) => ({ name: "bench", data: { n: start + i } })));
  }
  const client = new Client({ connectionString: baseUrl });
  await client.connect();
  await client.query(`ANALYZE ${schema}.job`);
  await client.end();
  await seeder.stop({ graceful: false, wait: true });
  const bosses = await Promise.all(
    Array.from({ length: workers }, async () => {
      const boss = new PgBoss({ ...options, migrate: false });
      boss.on("error", () => undefined);
      return boss.start();
    }),
  );
  const fetches: number[] = [];
  let completed = 0;
  const t = performance.now();
  await Promise.all(
    bosses.map(async (boss) => {
      for (;;) {
        const c = performance.now();
        const jobs = await boss.fetch("bench", { batchSize: BATCH });
        fetches.push(performance.now() - c);
        if (!jobs || jobs.length === 0) return;
        await boss.complete("bench", jobs.map((j) => j.id));
        completed += jobs.length;
      }
    }),
  );
  const elapsed = performance.now() - t;
  await Promise.all(bosses.map((b) => b.stop({ graceful: false, wait: true })));
  if (completed !== ROWS) throw new Error(`pg-boss completed ${completed} of ${ROWS}`);
  return { perSecond: (ROWS / elapsed) * 1000, claimP99: p99(fetches) };
}

async function postgresReachable(): Promise<boolean> {
  const client = new Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

async function workerRss(due: number, terminal: number): Promise<number> {
  const dir = await makeTempDir("bench-rss-");
  const script = path.join(__dirname, "tasks-worker.ts");
  await run(process.execPath, ["--require", TSX_CJS_REGISTER, script, "seed", dir, String(due), String(terminal)]);
  const { stdout } = await run(process.execPath, ["--expose-gc", "--require", TSX_CJS_REGISTER, script, "work", dir]);
  return Number(stdout.trim());
}

const fmtRate = (perSecond: number) => `${perSecond.toFixed(0)} rows/s`;
const fmtMb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

export async function taskStoreFigures(rows: Row[]): Promise<void> {
  const dir = await makeTempDir("bench-tasks-");
  const sqlite = await ours(`sqlite:${path.join(dir, "tasks.sqlite")}`, 1);
  const schemas: string[] = [];
  const fresh = () => {
    const schema = `bench_${randomBytes(5).toString("hex")}`;
    schemas.push(schema);
    return schema;
  };
  const reachable = await postgresReachable();
  if (!reachable) console.log(`PostgreSQL rows skipped: nothing answers at ${new URL(PG_URL).host}`);
  const results: { workers: number; ours: Throughput; boss: Throughput }[] = [];
  if (reachable) {
    const mid = (runs: Throughput[]): Throughput => ({ perSecond: median(runs.map((r) => r.perSecond)), claimP99: median(runs.map((r) => r.claimP99)) });
    for (const workers of [1, 2, 4]) {
      const a: Throughput[] = [];
      const b: Throughput[] = [];
      for (let i = 0; i < REPEAT; i += 1) {
        a.push(await ours(`${PG_URL}${PG_URL.includes("?") ? "&" : "?"}schema=${fresh()}`, workers));
        b.push(await pgBoss(PG_URL, fresh(), workers));
      }
      results.push({ workers, ours: mid(a), boss: mid(b) });
    }
    const client = new Client({ connectionString: PG_URL });
    await client.connect();
    for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
  }
  const first = results[0];
  rows.push({
    figure: `tasks: claim+apply, ${ROWS} due rows, batch ${BATCH}, 1 worker on SQLite${first ? " / 1 worker on PostgreSQL" : ""}`,
    ours: fmtRate(sqlite.perSecond),
    baseline: first ? fmtRate(first.ours.perSecond) : "-",
    ratio: first ? sqlite.perSecond / first.ours.perSecond : Number.NaN,
    target: "(context)",
  });
  for (const r of results) {
    rows.push({
      figure: `tasks: PostgreSQL claim+apply / pg-boss fetch+complete, ${r.workers} worker(s), throughput (median of ${REPEAT})`,
      ours: fmtRate(r.ours.perSecond),
      baseline: fmtRate(r.boss.perSecond),
      ratio: r.ours.perSecond / r.boss.perSecond,
      target: ">= 1.0",
    });
    rows.push({
      figure: `  p99 claim latency / pg-boss p99 fetch latency, ${r.workers} worker(s)`,
      ours: fmtMs(r.ours.claimP99),
      baseline: fmtMs(r.boss.claimP99),
      ratio: r.ours.claimP99 / r.boss.claimP99,
      target: "(context)",
    });
  }
  if (results.length === 3) {
    rows.push({
      figure: "tasks: PostgreSQL scaling, 4 workers / 1 worker throughput (ours; pg-boss in the baseline column)",
      ours: `${(results[2].ours.perSecond / results[0].ours.perSecond).toFixed(2)}x`,
      baseline: `${(results[2].boss.perSecond / results[0].boss.perSecond).toFixed(2)}x`,
      ratio: results[2].ours.perSecond / results[0].ours.perSecond,
      target: "(context)",
    });
  }
  const small = await workerRss(1_000, 0);
  const large = await workerRss(1_000, 99_000);
  rows.push({
    figure: "tasks: worker RSS, 100,000 rows (99% terminal) / 1,000 rows, SQLite (target: within 20 MB)",
    ours: fmtMb(large),
    baseline: fmtMb(small),
    ratio: large / small,
    target: "+20 MB",
    ok: large - small <= 20 * 1024 * 1024,
  });
}
