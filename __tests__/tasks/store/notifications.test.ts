/** The notification state machine (inventory §N 121–128) as a table of scenarios, on each database. */
import { afterAll, describe, expect, test } from "@jest/globals";
import { notificationIdempotencyKey, TaskSnapshot, type TaskRecord, type TaskStore } from "../../../lib/tasks";
import { ManualClock, openStore, seedTask, targets } from "./helpers";

const N = { leaseSeconds: 30, limit: 10, trackingDegradedAfterErrors: 3 };

interface Ctx {
  store: TaskStore;
  clock: ManualClock;
  task: TaskRecord;
  /** Claims notification work as `owner` and returns this task's row from the claim, if any. */
  claim(owner?: string): Promise<TaskRecord | undefined>;
  /** A new attention event: the task asks another question (a poll applies input_required with new text). */
  newEvent(text: string): Promise<void>;
  row(): Promise<TaskRecord>;
}

type Step = (ctx: Ctx) => Promise<unknown>;
const step = (ctx: Ctx, version = 1) => ({ taskId: ctx.task.id, leaseOwner: "n1", dispatchVersion: version });

const scenarios: [string, Step, Partial<TaskRecord>][] = [
  ["a task asking for input is pending with event version 1", async () => undefined, { notification_status: "pending", event_version: 1, notified_version: 0 }],
  [
    "claim freezes the event as the delivery snapshot",
    (c) => c.claim(),
    { notification_status: "claimed", dispatch_version: 1, dispatch_attempt: 0, notification_lease_owner: "n1" },
  ],
  [
    "claimed → dispatched records the run and releases the lease",
    async (c) => {
      await c.claim();
      return c.store.markNotificationDispatched({ ...step(c), runId: "run-1" });
    },
    { notification_status: "dispatched", notification_run_id: "run-1", notification_lease_owner: null },
  ],
  [
    "dispatched → delivered marks the version notified and clears the dispatch",
    async (c) => {
      await c.claim();
      await c.store.markNotificationDispatched({ ...step(c), runId: "run-1" });
      await c.claim();
      return c.store.finishNotificationRun({ ...step(c), delivered: true });
    },
    { notification_status: "delivered", notified_version: 1, dispatch_version: null, dispatch_event: null, next_notification_at: null },
  ],
  [
    "a newer event during a dispatch does not overwrite the frozen snapshot; delivering the old one goes back to pending",
    async (c) => {
      await c.claim();
      await c.store.markNotificationDispatched({ ...step(c), runId: "run-1" });
      await c.newEvent("more?");
      const mid = await c.row();
      expect(mid).toMatchObject({ notification_status: "dispatched", event_version: 2, dispatch_version: 1 });
      expect(mid.dispatch_event).toMatchObject({ status: "input_required", input_required: { question: "first?" } });
      await c.claim();
      return c.store.finishNotificationRun({ ...step(c), delivered: true });
    },
    { notification_status: "pending", notified_version: 1, event_version: 2 },
  ],
  [
    "a failed run retries with the next attempt's key and counts the failure",
    async (c) => {
      await c.claim();
      await c.store.markNotificationDispatched({ ...step(c), runId: "run-1" });
      await c.claim();
      return c.store.finishNotificationRun({ ...step(c), delivered: false, nextNotificationAt: c.clock.current, error: "run failed" });
    },
    { notification_status: "retry", dispatch_attempt: 1, notification_attempt_count: 1, notification_error: "run failed", notification_run_id: null },
  ],
  [
    "a busy thread goes back to pending without counting a failure or changing the key",
    async (c) => {
      await c.claim();
      return c.store.releaseNotificationClaim({ taskId: c.task.id, leaseOwner: "n1", nextNotificationAt: c.clock.current, error: null, replaceWithLatest: true });
    },
    { notification_status: "pending", notification_attempt_count: 0, dispatch_attempt: 0, dispatch_event: null },
  ],
  [
    "a failed launch is retried with the same key and counted",
    async (c) => {
      await c.claim();
      await c.store.releaseNotificationClaim({ taskId: c.task.id, leaseOwner: "n1", nextNotificationAt: c.clock.current, error: "x", replaceWithLatest: false, countFailure: true });
      expect(await c.claim()).toMatchObject({ notification_status: "retry", dispatch_version: 1 });
      return undefined;
    },
    { notification_status: "retry", dispatch_attempt: 0, notification_attempt_count: 1 },
  ],
  [
    "a newer event resets the budget of a retrying delivery",
    async (c) => {
      await c.claim();
      await c.store.releaseNotificationClaim({ taskId: c.task.id, leaseOwner: "n1", nextNotificationAt: c.clock.current, error: "x", replaceWithLatest: false, countFailure: true });
      await c.newEvent("again");
      return c.claim();
    },
    { notification_status: "claimed", dispatch_version: 2, dispatch_attempt: 0, notification_attempt_count: 0 },
  ],
  [
    "dead letter stops delivery of this version",
    async (c) => {
      await c.claim();
      return c.store.deadLetterNotification({ ...step(c), error: "thread gone", countFailure: true });
    },
    { notification_status: "dead_letter", notification_attempt_count: 1, next_notification_at: null, dispatch_version: null },
  ],
  [
    "dead letter with a newer event goes back to pending with a fresh budget",
    async (c) => {
      await c.claim();
      await c.newEvent("newer");
      return c.store.deadLetterNotification({ ...step(c), error: "stopped", countFailure: true });
    },
    { notification_status: "pending", notification_attempt_count: 0, event_version: 2 },
  ],
  [
    "defer leaves a dispatched run to be looked up later",
    async (c) => {
      await c.claim();
      await c.store.markNotificationDispatched({ ...step(c), runId: "run-1" });
      await c.claim();
      return c.store.deferDispatchedNotification({ ...step(c), nextNotificationAt: new Date(c.clock.current.getTime() + 5000) });
    },
    { notification_status: "dispatched", notification_lease_owner: null, notification_run_id: "run-1" },
  ],
  [
    "releasing the lease after an unexpected failure keeps the phase and counts",
    async (c) => {
      await c.claim();
      return c.store.releaseNotificationLease({ taskId: c.task.id, leaseOwner: "n1", nextNotificationAt: c.clock.current, error: "db hiccup", countFailure: true });
    },
    { notification_status: "claimed", notification_attempt_count: 1, notification_error: "db hiccup", notification_lease_owner: null },
  ],
];

/** Fenced steps: each must be refused (return false) and leave the row as it was. */
const refused: [string, Step][] = [
  [
    "mark dispatched after the notification lease expired",
    async (c) => {
      await c.claim();
      c.clock.advance(31);
      return c.store.markNotificationDispatched({ ...step(c), runId: "late" });
    },
  ],
  ["mark dispatched for another dispatch version", async (c) => (await c.claim(), c.store.markNotificationDispatched({ ...step(c, 2), runId: "r" }))],
  ["mark dispatched by another owner", async (c) => (await c.claim(), c.store.markNotificationDispatched({ ...step(c), leaseOwner: "n2", runId: "r" }))],
  ["finish a run that was never dispatched", async (c) => (await c.claim(), c.store.finishNotificationRun({ ...step(c), delivered: true }))],
  [
    "dead letter after the lease expired",
    async (c) => {
      await c.claim();
      c.clock.advance(31);
      return c.store.deadLetterNotification({ ...step(c), error: "e", countFailure: true });
    },
  ],
];

describe.each(targets())("notification state machine on $name", (target) => {
  afterAll(() => target.cleanup());

  async function context(): Promise<Ctx> {
    const clock = new ManualClock();
    const store = await openStore(await target.fresh(), clock);
    const seeded = await seedTask(store);
    const ask = async (question: string) => {
      const [claimed] = await store.claimDuePolls({ leaseOwner: "w", leaseSeconds: 60, limit: 1 });
      const snapshot = new TaskSnapshot({ status: "input_required", input_required: { question } });
      expect(await store.applySnapshot({ task: claimed, leaseOwner: "w", snapshot, nextPollAt: clock.current })).toBe(true);
    };
    await ask("first?");
    const ctx: Ctx = {
      store,
      clock,
      task: seeded,
      async claim(owner = "n1") {
        return (await store.claimNotificationWork({ ...N, leaseOwner: owner })).find((r) => r.id === seeded.id);
      },
      newEvent: ask,
      row: async () => (await store.get(seeded.id, "alice"))!,
    };
    return ctx;
  }

  test.each(scenarios)("%s", async (_name, run, expected) => {
    const ctx = await context();
    await run(ctx);
    expect(await ctx.row()).toMatchObject(expected);
    await ctx.store.close();
  });

  test.each(refused)("refused: %s", async (_name, run) => {
    const ctx = await context();
    const before = await ctx.row();
    expect(await run(ctx)).toBe(false);
    const after = await ctx.row();
    expect({ ...after, notification_lease_owner: null, notification_lease_expires_at: null, dispatch_event: null, notification_status: "x", dispatch_version: 0, updated_at: 0 }).toEqual({
      ...before,
      notification_lease_owner: null,
      notification_lease_expires_at: null,
      dispatch_event: null,
      notification_status: "x",
      dispatch_version: 0,
      updated_at: 0,
    });
    await ctx.store.close();
  });

  test("the idempotency key names the task, the dispatch version and the attempt", () => {
    expect(notificationIdempotencyKey("mcp-task-1", 3, 2)).toBe("mcp-task:mcp-task-1:3:2");
  });
});
