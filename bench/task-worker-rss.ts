/**
 * For the worker memory figure, in a process of its own: `<config> <database url> <ticks> <seeded at>` runs
 * `startTaskWorker` with the configured driver against the job server for `ticks` ticks, then prints its memory
 * and how many polls it applied as JSON. The clock starts at the seeded rows' due time and moves one poll interval
 * per tick, so every row is due at every tick and each tick claims a full `max_concurrent_polls` batch.
 */
import { performance } from "node:perf_hooks";
import { silentLogger } from "./built";
import { createTaskRuntime } from "../dist/cjs/tasks/index.cjs";
import { startTaskWorker, type TaskWorkerTickReport } from "../dist/cjs/worker/index.cjs";
import { ManualClock } from "../__tests__/fixtures/clock";

async function main(): Promise<void> {
  const [configPath, databaseUrl, ticksArg, seededAt] = process.argv.slice(2);
  const target = Number(ticksArg);
  const clock = new ManualClock(new Date(seededAt));
  const runtime = await createTaskRuntime({ configPath, databaseUrl, clock: clock.now, logger: silentLogger });
  const interval = runtime.settings.poll_interval_seconds;
  let applied = 0;
  let ticks = 0;
  let settle!: (error?: Error) => void;
  const finished = new Promise<void>((resolve, reject) => {
    settle = (error) => (error ? reject(error) : resolve());
  });
  const onTick = (report: TaskWorkerTickReport) => {
    ticks += 1;
    const trouble = report.errors + report.retried + report.failed + report.discarded;
    if (trouble > 0) settle(new Error(`tick ${ticks} did not go cleanly: ${JSON.stringify({ ...report, polls: undefined })}`));
    applied += report.applied;
    if (ticks >= target) settle();
  };
  const t = performance.now();
  const worker = startTaskWorker({ runtime, intervalMs: 0, clock: () => clock.advance(interval), logger: silentLogger, onTick, onError: (err) => settle(err as Error) });
  await finished;
  const ms = performance.now() - t;
  await worker.stop();
  global.gc?.();
  const { rss, heapUsed } = process.memoryUsage();
  console.log(JSON.stringify({ rss, heapUsed, ticks, applied, ms }));
  await runtime.stop();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
