import { afterAll, describe, expect, test } from "@jest/globals";
import { DuplicateMcpRemoteTaskError, openTaskDatabase, TaskSnapshot, type TaskStore } from "../../../lib/tasks";
import { REISSUED_REMOTE_TASK_ERROR } from "../../../lib/tasks/store";
import { completed, ManualClock, openStore, seedTask, targets } from "./helpers";

const lease = { leaseSeconds: 60, limit: 10 };

describe.each(targets())("task store on $name", (target) => {
  afterAll(() => target.cleanup());

  async function fresh(): Promise<{ store: TaskStore; clock: ManualClock; url: string }> {
    const clock = new ManualClock();
    const url = await target.fresh();
    return { store: await openStore(url, clock), clock, url };
  }

  test("a result applied after the lease expired is discarded, though nobody re-claimed the row", async () => {
    const { store, clock } = await fresh();
    const task = await seedTask(store);
    const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    expect(claimed.id).toBe(task.id);
    clock.advance(61);
    expect(await store.applySnapshot({ task: claimed, leaseOwner: "w1", snapshot: completed(), nextPollAt: null })).toBe(false);
    const row = await store.get(task.id, "alice");
    expect(row).toMatchObject({ status: "working", result: null, lease_owner: "w1", event_version: 0 });
    await store.close();
  });

  test("a result applied on the last instant of the lease is kept", async () => {
    const { store, clock } = await fresh();
    await seedTask(store);
    const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    clock.advance(60);
    expect(await store.applySnapshot({ task: claimed, leaseOwner: "w1", snapshot: completed(), nextPollAt: null })).toBe(true);
    await store.close();
  });

  test("on the last instant of a lease no other owner can claim the row: the holder's result of that instant is kept", async () => {
    const { store, clock } = await fresh();
    const task = await seedTask(store);
    const [first] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    clock.advance(60);
    expect(clock.now()).toEqual(first.lease_expires_at);
    expect(await store.claimDuePolls({ leaseOwner: "w2", ...lease })).toEqual([]);
    expect(await store.applySnapshot({ task: first, leaseOwner: "w1", snapshot: completed("w1"), nextPollAt: null })).toBe(true);
    expect((await store.get(task.id, "alice"))?.result).toBe("w1");
    await store.close();
  });

  test("a live lease cannot be claimed by another owner; an expired one can, and the old owner's result is then discarded", async () => {
    const { store, clock } = await fresh();
    const task = await seedTask(store);
    const [first] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    clock.advance(59);
    expect(await store.claimDuePolls({ leaseOwner: "w2", ...lease })).toEqual([]);
    clock.advance(2);
    const [second] = await store.claimDuePolls({ leaseOwner: "w2", ...lease });
    expect(second).toMatchObject({ id: task.id, lease_owner: "w2", poll_attempt_count: 2 });
    expect(await store.applySnapshot({ task: first, leaseOwner: "w1", snapshot: completed("w1"), nextPollAt: null })).toBe(false);
    expect(await store.applySnapshot({ task: second, leaseOwner: "w2", snapshot: completed("w2"), nextPollAt: null })).toBe(true);
    expect((await store.get(task.id, "alice"))?.result).toBe("w2");
    await store.close();
  });

  test("claims take due rows only, oldest first, up to the limit, and skip cancelled, terminal and future rows", async () => {
    const { store, clock } = await fresh();
    const late = await seedTask(store, { nextPollAt: new Date(clock.current.getTime() - 1000) });
    const early = await seedTask(store, { nextPollAt: new Date(clock.current.getTime() - 5000) });
    await seedTask(store, { nextPollAt: new Date(clock.current.getTime() + 1000) });
    await seedTask(store, { status: "completed", nextPollAt: null });
    const cancelled = await seedTask(store);
    await store.requestCancel(cancelled.id, "alice", "thread-1");
    expect((await store.claimDuePolls({ leaseOwner: "w1", leaseSeconds: 60, limit: 1 })).map((r) => r.id)).toEqual([early.id]);
    expect((await store.claimDuePolls({ leaseOwner: "w1", ...lease })).map((r) => r.id)).toEqual([late.id]);
    await store.close();
  });

  test("a claim never takes more than its limit, whatever plan the database picks (here without the claim index)", async () => {
    const { store, url } = await fresh();
    const { db } = await openTaskDatabase({ url });
    await db.rows("DROP INDEX ix_mcp_tasks_poll_claim");
    await db.close();
    const same = [await seedTask(store), await seedTask(store), await seedTask(store)];
    for (const owner of ["x1", "x2", "x3"]) expect(await store.claimDuePolls({ leaseOwner: owner, leaseSeconds: 60, limit: 1 })).toHaveLength(1);
    expect(new Set((await Promise.all(same.map((t) => store.get(t.id, "alice")))).map((r) => r?.lease_owner))).toEqual(new Set(["x1", "x2", "x3"]));
    await store.close();
  });

  test("a cancel request landing while a poll is in flight makes that poll's apply a no-op; a repeat changes nothing", async () => {
    const { store, clock } = await fresh();
    const task = await seedTask(store);
    const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    clock.advance(1);
    const requested = await store.requestCancel(task.id, "alice", "thread-1");
    expect(requested).toMatchObject({ cancel_requested_at: clock.current, next_cancel_at: clock.current, lease_owner: null });
    expect(await store.applySnapshot({ task: claimed, leaseOwner: "w1", snapshot: completed(), nextPollAt: null })).toBe(false);
    clock.advance(5);
    const again = await store.requestCancel(task.id, "alice", "thread-1");
    expect(again).toEqual(requested);
    expect(await store.requestCancel(task.id, "bob", "thread-1")).toBeNull();
    expect(await store.requestCancel(task.id, "alice", "other-thread")).toBeNull();
    await store.close();
  });

  test("a poll result is refused once a cancel is requested, even when the same owner has since taken the cancel lease", async () => {
    const { store } = await fresh();
    const task = await seedTask(store);
    const [claimed] = await store.claimDuePolls({ leaseOwner: "svc", ...lease });
    await store.requestCancel(task.id, "alice", "thread-1");
    // One service polls and cancels under one owner name: the cancel phase re-takes the lease.
    expect(await store.claimCancels({ leaseOwner: "svc", ...lease })).toHaveLength(1);
    expect(await store.applySnapshot({ task: claimed, leaseOwner: "svc", snapshot: completed(), nextPollAt: null })).toBe(false);
    expect(await store.get(task.id, "alice")).toMatchObject({ status: "working", lease_owner: "svc" });
    await store.close();
  });

  test("a terminal row is never written again", async () => {
    const { store, clock } = await fresh();
    const task = await seedTask(store);
    const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    expect(await store.applySnapshot({ task: claimed, leaseOwner: "w1", snapshot: completed("first"), nextPollAt: null })).toBe(true);
    const done = await store.get(task.id, "alice");
    clock.advance(1);
    expect(await store.claimDuePolls({ leaseOwner: "w1", ...lease })).toEqual([]);
    expect(await store.applySnapshot({ task: claimed, leaseOwner: "w1", snapshot: completed("second"), nextPollAt: null })).toBe(false);
    expect(await store.releaseClaim({ taskId: task.id, leaseOwner: "w1", nextPollAt: clock.current, error: "x", trackingDegradedAfterErrors: 3 })).toBe(false);
    expect(await store.requestCancel(task.id, "alice", "thread-1")).toEqual(done);
    expect(await store.claimCancels({ leaseOwner: "w1", ...lease })).toEqual([]);
    expect(await store.get(task.id, "alice")).toEqual(done);
    await store.close();
  });

  test("the status fence holds on its own: a row made terminal under a live lease refuses that lease's result", async () => {
    const { store, url } = await fresh();
    const task = await seedTask(store);
    const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    // Another writer (an older process, an operator) finishes the row without clearing the lease.
    const { db } = await openTaskDatabase({ url });
    await db.rows("UPDATE mcp_tasks SET status = 'failed' WHERE id = $1", [task.id]);
    await db.close();
    expect(await store.applySnapshot({ task: claimed, leaseOwner: "w1", snapshot: completed(), nextPollAt: null })).toBe(false);
    expect(await store.applyCancelSnapshot({ taskId: task.id, leaseOwner: "w1", snapshot: new TaskSnapshot({ status: "cancelled" }), trackingDegradedAfterErrors: 3 })).toBe(false);
    expect(await store.get(task.id, "alice")).toMatchObject({ status: "failed", result: null, lease_owner: "w1" });
    await store.close();
  });

  test("a batch applies in one call with each row fenced on its own owner, expiry and cancel state", async () => {
    const { store, clock } = await fresh();
    const at = (s: number) => new Date(clock.current.getTime() - s * 1000);
    const mine = await seedTask(store, { nextPollAt: at(3) });
    const theirs = await seedTask(store, { nextPollAt: at(2) });
    const cancelled = await seedTask(store, { nextPollAt: at(1) });
    const [a] = await store.claimDuePolls({ leaseOwner: "w1", leaseSeconds: 60, limit: 1 });
    const [b] = await store.claimDuePolls({ leaseOwner: "w2", leaseSeconds: 60, limit: 1 });
    const [c] = await store.claimDuePolls({ leaseOwner: "w1", leaseSeconds: 60, limit: 1 });
    expect([a.id, b.id, c.id]).toEqual([mine.id, theirs.id, cancelled.id]);
    await store.requestCancel(cancelled.id, "alice", "thread-1");
    const next = new Date(clock.current.getTime() + 5000);
    const results = await store.applySnapshots([
      { task: a, leaseOwner: "w1", snapshot: new TaskSnapshot({ status: "working", poll_after_seconds: 5 }), nextPollAt: next },
      { task: b, leaseOwner: "w1", snapshot: completed(), nextPollAt: null },
      { task: c, leaseOwner: "w1", snapshot: completed(), nextPollAt: null },
    ]);
    expect(results).toEqual([true, false, false]);
    expect(await store.get(mine.id, "alice")).toMatchObject({ status: "working", next_poll_at: next, lease_owner: null, last_polled_at: clock.current });
    expect(await store.get(theirs.id, "alice")).toMatchObject({ status: "working", lease_owner: "w2" });
    await store.close();
  });

  test("release claim counts consecutive errors; reaching the threshold is an event, and a new error text a new version", async () => {
    const { store, clock } = await fresh();
    const task = await seedTask(store);
    const release = async (error: string) => {
      await store.claimDuePolls({ leaseOwner: "w1", ...lease });
      expect(await store.releaseClaim({ taskId: task.id, leaseOwner: "w1", nextPollAt: clock.current, error, trackingDegradedAfterErrors: 2 })).toBe(true);
      return (await store.get(task.id, "alice"))!;
    };
    expect(await release("boom")).toMatchObject({ consecutive_poll_error_count: 1, last_poll_error: "boom", event_version: 0, lease_owner: null });
    expect(await release("boom")).toMatchObject({ consecutive_poll_error_count: 2, event_version: 1, notification_status: "pending" });
    expect(await release("boom")).toMatchObject({ consecutive_poll_error_count: 3, event_version: 1 });
    expect(await release("other")).toMatchObject({ consecutive_poll_error_count: 4, event_version: 2 });
    const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    await store.applySnapshot({ task: claimed, leaseOwner: "w1", snapshot: new TaskSnapshot({ status: "working" }), nextPollAt: clock.current });
    expect(await store.get(task.id, "alice")).toMatchObject({ consecutive_poll_error_count: 0, last_poll_error: null, event_version: 2 });
    expect(await store.releaseClaim({ taskId: task.id, leaseOwner: "w1", nextPollAt: clock.current, error: "x", trackingDegradedAfterErrors: 2 })).toBe(false);
    await store.close();
  });

  test("a deferred poll gives its claim back due later, nothing else changed: no error counted, no event; fenced on owner, claim and cancel", async () => {
    const { store, clock } = await fresh();
    const task = await seedTask(store);
    const [stale] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    clock.advance(61);
    const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    const later = new Date(clock.current.getTime() + 5000);
    expect(await store.deferPoll({ taskId: task.id, leaseOwner: "w1", leaseExpiresAt: stale.lease_expires_at, nextPollAt: later, since: clock.current })).toBe(false);
    expect(await store.deferPoll({ taskId: task.id, leaseOwner: "w2", leaseExpiresAt: claimed.lease_expires_at, nextPollAt: later, since: clock.current })).toBe(false);
    clock.advance(1);
    expect(await store.deferPoll({ taskId: task.id, leaseOwner: "w1", leaseExpiresAt: claimed.lease_expires_at, nextPollAt: later, since: clock.current })).toBe(true);
    const row = (await store.get(task.id, "alice"))!;
    expect(row).toEqual({ ...claimed, next_poll_at: later, lease_owner: null, lease_expires_at: null, poll_deferred_at: clock.current });
    expect(row).toMatchObject({ consecutive_poll_error_count: 0, last_poll_error: null, event_version: 0 });
    expect(await store.deferPoll({ taskId: task.id, leaseOwner: "w1", leaseExpiresAt: claimed.lease_expires_at, nextPollAt: later, since: clock.current })).toBe(false);
    clock.advance(5);
    const [again] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    await store.requestCancel(task.id, "alice", "thread-1");
    // The same owner takes the cancel with the same lease expiry: the poll's deferral still writes nothing.
    const [cancelling] = await store.claimCancels({ leaseOwner: "w1", ...lease });
    expect(cancelling?.lease_expires_at).toEqual(again.lease_expires_at);
    expect(await store.deferPoll({ taskId: task.id, leaseOwner: "w1", leaseExpiresAt: again.lease_expires_at, nextPollAt: later, since: clock.current })).toBe(false);
    expect(await store.get(task.id, "alice")).toEqual(cancelling);
    await store.close();
  });

  test("poll_deferred_at keeps when the deferrals began: through more deferrals and the errors they count as; any other poll outcome clears it", async () => {
    const { store, clock } = await fresh();
    const task = await seedTask(store);
    const deferNow = async (since: Date) => {
      const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
      expect(await store.deferPoll({ taskId: task.id, leaseOwner: "w1", leaseExpiresAt: claimed.lease_expires_at, nextPollAt: clock.current, since })).toBe(true);
      return (await store.get(task.id, "alice"))!.poll_deferred_at;
    };
    const began = clock.current;
    expect(await deferNow(began)).toEqual(began);
    clock.advance(5);
    expect(await deferNow(clock.current)).toEqual(began);
    const release = async (deferredSince?: Date) => {
      const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
      const input = { taskId: task.id, leaseOwner: "w1", leaseExpiresAt: claimed.lease_expires_at, nextPollAt: clock.current, error: "x", trackingDegradedAfterErrors: 3 };
      expect(await store.releaseClaim({ ...input, deferredSince })).toBe(true);
      return (await store.get(task.id, "alice"))!;
    };
    expect(await release(began)).toMatchObject({ poll_deferred_at: began, consecutive_poll_error_count: 1 });
    expect(await release()).toMatchObject({ poll_deferred_at: null, consecutive_poll_error_count: 2 });
    expect(await deferNow(clock.current)).toEqual(clock.current);
    const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    await store.applySnapshot({ task: claimed, leaseOwner: "w1", snapshot: new TaskSnapshot({ status: "working" }), nextPollAt: clock.current });
    expect(await store.get(task.id, "alice")).toMatchObject({ poll_deferred_at: null, consecutive_poll_error_count: 0 });
    await store.close();
  });

  test("the same attention event after the task worked again is a new version: the same question, a second degraded spell", async () => {
    const { store, clock } = await fresh();
    const task = await seedTask(store);
    const poll = async (snapshot: TaskSnapshot) => {
      const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
      expect(await store.applySnapshot({ task: claimed, leaseOwner: "w1", snapshot, nextPollAt: clock.current })).toBe(true);
      return (await store.get(task.id, "alice"))!.event_version;
    };
    const fail = async () => {
      await store.claimDuePolls({ leaseOwner: "w1", ...lease });
      expect(await store.releaseClaim({ taskId: task.id, leaseOwner: "w1", nextPollAt: clock.current, error: "down", trackingDegradedAfterErrors: 1 })).toBe(true);
      return (await store.get(task.id, "alice"))!.event_version;
    };
    const question = () => new TaskSnapshot({ status: "input_required", input_required: { question: "deploy?" } });
    const working = () => new TaskSnapshot({ status: "working" });
    expect(await poll(question())).toBe(1);
    // Asked again while nothing changed: the same event, no new version.
    expect(await poll(question())).toBe(1);
    expect(await poll(working())).toBe(1);
    expect(await poll(question())).toBe(2);
    expect(await poll(working())).toBe(2);
    expect(await fail()).toBe(3);
    expect(await fail()).toBe(3);
    expect(await poll(working())).toBe(3);
    expect(await fail()).toBe(4);
    await store.close();
  });

  test("a poll's failure is discarded once the task's cancel was claimed, also by the same owner with the same lease expiry", async () => {
    const { store } = await fresh();
    const task = await seedTask(store);
    // The clock does not move: the cancel claim writes the very lease expiry the poll's claim wrote.
    const [polled] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
    await store.requestCancel(task.id, "alice", "thread-1");
    const [cancelling] = await store.claimCancels({ leaseOwner: "w1", ...lease });
    expect(cancelling.lease_expires_at).toEqual(polled.lease_expires_at);
    const released = await store.releaseClaim({
      taskId: task.id,
      leaseOwner: "w1",
      leaseExpiresAt: polled.lease_expires_at,
      nextPollAt: new Date(),
      error: "late",
      trackingDegradedAfterErrors: 1,
    });
    expect(released).toBe(false);
    expect(await store.get(task.id, "alice")).toMatchObject({ consecutive_poll_error_count: 0, last_poll_error: null, lease_owner: "w1", event_version: 0 });
    const cancelled = new TaskSnapshot({ status: "cancelled" });
    const applied = await store.applyCancelSnapshot({ taskId: task.id, leaseOwner: "w1", leaseExpiresAt: cancelling.lease_expires_at, snapshot: cancelled, trackingDegradedAfterErrors: 1 });
    expect(applied).toBe(true);
    await store.close();
  });

  test("on the last instant of a cancel lease no other owner can claim the cancel: the holder's answer of that instant is kept", async () => {
    const { store, clock } = await fresh();
    const task = await seedTask(store);
    await store.requestCancel(task.id, "alice", "thread-1");
    const [claimed] = await store.claimCancels({ leaseOwner: "c1", ...lease });
    clock.advance(60);
    expect(clock.now()).toEqual(claimed.lease_expires_at);
    expect(await store.claimCancels({ leaseOwner: "c2", ...lease })).toEqual([]);
    const cancelled = new TaskSnapshot({ status: "cancelled" });
    const answer = { taskId: task.id, leaseOwner: "c1", leaseExpiresAt: claimed.lease_expires_at, snapshot: cancelled, trackingDegradedAfterErrors: 3 };
    expect(await store.applyCancelSnapshot(answer)).toBe(true);
    expect(await store.get(task.id, "alice")).toMatchObject({ status: "cancelled", cancel_attempt_count: 1, lease_owner: null });
    await store.close();
  });

  test("cancels: claim under a lease, apply the terminal answer fenced, or release with the error", async () => {
    const { store, clock } = await fresh();
    const task = await seedTask(store);
    await store.requestCancel(task.id, "alice", "thread-1");
    const [claimed] = await store.claimCancels({ leaseOwner: "c1", ...lease });
    expect(claimed).toMatchObject({ id: task.id, cancel_attempt_count: 1, lease_owner: "c1" });
    expect(await store.claimCancels({ leaseOwner: "c2", ...lease })).toEqual([]);
    expect(await store.claimDuePolls({ leaseOwner: "w1", ...lease })).toEqual([]);
    const retryAt = new Date(clock.current.getTime() + 10_000);
    expect(await store.releaseCancelClaim({ taskId: task.id, leaseOwner: "c1", nextCancelAt: retryAt, error: "remote down" })).toBe(true);
    expect(await store.get(task.id, "alice")).toMatchObject({ next_cancel_at: retryAt, last_cancel_error: "remote down", lease_owner: null });
    expect(await store.claimCancels({ leaseOwner: "c1", ...lease })).toEqual([]);
    clock.advance(10);
    const [again] = await store.claimCancels({ leaseOwner: "c1", ...lease, taskId: task.id });
    expect(again.cancel_attempt_count).toBe(2);
    await expect(store.applyCancelSnapshot({ taskId: task.id, leaseOwner: "c1", snapshot: new TaskSnapshot({ status: "working" }), trackingDegradedAfterErrors: 3 })).rejects.toThrow(
      "A cancellation response must report a terminal task status",
    );
    const cancelled = new TaskSnapshot({ status: "cancelled" });
    clock.advance(61);
    expect(await store.applyCancelSnapshot({ taskId: task.id, leaseOwner: "c1", snapshot: cancelled, trackingDegradedAfterErrors: 3 })).toBe(false);
    const [third] = await store.claimCancels({ leaseOwner: "c2", ...lease });
    expect(third.id).toBe(task.id);
    expect(await store.applyCancelSnapshot({ taskId: task.id, leaseOwner: "c2", snapshot: cancelled, trackingDegradedAfterErrors: 3 })).toBe(true);
    expect(await store.get(task.id, "alice")).toMatchObject({
      status: "cancelled",
      completed_at: clock.current,
      next_cancel_at: null,
      next_poll_at: null,
      last_cancel_error: null,
      lease_owner: null,
      event_version: 1,
      notification_status: "pending",
    });
    await store.close();
  });

  test("one store used concurrently: transactions (releases) and single statements (applies, reads) at once", async () => {
    const { store, clock } = await fresh();
    const tasks = await Promise.all(Array.from({ length: 40 }, () => seedTask(store)));
    const claimed = await store.claimDuePolls({ leaseOwner: "w1", leaseSeconds: 60, limit: 40 });
    expect(claimed).toHaveLength(40);
    const [give, keep] = [claimed.slice(0, 20), claimed.slice(20)];
    const outcomes = await Promise.all([
      ...give.map((t) => store.releaseClaim({ taskId: t.id, leaseOwner: "w1", nextPollAt: clock.current, error: "e", trackingDegradedAfterErrors: 3 })),
      ...keep.map((task) => store.applySnapshot({ task, leaseOwner: "w1", snapshot: completed(), nextPollAt: null })),
      ...tasks.map((t) => store.get(t.id, "alice").then((r) => r !== null)),
      store.claimNotificationWork({ leaseOwner: "n1", leaseSeconds: 30, limit: 40, trackingDegradedAfterErrors: 3 }).then(() => true),
    ]);
    expect(outcomes.every(Boolean)).toBe(true);
    const rows = await store.listByThread("thread-1", "alice", { limit: 100 });
    expect(rows.filter((r) => r.status === "completed")).toHaveLength(20);
    expect(rows.filter((r) => r.consecutive_poll_error_count === 1 && r.lease_owner === null)).toHaveLength(20);
    await store.close();
  });

  test("create: the unique handle conflict has its own error; other integrity errors pass unchanged; a row born terminal has its first event", async () => {
    const { store } = await fresh();
    const base = { userId: "alice", threadId: "t", serverName: "jobs", driverName: "ordinary-tools", taskName: "r", nextPollAt: null, snapshot: new TaskSnapshot({ status: "working" }) };
    await store.create({ ...base, id: "a", remoteTaskId: "R" });
    await expect(store.create({ ...base, id: "b", remoteTaskId: "R" })).rejects.toThrow(DuplicateMcpRemoteTaskError);
    await expect(store.create({ ...base, id: "b", remoteTaskId: "R" })).rejects.toThrow("Remote MCP task 'R' is already tracked for server 'jobs' by this user");
    const pk = await store.create({ ...base, id: "a", remoteTaskId: "other" }).catch((e: unknown) => e);
    expect(pk).not.toBeInstanceOf(DuplicateMcpRemoteTaskError);
    expect((pk as Error).message).toMatch(/mcp_tasks\.id|mcp_tasks_pkey/);
    await store.create({ ...base, id: "c", remoteTaskId: "R", userId: "bob" });
    const born = await store.create({ ...base, id: "d", remoteTaskId: "D", snapshot: completed() });
    expect(born).toMatchObject({ event_version: 1, notification_status: "pending", completed_at: born.created_at, driver_data: {}, result: { ok: true } });
    await store.close();
  });

  describe("a remote id unique per remote scope (a stdio task's child process)", () => {
    const base = { userId: "alice", threadId: "t", serverName: "jobs", driverName: "ordinary-tools", taskName: "r", nextPollAt: null, snapshot: new TaskSnapshot({ status: "working" }) };

    test("the same id from two scopes is two tasks; twice from one scope is a duplicate", async () => {
      const { store } = await fresh();
      await store.create({ ...base, id: "a", remoteTaskId: "job-1", remoteScope: "child-1" });
      await store.create({ ...base, id: "b", remoteTaskId: "job-1", remoteScope: "child-2", threadId: "t2" });
      await store.create({ ...base, id: "c", remoteTaskId: "job-1" });
      await expect(store.create({ ...base, id: "d", remoteTaskId: "job-1", remoteScope: "child-2", threadId: "t2" })).rejects.toThrow(DuplicateMcpRemoteTaskError);
      await expect(store.create({ ...base, id: "e", remoteTaskId: "job-1" })).rejects.toThrow(DuplicateMcpRemoteTaskError);
      expect((await store.get("a", "alice"))?.remote_scope).toBe("child-1");
      expect((await store.get("c", "alice"))?.remote_scope).toBe("");
      await store.close();
    });

    test("an id issued again by the scope's next process ends the unfinished holder of that thread as failed; no other row", async () => {
      const { store, clock } = await fresh();
      const at = (id: string, extra: { threadId?: string; userId?: string; remoteScope?: string; remoteTaskId?: string; snapshot?: TaskSnapshot } = {}) =>
        store.create({ ...base, id, remoteTaskId: "job-1", remoteScope: "child-1", nextPollAt: clock.now(), ...extra });
      await at("done-before", { remoteScope: "child-0", snapshot: completed() });
      await at("open");
      await at("other-thread", { threadId: "t2", remoteScope: "child-t2" });
      await at("other-user", { userId: "bob", remoteScope: "child-bob" });
      await at("other-id", { remoteTaskId: "job-2" });
      await store.create({ ...base, id: "unscoped", remoteTaskId: "job-1", nextPollAt: clock.now() });
      const [claimed] = await store.claimDuePolls({ leaseOwner: "w1", leaseSeconds: 60, limit: 1 });
      expect(claimed.id).toBe("open");
      clock.advance(1);
      await at("new", { remoteScope: "child-2" });

      expect(await store.get("open", "alice")).toMatchObject({
        status: "failed", error: REISSUED_REMOTE_TASK_ERROR, lease_owner: null, lease_expires_at: null, next_poll_at: null,
        completed_at: clock.now(), event_version: 1, notification_status: "pending", next_notification_at: clock.now(),
      });
      for (const [id, user] of [["other-thread", "alice"], ["other-user", "bob"], ["other-id", "alice"], ["unscoped", "alice"]] as const) {
        expect((await store.get(id, user))?.status).toBe("working");
      }
      expect(await store.get("done-before", "alice")).toMatchObject({ status: "completed", result: { ok: true } });
      expect(await store.get("new", "alice")).toMatchObject({ status: "working", remote_scope: "child-2" });
      // The poll that was in flight for the ended task is fenced out.
      expect(await store.applySnapshot({ task: claimed, leaseOwner: "w1", snapshot: completed({ stolen: true }), nextPollAt: null })).toBe(false);
      expect((await store.get("open", "alice"))?.result).toBeNull();
      await store.close();
    });

    test("a holder with a cancel request pending is ended too: its cancel is never sent to the new job", async () => {
      const { store } = await fresh();
      await store.create({ ...base, id: "asked", remoteTaskId: "job-1", remoteScope: "child-1", snapshot: new TaskSnapshot({ status: "input_required", input_required: { q: 1 } }) });
      await store.requestCancel("asked", "alice", "t");
      await store.create({ ...base, id: "new", remoteTaskId: "job-1", remoteScope: "child-2" });
      expect(await store.get("asked", "alice")).toMatchObject({ status: "failed", input_required: null, error: REISSUED_REMOTE_TASK_ERROR, event_version: 2, notification_status: "pending" });
      expect(await store.claimCancels({ leaseOwner: "w2", leaseSeconds: 60, limit: 10 })).toEqual([]);
      await store.close();
    });

    test("a holder ended in the middle of a deferred spell keeps none of it: no deferral, poll errors, cancel error or next cancel, as any terminal answer", async () => {
      const { store, clock } = await fresh();
      await store.create({ ...base, id: "held", remoteTaskId: "job-1", remoteScope: "child-1", nextPollAt: clock.now() });
      const began = clock.now();
      for (let i = 0; i < 3; i += 1) {
        const [polled] = await store.claimDuePolls({ leaseOwner: "w1", ...lease });
        const input = { taskId: "held", leaseOwner: "w1", leaseExpiresAt: polled.lease_expires_at, nextPollAt: clock.now(), error: "held back", trackingDegradedAfterErrors: 3 };
        expect(await store.releaseClaim({ ...input, deferredSince: began })).toBe(true);
      }
      await store.requestCancel("held", "alice", "t");
      const [cancel] = await store.claimCancels({ leaseOwner: "c1", ...lease });
      const nextCancelAt = new Date(clock.now().getTime() + 5000);
      const release = { taskId: "held", leaseOwner: "c1", leaseExpiresAt: cancel.lease_expires_at, nextCancelAt, error: "cancel held back", deferredSince: began };
      expect(await store.releaseCancelClaim(release)).toBe(true);
      expect(await store.get("held", "alice")).toMatchObject({ poll_deferred_at: began, consecutive_poll_error_count: 3, last_cancel_error: "cancel held back" });
      await store.create({ ...base, id: "new", remoteTaskId: "job-1", remoteScope: "child-2" });
      expect(await store.get("held", "alice")).toMatchObject({
        status: "failed", error: REISSUED_REMOTE_TASK_ERROR, poll_deferred_at: null, consecutive_poll_error_count: 0, last_poll_error: null,
        last_cancel_error: null, next_cancel_at: null,
      });
      await store.close();
    });

    test("a refused insert ends nothing: the holders are ended in the insert's transaction", async () => {
      const { store } = await fresh();
      await store.create({ ...base, id: "old", remoteTaskId: "job-1", remoteScope: "child-1" });
      await store.create({ ...base, id: "taken", remoteTaskId: "job-9", remoteScope: "child-2" });
      // Fails after the holders were ended (here on the primary key): their ending is rolled back with it.
      await expect(store.create({ ...base, id: "taken", remoteTaskId: "job-1", remoteScope: "child-2" })).rejects.toThrow(/mcp_tasks\.id|mcp_tasks_pkey/);
      expect((await store.get("old", "alice"))?.status).toBe("working");
      await store.create({ ...base, id: "new", remoteTaskId: "job-1", remoteScope: "child-2" });
      expect((await store.get("old", "alice"))?.status).toBe("failed");
      await store.close();
    });
  });

  test("get and list are scoped to the user; list is newest first, honours active_only and limit", async () => {
    const { store, clock } = await fresh();
    const first = await seedTask(store);
    clock.advance(1);
    const second = await seedTask(store, { status: "failed", nextPollAt: null });
    clock.advance(1);
    const third = await seedTask(store);
    await seedTask(store, { userId: "bob" });
    await seedTask(store, { threadId: "thread-2" });
    expect(await store.get(first.id, "bob")).toBeNull();
    expect(await store.get("missing", "alice")).toBeNull();
    expect((await store.listByThread("thread-1", "alice")).map((r) => r.id)).toEqual([third.id, second.id, first.id]);
    expect((await store.listByThread("thread-1", "alice", { activeOnly: true })).map((r) => r.id)).toEqual([third.id, first.id]);
    expect((await store.listByThread("thread-1", "alice", { limit: 1 })).map((r) => r.id)).toEqual([third.id]);
    await store.close();
  });
});
