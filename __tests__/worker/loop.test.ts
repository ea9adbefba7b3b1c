/**
 * startTaskWorker: a short interval drives submitted tasks to delivery (waiting on the notifier's events), ticks
 * never overlap, a failed tick is logged and the loop goes on, and stop() drains or abandons the tick in progress.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import { once } from "node:events";
import { RecordingLogger } from "../../lib";
import type { TaskRuntime } from "../../lib/tasks";
import { createTaskWorkerGraph, startTaskWorker, type TaskWorker, type TaskWorkerTickReport } from "../../lib/worker";
import { startHttpFixture, TaskBoard } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";
import { Clock, EventedNotifier, setupRuntime, submitJob } from "./helpers";

let board: TaskBoard;
let http: StreamableHttpFixture;
const runtimes: TaskRuntime[] = [];
const workers: TaskWorker[] = [];

beforeAll(async () => {
  board = new TaskBoard();
  http = await startHttpFixture({ name: "jobs", toolNames: [], taskBoard: board });
});
afterEach(async () => {
  board.statusGate = null;
  for (const worker of workers.splice(0)) await worker.stop();
  for (const runtime of runtimes.splice(0)) await runtime.stop();
});
afterAll(async () => {
  await http.close();
});

/** A runtime on a manual clock that moves 5 s per tick (the poll interval): each tick finds the next poll due. */
async function setup(opts: { leaseOwner?: string; databaseUrl?: string; clock?: Clock } = {}) {
  const clock = opts.clock ?? new Clock();
  const s = await setupRuntime({ url: http.url, clock: clock.now, leaseOwner: opts.leaseOwner, databaseUrl: opts.databaseUrl });
  runtimes.push(s.runtime);
  return { ...s, clock, notifier: new EventedNotifier() };
}

test("a short interval polls submitted tasks to completion and delivers each event once", async () => {
  const s = await setup();
  const tasks = await Promise.all([1, 2, 3].map((steps) => submitJob(s.runtime, { label: `j${steps}`, steps }, { thread: `th-${steps}` })));
  const ticks: TaskWorkerTickReport[] = [];
  const worker = startTaskWorker({
    runtime: s.runtime,
    notifier: s.notifier,
    intervalMs: 1,
    clock: () => s.clock.advance(5),
    logger: new RecordingLogger(),
    onTick: (report) => void ticks.push(report),
  });
  workers.push(worker);
  await s.notifier.waitFor(3);
  await worker.stop();
  expect(s.notifier.deliveries.map((d) => [d.delivery.threadId, d.delivery.event.status]).sort()).toEqual([
    ["th-1", "completed"],
    ["th-2", "completed"],
    ["th-3", "completed"],
  ]);
  for (const task of tasks) expect((await s.runtime.store.get(task.id, "ann"))!.status).toBe("completed");
  expect(ticks.reduce((n, t) => n + t.applied, 0)).toBe(1 + 2 + 3); // one applied answer per status call
  expect(ticks.reduce((n, t) => n + t.notified, 0)).toBe(3);
  expect(worker.ticks).toBe(ticks.length);
});

test("a tick that took a full batch is followed at once: more due tasks than max_concurrent_polls need no extra intervals", async () => {
  const clock = new Clock();
  const s = await setupRuntime({ url: http.url, clock: clock.now, tasks: { max_concurrent_polls: 2 } });
  runtimes.push(s.runtime);
  for (let i = 0; i < 5; i += 1) await submitJob(s.runtime, { label: `b${i}` }, { thread: `th-b${i}` });
  const reports: TaskWorkerTickReport[] = [];
  let done!: () => void;
  const allApplied = new Promise<void>((resolve) => (done = resolve));
  const worker = startTaskWorker({
    runtime: s.runtime,
    intervalMs: 3_600_000, // only the backlog rule can run a second tick within the test
    clock: () => (reports.length === 0 ? clock.advance(5) : clock.now()),
    onTick: (report) => {
      reports.push(report);
      if (reports.reduce((n, r) => n + r.applied, 0) === 5) done();
    },
  });
  workers.push(worker);
  await allApplied;
  await worker.stop();
  expect(reports.map((r) => [r.claimed, r.backlog])).toEqual([
    [2, true],
    [2, true],
    [1, false],
  ]);
});

test("ticks never overlap: each starts after the previous one ended", async () => {
  const s = await setup();
  const order: string[] = [];
  let ended = 0;
  let done!: () => void;
  const fiveTicks = new Promise<void>((resolve) => (done = resolve));
  const worker = startTaskWorker({
    runtime: s.runtime,
    intervalMs: 0,
    clock: () => {
      order.push("start");
      return s.clock.advance(1);
    },
    onTick: async () => {
      // A slow observer: the next tick must still wait for it.
      for (let i = 0; i < 5; i += 1) await new Promise((resolve) => setImmediate(resolve));
      order.push("end");
      if (++ended === 5) done();
    },
  });
  workers.push(worker);
  await fiveTicks;
  await worker.stop();
  expect(order.slice(0, 10)).toEqual(["start", "end", "start", "end", "start", "end", "start", "end", "start", "end"]);
});

test("each tick invokes the graph with a signal of its own: the worker's long-lived signal collects nothing", async () => {
  const s = await setup();
  const real = createTaskWorkerGraph({ runtime: s.runtime });
  const signals: AbortSignal[] = [];
  let done!: () => void;
  const fourTicks = new Promise<void>((resolve) => (done = resolve));
  const recording = new Proxy(real, {
    get(target, key, receiver) {
      if (key !== "invoke") return Reflect.get(target, key, receiver);
      return (input: Parameters<typeof real.invoke>[0], config: Parameters<typeof real.invoke>[1]) => {
        signals.push(config!.signal!);
        return target.invoke(input, config);
      };
    },
  });
  const worker = startTaskWorker({
    graph: recording,
    intervalMs: 0,
    clock: () => s.clock.advance(1),
    onTick: () => {
      if (signals.length === 4) done();
    },
  });
  workers.push(worker);
  await fourTicks;
  await worker.stop();
  expect(new Set(signals).size).toBe(4);
});

test("a failed tick is logged and the loop goes on", async () => {
  const s = await setup();
  const logger = new RecordingLogger();
  const errors: unknown[] = [];
  let calls = 0;
  let good = 0;
  let done!: () => void;
  const recovered = new Promise<void>((resolve) => (done = resolve));
  const worker = startTaskWorker({
    runtime: s.runtime,
    intervalMs: 0,
    logger,
    clock: () => (++calls === 1 ? new Date("not a date") : s.clock.advance(1)),
    onError: (err) => errors.push(err),
    onTick: () => {
      if (++good === 2) done();
    },
  });
  workers.push(worker);
  // `Invalid Date` has no ISO form: the first tick throws before the graph runs.
  await recovered;
  await worker.stop();
  expect(errors).toHaveLength(1);
  expect(logger.messages("error")[0]).toMatch(/^MCP task worker tick failed; the next tick runs as scheduled: /);
});

describe("stop()", () => {
  test("lets the tick in progress finish: its answer is applied before stop resolves", async () => {
    const s = await setup();
    const task = await submitJob(s.runtime, { label: "drain" });
    let release!: () => void;
    board.statusGate = new Promise<void>((resolve) => (release = resolve));
    const arrived = once(board.events, "status");
    const worker = startTaskWorker({ runtime: s.runtime, intervalMs: 0, clock: () => s.clock.advance(5) });
    workers.push(worker);
    await arrived;
    let stopped = false;
    const stopping = worker.stop().then(() => (stopped = true));
    for (let i = 0; i < 20; i += 1) await new Promise((resolve) => setImmediate(resolve));
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect((await s.runtime.store.get(task.id, "ann"))!.status).toBe("completed");
    expect(worker.ticks).toBe(1); // no tick after the stop
  });

  test("past the drain timeout it abandons the tick; the lease expires and another worker takes the task over", async () => {
    const clock = new Clock();
    const s = await setup({ clock, leaseOwner: "worker-a" });
    const task = await submitJob(s.runtime, { label: "hung" });
    let release!: () => void;
    board.statusGate = new Promise<void>((resolve) => (release = resolve)); // a server that does not answer
    const arrived = once(board.events, "status");
    const logger = new RecordingLogger();
    const worker = startTaskWorker({ runtime: s.runtime, intervalMs: 0, drainTimeoutMs: 0, logger, clock: () => clock.advance(5) });
    workers.push(worker);
    await arrived;
    await worker.stop();
    expect(logger.messages("warn")).toContain("MCP task worker abandoned its tick in progress; its leases expire for recovery");
    await s.runtime.stop(); // aborts the hung remote call
    board.statusGate = null;
    release();
    const b = await setup({ clock, databaseUrl: s.databaseUrl, leaseOwner: "worker-b" });
    expect(await b.runtime.store.get(task.id, "ann")).toMatchObject({ lease_owner: "worker-a", status: "submitted" });
    const graph = createTaskWorkerGraph({ runtime: b.runtime });
    // Before the lease expires the row is not due for anyone else.
    expect(await graph.invoke({ now: clock.advance(1).toISOString() })).toMatchObject({ claimed: 0 });
    const late = await graph.invoke({ now: clock.advance(b.runtime.settings.lease_seconds).toISOString() });
    expect(late).toMatchObject({ claimed: 1, applied: 1, polls: [{ taskId: task.id, outcome: "applied", status: "completed" }] });
  });
});
