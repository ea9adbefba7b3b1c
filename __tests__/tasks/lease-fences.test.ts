/**
 * Lease fences and stored text of McpTaskService on a real database (a SQLite file; PostgreSQL too when
 * MCP_HARNESS_TEST_POSTGRES_URL is set), with the scripted driver and an injected manual clock:
 *  - a NUL character in a remote answer is stored as U+FFFD on both databases, and the task progresses;
 *  - a poll lease runs from the claim, not from the start of the tick;
 *  - a claim release after the lease expired is discarded;
 *  - two claims of one row under the same owner: the older claim's late write is discarded.
 */
import { describe, expect, test } from "@jest/globals";
import { TaskSnapshot } from "../../lib/tasks";
import { cancelled, completed, harnessPerTest, Hold, working } from "./scripted-driver";
import { targets } from "./store/helpers";

const NUL = "\u0000";
const REPLACEMENT = "\uFFFD";

describe.each(targets())("task lease fences on $name", (target) => {
  const setup = harnessPerTest(target);

  describe("NUL characters in remote answers", () => {
    test("a failed answer with NUL in its error reaches failed, the character replaced", async () => {
      const h = await setup();
      const task = await h.submit({ taskName: "nul-error" });
      h.clock.advance(10);
      h.driver.status(task.remote_task_id, new TaskSnapshot({ status: "failed", error: `bad${NUL}thing` }));
      const report = await h.service.runOnce();
      expect(report).toMatchObject({ claimed: 1, applied: 1, errors: 0 });
      const row = (await h.row(task.id))!;
      expect(row.status).toBe("failed");
      expect(row.error).toBe(`bad${REPLACEMENT}thing`);
      expect(row.lease_owner).toBeNull();
    });

    test("a completed answer with NUL in result values and keys reaches completed, the character replaced", async () => {
      const h = await setup();
      const task = await h.submit({ taskName: "nul-result" });
      h.clock.advance(10);
      h.driver.status(task.remote_task_id, completed({ text: `a${NUL}b`, [`k${NUL}`]: [`${NUL}`], plain: "a\\u0000b" }));
      const report = await h.service.runOnce();
      expect(report).toMatchObject({ claimed: 1, applied: 1, errors: 0 });
      const row = (await h.row(task.id))!;
      expect(row.status).toBe("completed");
      // A literal backslash followed by "u0000" is text, not a NUL: it is kept as it is.
      expect(row.result).toEqual({ text: `a${REPLACEMENT}b`, [`k${REPLACEMENT}`]: [REPLACEMENT], plain: "a\\u0000b" });
      expect(row.result_preview ?? "").not.toContain(NUL);
    });

    test("an input_required answer with NUL is stored with the character replaced", async () => {
      const h = await setup();
      const task = await h.submit({ taskName: "nul-input" });
      h.clock.advance(10);
      h.driver.status(task.remote_task_id, new TaskSnapshot({ status: "input_required", input_required: { question: `why${NUL}?` } }));
      const report = await h.service.runOnce();
      expect(report).toMatchObject({ claimed: 1, applied: 1, errors: 0 });
      const row = (await h.row(task.id))!;
      expect(row.status).toBe("input_required");
      expect(row.input_required).toEqual({ question: `why${REPLACEMENT}?` });
    });

    test("a transient error with NUL is counted and stored with the character replaced", async () => {
      const h = await setup();
      const task = await h.submit({ taskName: "nul-transient" });
      h.clock.advance(10);
      h.driver.status(task.remote_task_id, new Error(`tool said ${NUL}`));
      const report = await h.service.runOnce();
      expect(report).toMatchObject({ claimed: 1, retried: 1, errors: 0 });
      const row = (await h.row(task.id))!;
      expect(row.consecutive_poll_error_count).toBe(1);
      expect(row.last_poll_error).toContain(`tool said ${REPLACEMENT}`);
      expect(row.last_poll_error).not.toContain(NUL);
    });
  });

  describe("poll leases run from the claim", () => {
    test("a slow cancellation phase does not expire the same tick's poll claims", async () => {
      const h = await setup({ settings: { lease_seconds: 120, poll_interval_seconds: 5 } });
      const a = await h.submit({ taskName: "a" });
      const b = await h.submit({ taskName: "b" });
      h.clock.advance(10);
      await h.service.cancelTask(b.id, "thread-1", "alice");
      // The remote cancel of b takes 100 s (within its own lease), then the poll of a takes 30 s more: 130 s
      // after the tick started, but only 30 s after a was claimed.
      const cancelHold = new Hold();
      h.driver.cancelWith(b.remote_task_id, cancelHold);
      const pollHold = new Hold();
      h.driver.status(a.remote_task_id, pollHold);
      const tick = h.service.runOnce();
      await cancelHold.started;
      const claimAt = h.clock.advance(100);
      cancelHold.answer(cancelled());
      await pollHold.started;
      h.clock.advance(30);
      // The claim of a is leased from the moment it was made: another worker cannot take it.
      expect((await h.row(a.id))!.lease_expires_at).toEqual(new Date(claimAt.getTime() + 120_000));
      expect(await h.another("worker-2").claimDuePolls()).toHaveLength(0);
      pollHold.answer(completed({ v: 1 }));
      const report = await tick;
      expect(report).toMatchObject({ cancelled: 1, claimed: 1, applied: 1, discarded: 0 });
      expect((await h.row(a.id))!.status).toBe("completed");
    });

    test("the store leases a claim from its clock even when the scan time is older", async () => {
      const h = await setup({ settings: { lease_seconds: 60 } });
      const task = await h.submit({ taskName: "a" });
      const scan = h.clock.advance(10);
      const claimAt = h.clock.advance(500);
      const [claimed] = await h.store.claimDuePolls({ leaseOwner: "w", leaseSeconds: 60, limit: 5, now: scan });
      expect(claimed.id).toBe(task.id);
      expect(claimed.lease_expires_at).toEqual(new Date(claimAt.getTime() + 60_000));
    });
  });

  describe("notification leases run from the claim", () => {
    test("a notification claimed with a scan time behind the store's clock gets a live lease, and its delivery settles", async () => {
      const h = await setup({ settings: { lease_seconds: 60 } });
      const task = await h.submit({ taskName: "n" });
      h.clock.advance(10);
      h.driver.status(task.remote_task_id, completed({ ok: true }));
      expect(await h.service.runOnce()).toMatchObject({ applied: 1 });
      const scan = h.clock.now();
      const claimAt = h.clock.advance(600);
      const [claimed] = await h.store.claimNotificationWork({ leaseOwner: "worker-1", leaseSeconds: 60, limit: 5, now: scan, trackingDegradedAfterErrors: 3 });
      expect(claimed.id).toBe(task.id);
      expect(claimed.notification_lease_expires_at).toEqual(new Date(claimAt.getTime() + 60_000));
      // A whole tick run with a time behind the store's clock settles the delivery the first tick launched.
      h.clock.advance(120);
      const late = h.clock.now();
      h.clock.advance(600);
      expect(await h.service.runNotifications(late)).toMatchObject({ delivered: 1, errors: 0 });
      expect((await h.row(task.id))?.notification_status).toBe("delivered");
      expect(h.notifier.deliveriesOf(task.id)).toHaveLength(1);
    });
  });

  describe("late releases after the lease expired", () => {
    test("a failing poll that returns after its lease expired counts no error and sends no event", async () => {
      const h = await setup({ settings: { lease_seconds: 30, tracking_degraded_after_errors: 1 } });
      const task = await h.submit({ taskName: "a" });
      h.clock.advance(10);
      const [record] = await h.service.claimDuePolls();
      const before = (await h.row(task.id))!;
      const pollHold = new Hold();
      h.driver.status(task.remote_task_id, pollHold);
      const poll = h.service.pollClaimed(record);
      await pollHold.started;
      h.clock.advance(100);
      pollHold.answer(new Error("late"));
      expect((await poll).outcome).toBe("discarded-by-fence");
      const row = (await h.row(task.id))!;
      expect(row.consecutive_poll_error_count).toBe(0);
      expect(row.last_poll_error).toBeNull();
      expect(row.event_version).toBe(before.event_version);
      expect(row.notification_status).toBe(before.notification_status);
      expect(row.next_poll_at).toEqual(before.next_poll_at);
    });

    test("a failing cancel that returns after its lease expired records nothing", async () => {
      const h = await setup({ settings: { lease_seconds: 30 } });
      const task = await h.submit({ taskName: "a" });
      h.clock.advance(10);
      await h.service.cancelTask(task.id, "thread-1", "alice");
      const cancelHold = new Hold();
      h.driver.cancelWith(task.remote_task_id, cancelHold);
      const run = h.service.runCancellations();
      await cancelHold.started;
      const before = (await h.row(task.id))!;
      h.clock.advance(100);
      cancelHold.answer(new Error("late"));
      await run;
      const row = (await h.row(task.id))!;
      expect(row.last_cancel_error).toBeNull();
      expect(row.next_cancel_at).toEqual(before.next_cancel_at);
    });
  });

  describe("calls that would outlast their lease", () => {
    // The deadline is what is left of the lease (on the injected clock) less a tenth of it, here 30 - 26.9 - 3 = 0.1 s.
    test("a poll still running near the end of its lease is stopped and counted as a retryable error", async () => {
      const h = await setup({ settings: { lease_seconds: 30, tracking_degraded_after_errors: 1 } });
      const task = await h.submit({ taskName: "a" });
      h.clock.advance(10);
      const [record] = await h.service.claimDuePolls();
      // A server that never answers and ignores the cancellation.
      h.driver.status(task.remote_task_id, new Hold(true));
      h.clock.advance(26.9);
      const outcome = await h.service.pollClaimed(record);
      expect(outcome.outcome).toBe("retried");
      const row = (await h.row(task.id))!;
      expect(row.consecutive_poll_error_count).toBe(1);
      expect(row.last_poll_error).toContain("stopped before its lease (lease_seconds 30) ran out");
      expect(row.lease_owner).toBeNull();
      // Counted, so the thread hears that tracking is degraded (not a poll discarded by the fence, silently, forever).
      expect(row.event_version).toBeGreaterThan(record.event_version);
    });

    test("a remote cancel still running near the end of its lease is stopped and recorded for a retry", async () => {
      const h = await setup({ settings: { lease_seconds: 30 } });
      const task = await h.submit({ taskName: "a" });
      h.clock.advance(10);
      await h.service.cancelTask(task.id, "thread-1", "alice");
      h.driver.cancelWith(task.remote_task_id, new Hold(true));
      // The claim is made, then 26.9 s pass on the clock before the remote cancel starts.
      const claim = h.store.claimCancels.bind(h.store);
      h.store.claimCancels = async (args) => {
        const rows = await claim(args);
        h.clock.advance(26.9);
        return rows;
      };
      expect(await h.service.runCancellations()).toMatchObject({ cancelled: 0, cancelRetried: 1 });
      expect((await h.row(task.id))!.last_cancel_error).toContain("stopped before its lease");
    });
  });

  describe("claims under the same owner", () => {
    test("the older claim's late answer is discarded; the newer claim's answer applies", async () => {
      const h = await setup({ settings: { lease_seconds: 30 } });
      const task = await h.submit({ taskName: "a" });
      h.clock.advance(10);
      const [first] = await h.service.claimDuePolls();
      const firstHold = new Hold();
      const secondHold = new Hold();
      h.driver.status(task.remote_task_id, firstHold, secondHold);
      const firstPoll = h.service.pollClaimed(first);
      await firstHold.started;
      h.clock.advance(40);
      // Another tick of the same process (same lease owner) re-claims the expired row.
      const [second] = await h.service.claimDuePolls();
      expect(second.id).toBe(task.id);
      const secondPoll = h.service.pollClaimed(second);
      await secondHold.started;
      firstHold.answer(completed({ from: "first" }));
      expect((await firstPoll).outcome).toBe("discarded-by-fence");
      expect((await h.row(task.id))!.status).toBe("submitted");
      secondHold.answer(working());
      expect((await secondPoll).outcome).toBe("applied");
      expect((await h.row(task.id))!.status).toBe("working");
    });

    test("the older claim's late failure is discarded and leaves the newer claim in place", async () => {
      const h = await setup({ settings: { lease_seconds: 30, tracking_degraded_after_errors: 1 } });
      const task = await h.submit({ taskName: "a" });
      h.clock.advance(10);
      const [first] = await h.service.claimDuePolls();
      const firstHold = new Hold();
      h.driver.status(task.remote_task_id, firstHold);
      const firstPoll = h.service.pollClaimed(first);
      await firstHold.started;
      h.clock.advance(40);
      const [second] = await h.service.claimDuePolls();
      expect(second.id).toBe(task.id);
      firstHold.answer(new Error("late"));
      expect((await firstPoll).outcome).toBe("discarded-by-fence");
      const row = (await h.row(task.id))!;
      expect(row.consecutive_poll_error_count).toBe(0);
      expect(row.lease_owner).toBe("worker-1");
      expect(row.lease_expires_at).toEqual(second.lease_expires_at);
    });

    test("the store fences a cancel answer on the claim that made it", async () => {
      const h = await setup({ settings: { lease_seconds: 30 } });
      const task = await h.submit({ taskName: "a" });
      h.clock.advance(10);
      await h.service.cancelTask(task.id, "thread-1", "alice");
      const claim = { leaseOwner: "c1", leaseSeconds: 30, limit: 5 };
      const [first] = await h.store.claimCancels(claim);
      h.clock.advance(40);
      const [second] = await h.store.claimCancels(claim);
      expect(second.id).toBe(task.id);
      const answer = { taskId: task.id, leaseOwner: "c1", snapshot: cancelled(), trackingDegradedAfterErrors: 3 };
      expect(await h.store.applyCancelSnapshot({ ...answer, leaseExpiresAt: first.lease_expires_at })).toBe(false);
      expect(await h.store.releaseCancelClaim({ taskId: task.id, leaseOwner: "c1", nextCancelAt: h.clock.now(), error: "x", leaseExpiresAt: first.lease_expires_at })).toBe(false);
      expect(await h.store.applyCancelSnapshot({ ...answer, leaseExpiresAt: second.lease_expires_at })).toBe(true);
      expect((await h.row(task.id))!.status).toBe("cancelled");
    });

    test("the older cancel claim's late failure is discarded", async () => {
      const h = await setup({ settings: { lease_seconds: 30 } });
      const task = await h.submit({ taskName: "a" });
      h.clock.advance(10);
      await h.service.cancelTask(task.id, "thread-1", "alice");
      const firstHold = new Hold();
      const secondHold = new Hold();
      h.driver.cancelWith(task.remote_task_id, firstHold, secondHold);
      const firstRun = h.service.runCancellations();
      await firstHold.started;
      h.clock.advance(40);
      const secondRun = h.service.runCancellations();
      await secondHold.started;
      const claimed = (await h.row(task.id))!;
      firstHold.answer(new Error("late"));
      await firstRun;
      const row = (await h.row(task.id))!;
      expect(row.last_cancel_error).toBeNull();
      expect(row.lease_expires_at).toEqual(claimed.lease_expires_at);
      secondHold.answer(cancelled());
      expect(await secondRun).toMatchObject({ cancelled: 1 });
      expect((await h.row(task.id))!.status).toBe("cancelled");
    });
  });
});
