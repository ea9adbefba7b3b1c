/**
 * createTaskWorkerGraph on a real SQLite store and the job fixture server (streamable HTTP in process): one
 * invocation is one tick, and its state reports what the tick did.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import { once } from "node:events";
import { MemorySaver } from "@langchain/langgraph";
import { RecordingLogger } from "../../lib";
import type { TaskRuntime } from "../../lib/tasks";
import { createTaskWorkerGraph, tickReport } from "../../lib/worker";
import { startHttpFixture, TaskBoard } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";
import { Clock, EventedNotifier, setupRuntime, submitJob } from "./helpers";

let board: TaskBoard;
let http: StreamableHttpFixture;
const runtimes: TaskRuntime[] = [];

beforeAll(async () => {
  board = new TaskBoard();
  http = await startHttpFixture({ name: "jobs", toolNames: [], taskBoard: board });
});
afterEach(async () => {
  board.statusGate = null;
  for (const runtime of runtimes.splice(0)) await runtime.stop();
});
afterAll(async () => {
  await http.close();
});

async function setup() {
  const clock = new Clock();
  const s = await setupRuntime({ url: http.url, clock: clock.now });
  runtimes.push(s.runtime);
  const notifier = new EventedNotifier();
  const graph = createTaskWorkerGraph({ runtime: s.runtime, notifier });
  return { ...s, clock, notifier, graph };
}

const ZERO = {
  cancelled: 0,
  cancelRetried: 0,
  claimed: 0,
  applied: 0,
  discarded: 0,
  retried: 0,
  failed: 0,
  notified: 0,
  delivered: 0,
  notificationRetried: 0,
  deferred: 0,
  deadLettered: 0,
  errors: 0,
  backlog: false,
};

describe("one tick per invocation", () => {
  test("cancellations, one poll per claimed task, notifications: the state counts each outcome", async () => {
    const s = await setup();
    expect(s.runtime.service.notifier).toBe(s.notifier); // the graph's notifier is the runtime's
    const ok = await submitJob(s.runtime, { label: "ok" });
    const flaky = await submitJob(s.runtime, { label: "flaky", mode: "status_error" });
    const broken = await submitJob(s.runtime, { label: "broken", mode: "malformed" });
    const doomed = await submitJob(s.runtime, { label: "doomed", steps: 5 });
    await s.runtime.service.cancelTask(doomed.id, "th-1", "ann");

    const first = tickReport(await s.graph.invoke({ now: s.clock.advance(5).toISOString() }));
    expect(first).toEqual({
      ...ZERO,
      tickAt: "2026-01-01T00:00:05.000Z",
      cancelled: 1,
      claimed: 3,
      applied: 1,
      retried: 1,
      failed: 1,
      notified: 3, // ok completed, broken failed, doomed cancelled
      polls: expect.arrayContaining([
        { taskId: ok.id, outcome: "applied", status: "completed" },
        { taskId: flaky.id, outcome: "retried" },
        { taskId: broken.id, outcome: "failed-protocol" },
      ]),
    });
    expect(first.polls).toHaveLength(3);
    expect(s.notifier.deliveries.map((d) => [d.delivery.taskId, d.delivery.event.status]).sort()).toEqual(
      [[ok.id, "completed"], [broken.id, "failed"], [doomed.id, "cancelled"]].sort(),
    );
    expect(board.log.cancels).toContain(doomed.remote_task_id);

    // The launched runs succeeded: the next tick confirms them; the flaky task is polled again after its backoff.
    const second = tickReport(await s.graph.invoke({ now: s.clock.advance(5).toISOString() }));
    expect(second).toMatchObject({ ...ZERO, claimed: 1, retried: 1, delivered: 3 });
    const third = tickReport(await s.graph.invoke({ now: s.clock.advance(1).toISOString() }));
    expect(third).toEqual({ ...ZERO, tickAt: "2026-01-01T00:00:11.000Z", polls: [] });
    expect(s.notifier.deliveries).toHaveLength(3);
  });

  test("a result that lands after a cancel request cleared the lease is discarded by the fence", async () => {
    const s = await setup();
    const task = await submitJob(s.runtime, { label: "late", steps: 3 });
    let release!: () => void;
    board.statusGate = new Promise<void>((resolve) => (release = resolve));
    const arrived = once(board.events, "status");
    const tick = s.graph.invoke({ now: s.clock.advance(5).toISOString() });
    await arrived; // the poll is in flight, under this worker's lease
    expect(await s.runtime.service.cancelTask(task.id, "th-1", "ann")).toMatchObject({ lease_owner: null });
    release();
    const report = tickReport(await tick);
    expect(report).toMatchObject({ claimed: 1, applied: 0, discarded: 1, polls: [{ taskId: task.id, outcome: "discarded-by-fence" }] });
    expect((await s.runtime.store.get(task.id, "ann"))!.status).toBe("submitted");
    // The next tick carries the cancel out.
    expect(tickReport(await s.graph.invoke({ now: s.clock.advance(1).toISOString() }))).toMatchObject({ cancelled: 1, notified: 1 });
    expect((await s.runtime.store.get(task.id, "ann"))!.status).toBe("cancelled");
  });

  test("on a thread with a checkpointer, a tick's counters and `now` do not carry into the next", async () => {
    const s = await setup();
    s.graph.checkpointer = new MemorySaver();
    const config = { configurable: { thread_id: "worker-thread" } };
    await submitJob(s.runtime, { label: "a" });
    const first = await s.graph.invoke({ now: s.clock.advance(5).toISOString() }, config);
    expect(first).toMatchObject({ claimed: 1, applied: 1, notified: 1, now: null });
    s.clock.advance(1);
    const second = await s.graph.invoke({}, config); // no `now`: the runtime's clock, not the last tick's
    expect(tickReport(second)).toEqual({ ...ZERO, tickAt: "2026-01-01T00:00:06.000Z", delivered: 1, polls: [] });
  });

  test("the state holds no task row: no remote id, no driver data", async () => {
    const s = await setup();
    const task = await submitJob(s.runtime, { label: "quiet", steps: 2 });
    s.graph.checkpointer = new MemorySaver();
    const config = { configurable: { thread_id: "w" } };
    await s.graph.invoke({ now: s.clock.advance(5).toISOString() }, config);
    const checkpoints = [];
    for await (const c of s.graph.getStateHistory(config)) checkpoints.push(c);
    const text = JSON.stringify(checkpoints);
    expect(text).toContain(task.id);
    expect(text).not.toContain(task.remote_task_id);
    expect(text).not.toContain("job_status");
  });

  test("an unexpected failure of one poll counts as an error; its siblings are applied", async () => {
    const s = await setup();
    const logger = new RecordingLogger();
    const graph = createTaskWorkerGraph({ runtime: s.runtime, logger });
    const good = await submitJob(s.runtime, { label: "good" });
    const bad = await submitJob(s.runtime, { label: "bad" });
    // The row vanishes under the poll: its write fails in the store, not in the driver.
    const original = s.runtime.store.applySnapshot.bind(s.runtime.store);
    s.runtime.store.applySnapshot = async (input) => {
      if (input.task.id === bad.id) throw new Error("disk full");
      return original(input);
    };
    const report = tickReport(await graph.invoke({ now: s.clock.advance(5).toISOString() }));
    expect(report).toMatchObject({ claimed: 2, applied: 1, errors: 1 });
    expect(report.polls).toEqual(expect.arrayContaining([{ taskId: good.id, outcome: "applied", status: "completed" }, { taskId: bad.id, outcome: "error" }]));
    expect(logger.messages("error").join("\n")).toContain(`task_id=${bad.id}`);
  });

  test("a second, different notifier for a runtime that has one is refused", async () => {
    const s = await setup();
    expect(() => createTaskWorkerGraph({ runtime: s.runtime, notifier: new EventedNotifier() })).toThrow("already delivers through another notifier");
    expect(() => createTaskWorkerGraph({ runtime: s.runtime, notifier: s.notifier })).not.toThrow();
  });
});

describe("backlog: a phase that handled a full batch (max_concurrent_polls) says more may be due", () => {
  test("cancellations, polls and notifications each set it; a tick with less clears it", async () => {
    const clock = new Clock();
    const s = await setupRuntime({ url: http.url, clock: clock.now, tasks: { max_concurrent_polls: 2 } });
    runtimes.push(s.runtime);
    const silent = createTaskWorkerGraph({ runtime: s.runtime });
    const tick = async (graph = silent) => tickReport(await graph.invoke({ now: clock.advance(5).toISOString() }));

    const doomed = [await submitJob(s.runtime, { label: "c1" }, { thread: "th-c1" }), await submitJob(s.runtime, { label: "c2" }, { thread: "th-c2" })];
    for (const task of doomed) await s.runtime.service.cancelTask(task.id, task.thread_id, "ann");
    expect(await tick()).toMatchObject({ cancelled: 2, claimed: 0, backlog: true });

    await submitJob(s.runtime, { label: "p1" }, { thread: "th-p1" });
    await submitJob(s.runtime, { label: "p2" }, { thread: "th-p2" });
    expect(await tick()).toMatchObject({ cancelled: 0, claimed: 2, backlog: true });
    expect(await tick()).toMatchObject({ claimed: 0, backlog: false });

    // Four events wait (two cancelled, two completed); notifications take two a tick.
    const delivering = createTaskWorkerGraph({ runtime: s.runtime, notifier: new EventedNotifier() });
    expect(await tick(delivering)).toMatchObject({ claimed: 0, notified: 2, backlog: true });
  });
});
