/**
 * McpTaskService on a real database (a SQLite file; PostgreSQL too when MCP_HARNESS_TEST_POSTGRES_URL is set),
 * with a scripted driver of our own driver interface and the in-memory notifier. The clock is injected: remote
 * calls move it by `callSeconds`, so "from the completion time" is visible in the stored times.
 */
import { describe, expect, test } from "@jest/globals";
import {
  eventFingerprint,
  AmbiguousMcpTaskError,
  DuplicateMcpRemoteTaskError,
  McpTaskLookupError,
  McpTaskProtocolError,
  McpTaskService,
  McpTaskServiceStoppedError,
  migrate,
  openTaskDatabase,
  TaskSnapshot,
  TaskStore,
  TaskSubmitRequest,
  type CreateTaskInput,
  type TaskRecord,
} from "../../lib/tasks";
import { cancelled, completed, DRIVER, harnessPerTest, Hold, ScriptedDriver, settings, working, type Harness } from "./scripted-driver";
import { openStore, T0, targets } from "./store/helpers";
import { McpTaskAnswerUnsettledError } from "../../lib/tasks/model";

const seconds = (later: Date | null, earlier: Date) => (later === null ? null : (later.getTime() - earlier.getTime()) / 1000);
const inputRequired = (question: string, poll_after_seconds?: number) =>
  new TaskSnapshot({ status: "input_required", input_required: { question }, poll_after_seconds });

describe.each(targets())("McpTaskService on $name", (target) => {
  const setup = harnessPerTest(target);

  /** Moves the clock to the task's next poll and runs one tick. */
  async function tickAtNextPoll(h: Harness, taskId: string) {
    const row = (await h.row(taskId))!;
    h.clock.current = row.next_poll_at!;
    return h.service.runOnce();
  }

  async function tickAtNextNotification(h: Harness, taskId: string) {
    const row = (await h.row(taskId))!;
    h.clock.current = row.next_notification_at!;
    return h.service.runOnce();
  }

  describe("submit", () => {
    test("persists the task under a new local id, hands the driver the runtime and a live signal, and schedules the first poll from the call's completion", async () => {
      const h = await setup();
      h.driver.callSeconds = 3;
      h.driver.nextSubmit({ remoteTaskId: "job-1", driverData: { session: "s-1" } });
      const runtime = { context: { user_id: "alice" } };
      const request = new TaskSubmitRequest({
        userId: "alice",
        threadId: "thread-1",
        runId: "run-0",
        toolCallId: "call-1",
        serverName: "jobs",
        taskName: "report",
        arguments: { q: 1 },
        driverData: { submit_tool: "start" },
      });
      const record = await h.service.submit(DRIVER, request, { runtime });
      expect(record.id).toMatch(/^mcp-task-[0-9a-f]{32}$/);
      expect(record).toMatchObject({ status: "submitted", remote_task_id: "job-1", driver_name: DRIVER, run_id: "run-0", tool_call_id: "call-1" });
      expect(record.driver_data).toEqual({ submit_tool: "start", session: "s-1" });
      expect(seconds(record.next_poll_at, T0)).toBe(3 + 5);
      const [call] = h.driver.callsOf("submit");
      expect(call.localTaskId).toBe(record.id);
      expect(call.runtime).toBe(runtime);
      expect(call.signal?.aborted).toBe(false);
      expect(await h.service.getTask(record.id, "alice")).toEqual(record);
      expect(await h.service.getTask(record.id, "bob")).toBeNull();
      expect(await h.service.listTasks("thread-1", "alice")).toEqual([record]);
    });

    test("a local id given by the caller is kept", async () => {
      const h = await setup();
      const record = await h.submit({ localTaskId: "mcp-task-chosen" });
      expect(record.id).toBe("mcp-task-chosen");
      expect(h.driver.callsOf("submit")[0].localTaskId).toBe("mcp-task-chosen");
    });

    test("an unknown driver is refused before any remote call", async () => {
      const h = await setup();
      const request = new TaskSubmitRequest({ userId: "alice", threadId: "t", serverName: "jobs", taskName: "x", arguments: {} });
      await expect(h.service.submit("nope", request)).rejects.toThrow(new McpTaskLookupError("No MCP task driver registered as 'nope'"));
      expect(h.driver.calls).toEqual([]);
    });

    test("a database failure while persisting cancels the remote task and keeps the original error; no argument value is logged", async () => {
      const h = await setup();
      const { db } = await openTaskDatabase({ url: h.url });
      if (target.name === "sqlite") {
        await db.rows("CREATE TRIGGER refuse_insert BEFORE INSERT ON mcp_tasks BEGIN SELECT RAISE(ABORT, 'disk quota exceeded'); END");
      } else {
        await db.rows("CREATE FUNCTION refuse_insert() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RAISE EXCEPTION ''disk quota exceeded''; END'");
        await db.rows("CREATE TRIGGER refuse_insert BEFORE INSERT ON mcp_tasks FOR EACH ROW EXECUTE FUNCTION refuse_insert()");
      }
      await db.close();
      h.driver.nextSubmit({ remoteTaskId: "orphan-1" }).nextSubmit({ remoteTaskId: "orphan-2" });
      h.driver.cancelWith("orphan-2", new Error("cancel refused"));
      await expect(h.submit({ arguments: { secret_arg: "s3cr3t-value" } })).rejects.toThrow("disk quota exceeded");
      expect(h.driver.callsOf("cancel").map((c) => c.remoteTaskId)).toEqual(["orphan-1"]);
      // The compensating cancel fails too: still the original error, and one log line without argument values.
      await expect(h.submit({ arguments: { secret_arg: "s3cr3t-value" } })).rejects.toThrow("disk quota exceeded");
      expect(h.driver.callsOf("cancel").map((c) => c.remoteTaskId)).toEqual(["orphan-1", "orphan-2"]);
      const warnings = h.logger.messages("warn");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/^Failed to cancel untracked MCP task after persistence failure \(task_id=mcp-task-[0-9a-f]{32}, driver=scripted, server=jobs, remote_task_id="orphan-2"\): cancel refused$/);
      expect(h.logger.lines.map((l) => l.message).join("\n")).not.toContain("s3cr3t-value");
      expect(await h.service.listTasks("thread-1", "alice")).toEqual([]);
    });

    test("a remote id holding a credential is refused, cancelled by its real id, and never written to a log line", async () => {
      const h = await setup();
      h.driver.nextSubmit({ remoteTaskId: "job-tok-Zq9secret", remoteIdHoldsSecret: true }).nextSubmit({ remoteTaskId: "job-tok-Zq9secret-2", remoteIdHoldsSecret: true });
      h.driver.cancelWith("job-tok-Zq9secret-2", new Error("cancel refused"));
      await expect(h.submit()).rejects.toThrow("MCP task remote_task_id holds a value the call carried as a credential, so it cannot be stored");
      expect(h.driver.callsOf("cancel").map((c) => c.remoteTaskId)).toEqual(["job-tok-Zq9secret"]);
      await expect(h.submit()).rejects.toThrow("holds a value the call carried as a credential");
      const warnings = h.logger.messages("warn");
      expect(warnings).toEqual([expect.stringContaining("remote_task_id=(withheld: it holds a credential)): cancel refused")]);
      expect(h.logger.lines.map((l) => l.message).join("\n")).not.toContain("tok-Zq9secret");
      expect(await h.service.listTasks("thread-1", "alice")).toEqual([]);
    });

    test("a user id longer than the task row holds is refused before anything runs on the server", async () => {
      const h = await setup();
      await expect((async () => h.submit({ userId: "u".repeat(65) }))()).rejects.toThrow("user_id must not exceed 64 characters");
      expect(h.driver.callsOf("submit")).toHaveLength(0);
      expect(await h.service.listTasks("thread-1", "u".repeat(65))).toEqual([]);
    });

    test("an oversized remote id or an out-of-bounds first snapshot is a protocol error, and the remote task is cancelled", async () => {
      const h = await setup();
      const longId = "r".repeat(256);
      h.driver.nextSubmit({ remoteTaskId: longId });
      await expect(h.submit()).rejects.toThrow(new McpTaskProtocolError("MCP task remote_task_id must not exceed 255 characters"));
      h.driver.nextSubmit({ remoteTaskId: "huge", snapshot: new TaskSnapshot({ status: "input_required", input_required: { t: "x".repeat(70_000) } }) });
      await expect(h.submit()).rejects.toThrow("MCP task input_required payload exceeds the 65536-byte limit");
      expect(h.driver.callsOf("cancel").map((c) => c.remoteTaskId)).toEqual([longId, "huge"]);
      expect(await h.service.listTasks("thread-1", "alice")).toEqual([]);
    });

    test("a remote id another row already tracks is surfaced and cancels nothing", async () => {
      const h = await setup();
      h.driver.nextSubmit({ remoteTaskId: "same" }).nextSubmit({ remoteTaskId: "same" });
      const first = await h.submit();
      await expect(h.submit()).rejects.toBeInstanceOf(DuplicateMcpRemoteTaskError);
      expect(h.driver.callsOf("cancel")).toEqual([]);
      expect(await h.service.listTasks("thread-1", "alice")).toEqual([first]);
    });

    test("the caller aborting while the submit answer is on its way (before the row is written) cancels the remote task and surfaces the abort", async () => {
      const h = await setup();
      const caller = new AbortController();
      h.driver.nextSubmit({ remoteTaskId: "left-behind", onReturn: () => caller.abort() });
      const request = new TaskSubmitRequest({ userId: "alice", threadId: "thread-1", serverName: "jobs", taskName: "report", arguments: {} });
      await expect(h.service.submit(DRIVER, request, { signal: caller.signal })).rejects.toMatchObject({ name: "AbortError" });
      expect(h.driver.callsOf("cancel").map((c) => c.remoteTaskId)).toEqual(["left-behind"]);
      expect(await h.service.listTasks("thread-1", "alice")).toEqual([]);
    });

    test("the caller aborting while the row is being written cancels the remote task and ends the row cancelled", async () => {
      const clock = (await setup()).clock;
      const url = await target.fresh();
      const { db, schema } = await openTaskDatabase({ url });
      await migrate(db, { schema });
      const caller = new AbortController();
      class AbortMidCreate extends TaskStore {
        override create(input: CreateTaskInput): Promise<TaskRecord> {
          const writing = super.create(input);
          caller.abort();
          return writing;
        }
      }
      const h = await setup({ url, clock, store: new AbortMidCreate(db, { clock: clock.now, schema }) });
      h.driver.nextSubmit({ remoteTaskId: "mid-persist" });
      const request = new TaskSubmitRequest({ userId: "alice", threadId: "thread-1", serverName: "jobs", taskName: "report", arguments: {} });
      await expect(h.service.submit(DRIVER, request, { signal: caller.signal })).rejects.toMatchObject({ name: "AbortError" });
      expect(h.driver.callsOf("cancel").map((c) => c.remoteTaskId)).toEqual(["mid-persist"]);
      const [row] = await h.service.listTasks("thread-1", "alice");
      expect(row).toMatchObject({ remote_task_id: "mid-persist", status: "cancelled", lease_owner: null });
      expect(row.cancel_requested_at).not.toBeNull();
    });
  });

  describe("polling", () => {
    test("failed polls back off 5, 10, 20, … up to the cap, from each call's completion, with no attempt limit; degraded at the threshold", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5, max_poll_backoff_seconds: 300, tracking_degraded_after_errors: 3 } });
      h.driver.callSeconds = 2;
      const task = await h.submit();
      const delays = [5, 10, 20, 40, 80, 160, 300, 300, 300];
      h.driver.status(task.remote_task_id, ...delays.map(() => new Error("server unavailable")));
      for (const [i, delay] of delays.entries()) {
        const report = await tickAtNextPoll(h, task.id);
        expect(report).toMatchObject({ claimed: 1, retried: 1, applied: 0 });
        const row = (await h.row(task.id))!;
        expect(seconds(row.next_poll_at, h.clock.current)).toBe(delay); // the clock now reads the completion time
        expect(row).toMatchObject({ consecutive_poll_error_count: i + 1, last_poll_error: "server unavailable", lease_owner: null });
        // Degraded from the third error on: one event (the same error text does not make a new one).
        expect(row.event_version).toBe(i + 1 >= 3 ? 1 : 0);
      }
      const recovered = await tickAtNextPoll(h, task.id);
      expect(recovered.applied).toBe(1);
      const row = (await h.row(task.id))!;
      expect(row).toMatchObject({ consecutive_poll_error_count: 0, last_poll_error: null, last_polled_at: h.clock.current });
      expect(seconds(row.next_poll_at, h.clock.current)).toBe(5);
    });

    test("a poll deferred for longer than the lease (a submit on the same stdio child unanswered) counts as an error every interval: degraded, then back", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5, lease_seconds: 30, max_poll_backoff_seconds: 300, tracking_degraded_after_errors: 2 } });
      h.driver.callSeconds = 1;
      const task = await h.submit();
      h.driver.status(task.remote_task_id, ...Array.from({ length: 9 }, () => new McpTaskAnswerUnsettledError()));
      // Deferred, unchanged, one interval at a time while deferred for no longer than the lease (30 s from the first).
      let first: Date | undefined;
      for (let i = 0; i < 6; i += 1) {
        // (A deferral counts as a retry in the tick's report; only the row tells the two apart.)
        expect(await tickAtNextPoll(h, task.id)).toMatchObject({ claimed: 1, retried: 1 });
        const row = (await h.row(task.id))!;
        expect(seconds(row.next_poll_at, h.clock.current)).toBe(5);
        first ??= h.clock.current;
        expect(row).toMatchObject({ consecutive_poll_error_count: 0, last_poll_error: null, event_version: 0, poll_deferred_at: first });
      }
      expect(seconds(h.clock.current, first!)).toBe(30);
      // Past the lease: each deferral is a poll error, still one interval apart (no backoff), degraded at the threshold.
      const stuck = "Tracking is held back: the task's status cannot be checked while a call to the same stdio MCP server process has been unanswered for longer than lease_seconds";
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ retried: 1 });
      expect(await h.row(task.id)).toMatchObject({ consecutive_poll_error_count: 1, last_poll_error: stuck, event_version: 0 });
      expect(seconds((await h.row(task.id))!.next_poll_at, h.clock.current)).toBe(5);
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ retried: 1, notified: 1 });
      expect(await h.row(task.id)).toMatchObject({ consecutive_poll_error_count: 2, last_poll_error: stuck, event_version: 1 });
      expect(seconds((await h.row(task.id))!.next_poll_at, h.clock.current)).toBe(5);
      expect(h.notifier.deliveries.at(-1)?.delivery.event).toMatchObject({ status: "submitted", tracking_degraded: true, last_poll_error: stuck });
      await h.service.runOnce(); // the degraded event's run is confirmed
      // Held on: one more error, the same event (its error text does not change with the time held), nothing new told.
      const told = h.notifier.deliveries.length;
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ retried: 1, notified: 0 });
      expect(await h.row(task.id)).toMatchObject({ consecutive_poll_error_count: 3, event_version: 1 });
      expect(h.notifier.deliveries).toHaveLength(told);
      // The submit answered: the next poll gets the status (the script's answers ran out: working); tracking is back.
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ applied: 1 });
      expect(await h.row(task.id)).toMatchObject({ status: "working", consecutive_poll_error_count: 0, last_poll_error: null, poll_deferred_at: null });
      // Deferred again later: counted from that deferral, not from the first spell.
      h.driver.status(task.remote_task_id, new McpTaskAnswerUnsettledError());
      await tickAtNextPoll(h, task.id);
      expect(await h.row(task.id)).toMatchObject({ consecutive_poll_error_count: 0, last_poll_error: null, poll_deferred_at: h.clock.current });
    });

    test("the degraded event carries tracking_degraded and the last error to the thread", async () => {
      const h = await setup({ settings: { tracking_degraded_after_errors: 2 } });
      const task = await h.submit();
      h.driver.status(task.remote_task_id, new Error("boom"), new Error("boom"));
      await tickAtNextPoll(h, task.id);
      expect(h.notifier.deliveries).toEqual([]);
      const report = await tickAtNextPoll(h, task.id);
      expect(report.notified).toBe(1);
      expect(h.notifier.deliveries[0].delivery.event).toMatchObject({ status: "submitted", tracking_degraded: true, last_poll_error: "boom" });
    });

    test("a task cancelled while its tracking was degraded ends with a plain cancelled event: the poll errors are over", async () => {
      const h = await setup({ settings: { tracking_degraded_after_errors: 2 } });
      const task = await h.submit();
      h.driver.status(task.remote_task_id, new Error("boom"), new Error("boom"));
      await tickAtNextPoll(h, task.id);
      await tickAtNextPoll(h, task.id);
      expect(h.notifier.deliveries.at(-1)?.delivery.event).toMatchObject({ tracking_degraded: true });
      await h.service.cancelTask(task.id, "thread-1", "alice");
      expect((await h.service.runCancellations(h.clock.current)).cancelled).toBe(1);
      expect(await h.row(task.id)).toMatchObject({ status: "cancelled", consecutive_poll_error_count: 0, last_poll_error: null });
      await h.service.runOnce(); // the degraded event's run is confirmed
      await tickAtNextNotification(h, task.id);
      const last = h.notifier.deliveries.at(-1)!.delivery.event;
      expect(last).toMatchObject({ status: "cancelled", tracking_degraded: false });
      expect(last.last_poll_error ?? null).toBeNull();
      // What the row remembers of its last event is that event (a repeat of it would not be a new one).
      expect((await h.row(task.id))!.event_fingerprint).toBe(eventFingerprint(last));
    });

    test("poll hints are honoured, at least 1 s and capped at 24 h; input_required polls no faster than its own interval", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5, input_required_poll_interval_seconds: 60 } });
      h.driver.callSeconds = 1;
      const task = await h.submit();
      const script: [TaskSnapshot, number][] = [
        [new TaskSnapshot({ status: "working", poll_after_seconds: 30 }), 30],
        [new TaskSnapshot({ status: "working", poll_after_seconds: 2 }), 2],
        // A hint below a second is a second: a worker never polls back to back.
        [new TaskSnapshot({ status: "working", poll_after_seconds: 0.001 }), 1],
        [inputRequired("which one?"), 60],
        [inputRequired("which one?", 10), 60],
        [inputRequired("which one?", 120), 120],
        [new TaskSnapshot({ status: "working", poll_after_seconds: 1e20 }), 86_400],
        [working(), 5],
      ];
      h.driver.status(task.remote_task_id, ...script.map(([s]) => s));
      for (const [snapshot, delay] of script) {
        expect((await tickAtNextPoll(h, task.id)).applied).toBe(1);
        const row = (await h.row(task.id))!;
        expect(row.status).toBe(snapshot.status);
        expect(seconds(row.next_poll_at, h.clock.current)).toBe(delay);
      }
    });

    test("payload bounds: errors cut to 4000 characters, JSON payloads over 64 KiB fail the task, oversized results kept as a preview", async () => {
      const h = await setup({ settings: { max_result_bytes: 1024, result_preview_max_chars: 100 } });
      const cases: [string, TaskSnapshot][] = [
        ["long error", new TaskSnapshot({ status: "failed", error: "e".repeat(5000) })],
        ["big question", new TaskSnapshot({ status: "input_required", input_required: { t: "x".repeat(65_537) } })],
        ["question at the limit", new TaskSnapshot({ status: "input_required", input_required: { t: "x".repeat(65_536 - 8) } })],
        ["big artifact", new TaskSnapshot({ status: "completed", result_artifact: { uri: "u".repeat(70_000), mime_type: "text/plain" } })],
        ["long text result", new TaskSnapshot({ status: "completed", result: "y".repeat(5000) })],
        ["big JSON result", new TaskSnapshot({ status: "completed", result: { big: "z".repeat(2000) } })],
        ["result at the limit", new TaskSnapshot({ status: "completed", result: "k".repeat(1022) })],
      ];
      const ids = new Map<string, string>();
      for (const [name, snapshot] of cases) {
        const task = await h.submit({ taskName: name });
        h.driver.status(task.remote_task_id, snapshot);
        ids.set(name, task.id);
      }
      h.clock.advance(5);
      const report = await h.service.runOnce();
      expect(report).toMatchObject({ claimed: 7, applied: 5, failed: 2 });
      const row = async (name: string) => (await h.row(ids.get(name)!))!;
      expect((await row("long error")).error).toBe("e".repeat(4000));
      expect(await row("big question")).toMatchObject({ status: "failed", input_required: null, next_poll_at: null });
      expect((await row("big question")).error).toBe("MCP task input_required payload exceeds the 65536-byte limit");
      expect((await row("question at the limit")).status).toBe("input_required");
      expect(await row("big artifact")).toMatchObject({ status: "failed", error: "MCP task result_artifact payload exceeds the 65536-byte limit", result_artifact: null });
      expect(await row("long text result")).toMatchObject({ result: null, result_preview: "y".repeat(100), result_truncated: true });
      expect(await row("big JSON result")).toMatchObject({ result: null, result_preview: `{"big":"${"z".repeat(92)}`, result_truncated: true });
      expect(await row("result at the limit")).toMatchObject({ result: "k".repeat(1022), result_truncated: false });
    });

    test("a protocol error is a terminal failure: no retry, no further polls", async () => {
      const h = await setup();
      const task = await h.submit();
      const mismatch = "MCP task response task_id does not match the persisted remote task: expected 'remote-1', got 'other'";
      h.driver.status(task.remote_task_id, new McpTaskProtocolError(mismatch));
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ claimed: 1, failed: 1, retried: 0 });
      const row = (await h.row(task.id))!;
      expect(row).toMatchObject({ status: "failed", error: mismatch, next_poll_at: null, consecutive_poll_error_count: 0 });
      expect(row.completed_at).toEqual(h.clock.current);
      h.clock.advance(3600);
      expect((await h.service.runOnce()).claimed).toBe(0);
      expect(h.driver.callsOf("status")).toHaveLength(1);
    });

    test("one task's failure never touches its siblings", async () => {
      const h = await setup();
      class ThrowingDriver extends ScriptedDriver {
        override getStatus(): Promise<TaskSnapshot> {
          throw new TypeError("driver bug");
        }
      }
      h.drivers.register("throwing", new ThrowingDriver(h.clock).nextSubmit({ remoteTaskId: "thrown-1" }));
      const ok = await h.submit({ taskName: "ok" });
      const protocol = await h.submit({ taskName: "protocol" });
      const thrower = await h.service.submit("throwing", new TaskSubmitRequest({ userId: "alice", threadId: "thread-1", serverName: "jobs", taskName: "thrower", arguments: {} }));
      const orphan = await h.store.create({
        id: "mcp-task-orphan",
        userId: "alice",
        threadId: "thread-1",
        serverName: "jobs",
        driverName: "uninstalled",
        remoteTaskId: "o-1",
        taskName: "orphan",
        snapshot: working(),
        nextPollAt: h.clock.current,
      });
      h.driver.status(ok.remote_task_id, completed("fine"));
      h.driver.status(protocol.remote_task_id, new McpTaskProtocolError("Invalid structuredContent"));
      h.clock.advance(5);
      const scanNow = h.clock.current;
      expect(await h.service.runOnce()).toMatchObject({ claimed: 4, applied: 1, failed: 1, retried: 2, errors: 0 });
      expect(await h.row(ok.id)).toMatchObject({ status: "completed", result: "fine" });
      expect(await h.row(protocol.id)).toMatchObject({ status: "failed", error: "Invalid structuredContent" });
      expect(await h.row(thrower.id)).toMatchObject({ status: "submitted", last_poll_error: "driver bug", consecutive_poll_error_count: 1 });
      const orphanRow = (await h.row(orphan.id))!;
      expect(orphanRow).toMatchObject({ status: "working", last_poll_error: "No MCP task driver registered as 'uninstalled'" });
      expect(seconds(orphanRow.next_poll_at, scanNow)).toBe(5);
    });

    test("an unexpected failure writing one result (a real database error) is logged, leaves that lease to expire, and the siblings are applied", async () => {
      const h = await setup({ settings: { lease_seconds: 30 } });
      const { db } = await openTaskDatabase({ url: h.url });
      if (target.name === "sqlite") {
        await db.rows("CREATE TRIGGER refuse_update BEFORE UPDATE ON mcp_tasks WHEN NEW.task_name = 'doomed' AND NEW.status = 'completed' BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END");
      } else {
        await db.rows("CREATE FUNCTION refuse_update() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RAISE EXCEPTION ''disk I/O error''; END'");
        await db.rows("CREATE TRIGGER refuse_update BEFORE UPDATE ON mcp_tasks FOR EACH ROW WHEN (NEW.task_name = 'doomed' AND NEW.status = 'completed') EXECUTE FUNCTION refuse_update()");
      }
      await db.close();
      const doomed = await h.submit({ taskName: "doomed" });
      const fine = await h.submit({ taskName: "fine" });
      h.driver.status(doomed.remote_task_id, completed(), completed());
      h.driver.status(fine.remote_task_id, completed());
      h.clock.advance(5);
      expect(await h.service.runOnce()).toMatchObject({ claimed: 2, applied: 1, errors: 1 });
      expect(await h.row(fine.id)).toMatchObject({ status: "completed" });
      expect(await h.row(doomed.id)).toMatchObject({ status: "submitted", lease_owner: "worker-1" });
      expect(h.logger.messages("error")).toEqual([
        expect.stringMatching(new RegExp(`^Unexpected MCP task poll failure \\(task_id=${doomed.id}\\); the lease will expire for recovery: .*disk I/O error`)),
      ]);
      h.clock.advance(29);
      expect((await h.service.runOnce()).claimed).toBe(0);
      h.clock.advance(2);
      expect((await h.service.runOnce()).claimed).toBe(1);
    });

    test("polls run concurrently up to max_concurrent_polls; the rest wait for a later tick", async () => {
      const h = await setup({ settings: { max_concurrent_polls: 2 } });
      const tasks: TaskRecord[] = [];
      for (let i = 0; i < 3; i++) {
        tasks.push(await h.submit({ taskName: `job-${i}` }));
        h.clock.advance(1);
      }
      const holds = tasks.map(() => new Hold());
      tasks.forEach((t, i) => h.driver.status(t.remote_task_id, holds[i]));
      h.clock.advance(10);
      const tick = h.service.runOnce();
      // Both calls are in flight before either is answered.
      await Promise.all([holds[0].started, holds[1].started]);
      expect(h.driver.callsOf("status")).toHaveLength(2);
      expect((await h.row(tasks[2].id))!.lease_owner).toBeNull();
      holds[0].answer(completed(0));
      holds[1].answer(completed(1));
      expect(await tick).toMatchObject({ claimed: 2, applied: 2 });
      const next = h.service.runOnce();
      await holds[2].started;
      holds[2].answer(completed(2));
      expect(await next).toMatchObject({ claimed: 1, applied: 1 });
    });

    test("the phases scan at the time they are given: what is due by then, leased until then plus lease_seconds", async () => {
      const h = await setup({ settings: { lease_seconds: 120 } });
      const task = await h.submit();
      const later = new Date(h.clock.current.getTime() + 5_000);
      expect(await h.service.claimDuePolls(h.clock.current)).toEqual([]);
      const [claimed] = await h.service.claimDuePolls(later);
      expect(claimed).toMatchObject({ id: task.id, lease_owner: "worker-1" });
      expect(seconds(claimed.lease_expires_at, later)).toBe(120);
      await h.service.cancelTask(task.id, "thread-1", "alice");
      expect((await h.service.runCancellations(new Date(h.clock.current.getTime() - 1_000))).cancelled).toBe(0);
      expect((await h.service.runCancellations(h.clock.current)).cancelled).toBe(1);
    });

    test("the lease of a worker that claimed and vanished is recovered once it expires", async () => {
      const h = await setup({ settings: { lease_seconds: 120 } });
      const task = await h.submit();
      h.driver.status(task.remote_task_id, completed("recovered"));
      h.clock.advance(5);
      const dead = h.another("dead-worker", await openStore(h.url, h.clock));
      expect(await dead.claimDuePolls()).toHaveLength(1);
      await dead.stop();
      h.clock.advance(60);
      expect((await h.service.runOnce()).claimed).toBe(0);
      h.clock.advance(61);
      expect(await h.service.runOnce()).toMatchObject({ claimed: 1, applied: 1 });
      expect(await h.row(task.id)).toMatchObject({ status: "completed", result: "recovered", poll_attempt_count: 2, lease_owner: null });
    });
  });

  describe("cancellation", () => {
    test("a request persists the fence and returns before any remote call; repeats start one remote cancel", async () => {
      const h = await setup();
      const task = await h.submit();
      h.clock.advance(1);
      const requested = (await h.service.cancelTask(task.id, "thread-1", "alice"))!;
      expect(requested.cancel_requested_at).toEqual(h.clock.current);
      expect(h.driver.callsOf("cancel")).toEqual([]);
      h.clock.advance(1);
      expect(await h.service.cancelTask(task.id, "thread-1", "alice")).toEqual(requested);
      expect(await h.service.cancelTask(task.id, "thread-1", "bob")).toBeNull();
      expect(await h.service.cancelTask(task.id, "other-thread", "alice")).toBeNull();
      h.clock.advance(10);
      expect(await h.service.runOnce()).toMatchObject({ cancelled: 1, claimed: 0 });
      expect(await h.service.cancelTask(task.id, "thread-1", "alice")).toMatchObject({ status: "cancelled" });
      h.clock.advance(3600);
      await h.service.runOnce();
      expect(h.driver.callsOf("cancel")).toHaveLength(1);
      expect(h.driver.callsOf("status")).toHaveLength(0);
      expect(await h.row(task.id)).toMatchObject({ status: "cancelled", next_cancel_at: null, next_poll_at: null, lease_owner: null });
    });

    test("a failing remote cancel (errors, or a non-terminal answer) is retried with backoff from each attempt's end", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5 } });
      h.driver.callSeconds = 1;
      const task = await h.submit();
      h.driver.cancelWith(task.remote_task_id, new Error("unreachable"), new Error("unreachable"), working(), cancelled());
      await h.service.cancelTask(task.id, "thread-1", "alice");
      const expected: [number, string][] = [
        [5, "unreachable"],
        [10, "unreachable"],
        [20, "MCP task cancellation must return a terminal status"],
      ];
      for (const [delay, error] of expected) {
        expect(await h.service.runOnce()).toMatchObject({ cancelled: 0, cancelRetried: 1 });
        const row = (await h.row(task.id))!;
        expect(row).toMatchObject({ status: "submitted", last_cancel_error: error, lease_owner: null });
        expect(seconds(row.next_cancel_at, h.clock.current)).toBe(delay);
        h.clock.current = row.next_cancel_at!;
      }
      expect(await h.service.runOnce()).toMatchObject({ cancelled: 1 });
      expect(await h.row(task.id)).toMatchObject({ status: "cancelled", last_cancel_error: null, cancel_attempt_count: 4 });
    });

    test("a terminal cancel answer over the payload bounds fails the task with the protocol error, once; a non-terminal one is still retried", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5 } });
      const task = await h.submit();
      const big = { question: "q".repeat(70_000) };
      h.driver.cancelWith(
        task.remote_task_id,
        new TaskSnapshot({ status: "working", input_required: big }),
        new TaskSnapshot({ status: "cancelled", input_required: big }),
      );
      await h.service.cancelTask(task.id, "thread-1", "alice");
      expect(await h.service.runOnce()).toMatchObject({ cancelled: 0, cancelRetried: 1 });
      const retried = (await h.row(task.id))!;
      expect(retried).toMatchObject({ status: "submitted", last_cancel_error: "MCP task cancellation must return a terminal status" });
      h.clock.current = retried.next_cancel_at!;
      expect(await h.service.runOnce()).toMatchObject({ cancelled: 1, cancelRetried: 0 });
      expect(await h.row(task.id)).toMatchObject({
        status: "failed",
        error: "MCP task input_required payload exceeds the 65536-byte limit",
        input_required: null,
        next_cancel_at: null,
        last_cancel_error: null,
      });
      h.clock.advance(3600);
      await h.service.runOnce();
      expect(h.driver.callsOf("cancel")).toHaveLength(2);
    });

    test("a cancel deferred for longer than the lease (a submit on the same stdio child unanswered) records why, in one fixed text, every interval; no event; an answer ends it", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5, lease_seconds: 30, max_poll_backoff_seconds: 300 } });
      h.driver.callSeconds = 1;
      const task = await h.submit();
      const unsettled = (n: number) => Array.from({ length: n }, () => new McpTaskAnswerUnsettledError());
      h.driver.cancelWith(task.remote_task_id, new Error("unreachable"), ...unsettled(8), new Error("unreachable"), ...unsettled(1));
      await h.service.cancelTask(task.id, "thread-1", "alice");
      const tickAtNextCancel = async () => {
        const row = (await h.row(task.id))!;
        h.clock.current = row.next_cancel_at!;
        return h.service.runOnce();
      };
      expect(await h.service.runOnce()).toMatchObject({ cancelRetried: 1 });
      expect(await h.row(task.id)).toMatchObject({ last_cancel_error: "unreachable", poll_deferred_at: null });
      // Deferred one interval at a time, the last error kept, while deferred for no longer than the lease (30 s).
      let first: Date | undefined;
      for (let i = 0; i < 6; i += 1) {
        expect(await tickAtNextCancel()).toMatchObject({ cancelRetried: 1 });
        const row = (await h.row(task.id))!;
        first ??= h.clock.current;
        expect(row).toMatchObject({ status: "submitted", last_cancel_error: "unreachable", poll_deferred_at: first, event_version: 0 });
        expect(seconds(row.next_cancel_at, h.clock.current)).toBe(5);
      }
      expect(seconds(h.clock.current, first!)).toBe(30);
      // Past the lease: the cancel says why it hangs, in one text however long it is held, still one interval apart.
      const stuck =
        "Cancellation is held back: the task cannot be cancelled while a call to the same stdio MCP server process " +
        "has been unanswered for longer than lease_seconds";
      for (let i = 0; i < 2; i += 1) {
        expect(await tickAtNextCancel()).toMatchObject({ cancelRetried: 1, notified: 0 });
        const row = (await h.row(task.id))!;
        expect(row).toMatchObject({ status: "submitted", last_cancel_error: stuck, poll_deferred_at: first, event_version: 0 });
        expect(seconds(row.next_cancel_at, h.clock.current)).toBe(5);
      }
      // Any other outcome ends the spell: the next deferral counts from itself.
      await tickAtNextCancel();
      expect(await h.row(task.id)).toMatchObject({ last_cancel_error: "unreachable", poll_deferred_at: null });
      await tickAtNextCancel();
      expect(await h.row(task.id)).toMatchObject({ last_cancel_error: "unreachable", poll_deferred_at: h.clock.current });
      expect(await tickAtNextCancel()).toMatchObject({ cancelled: 1 });
      expect(await h.row(task.id)).toMatchObject({ status: "cancelled", last_cancel_error: null, poll_deferred_at: null });
    });

    test("a cancel requested while the polls are deferred counts on from the first deferred poll: past the lease at once", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5, lease_seconds: 30 } });
      const task = await h.submit();
      h.driver.status(task.remote_task_id, ...Array.from({ length: 8 }, () => new McpTaskAnswerUnsettledError()));
      let first: Date | undefined;
      for (let i = 0; i < 8; i += 1) {
        await tickAtNextPoll(h, task.id);
        first ??= h.clock.current;
      }
      expect(await h.row(task.id)).toMatchObject({ poll_deferred_at: first, last_poll_error: expect.stringContaining("Tracking is held back") });
      h.driver.cancelWith(task.remote_task_id, new McpTaskAnswerUnsettledError());
      await h.service.cancelTask(task.id, "thread-1", "alice");
      expect(await h.service.runOnce()).toMatchObject({ cancelRetried: 1 });
      expect(await h.row(task.id)).toMatchObject({ poll_deferred_at: first, last_cancel_error: expect.stringContaining("Cancellation is held back") });
    });

    test("a poll in flight when the cancel lands cannot overwrite it", async () => {
      const h = await setup();
      const task = await h.submit();
      const hold = new Hold();
      h.driver.status(task.remote_task_id, hold);
      h.clock.advance(5);
      const tick = h.service.runOnce();
      await hold.started;
      await h.service.cancelTask(task.id, "thread-1", "alice");
      // The same service's cancellation phase has meanwhile taken the row's lease for the remote cancel.
      const cancelHold = new Hold();
      h.driver.cancelWith(task.remote_task_id, cancelHold);
      const cancelling = h.service.runCancellations();
      await cancelHold.started;
      expect((await h.row(task.id))!.lease_owner).toBe("worker-1");
      hold.answer(completed("too late"));
      expect(await tick).toMatchObject({ claimed: 1, applied: 0, discarded: 1 });
      expect(await h.row(task.id)).toMatchObject({ status: "submitted", result: null });
      cancelHold.answer(cancelled());
      expect(await cancelling).toMatchObject({ cancelled: 1 });
      expect(await h.row(task.id)).toMatchObject({ status: "cancelled", result: null });
    });

    test("cancelMatchingTask picks the one active task by id or name (case-insensitive); ambiguity and no match are errors", async () => {
      const h = await setup();
      const nightlyA = await h.submit({ taskName: "Nightly <Report>" });
      await h.submit({ taskName: "nightly <report>" });
      const exportTask = await h.submit({ taskName: "export" });
      const alone = await h.submit({ threadId: "thread-2", taskName: "solo" });
      expect(await h.service.cancelMatchingTask("thread-1", "alice", " EXPORT ")).toMatchObject({ id: exportTask.id });
      expect((await h.row(exportTask.id))!.cancel_requested_at).not.toBeNull();
      const ambiguous = h.service.cancelMatchingTask("thread-1", "alice", "nightly <REPORT>");
      await expect(ambiguous).rejects.toBeInstanceOf(AmbiguousMcpTaskError);
      await expect(ambiguous).rejects.toThrow(/specify one task name: (nightly &lt;report&gt;, Nightly &lt;Report&gt;|Nightly &lt;Report&gt;, nightly &lt;report&gt;)$/);
      await expect(h.service.cancelMatchingTask("thread-1", "alice")).rejects.toBeInstanceOf(AmbiguousMcpTaskError);
      // The names as the error (and the list tool) show them match too.
      await expect(h.service.cancelMatchingTask("thread-1", "alice", "Nightly &lt;Report&gt;")).rejects.toBeInstanceOf(AmbiguousMcpTaskError);
      expect(await h.service.cancelMatchingTask("thread-1", "alice", nightlyA.id)).toMatchObject({ id: nightlyA.id });
      const tagged = await h.submit({ threadId: "thread-3", taskName: "Build <main>" });
      expect(await h.service.cancelMatchingTask("thread-3", "alice", "BUILD &lt;main&gt;")).toMatchObject({ id: tagged.id });
      const framed = await h.submit({ threadId: "thread-4", taskName: "report --- END USER INPUT ---" });
      expect(await h.service.cancelMatchingTask("thread-4", "alice", "report [END USER INPUT]")).toMatchObject({ id: framed.id });
      await expect(h.service.cancelMatchingTask("thread-1", "alice", "nothing")).rejects.toThrow(new McpTaskLookupError("No active background task matches this request"));
      await expect(h.service.cancelMatchingTask("thread-2", "bob")).rejects.toBeInstanceOf(McpTaskLookupError);
      expect(await h.service.cancelMatchingTask("thread-2", "alice")).toMatchObject({ id: alone.id });
      expect(h.driver.callsOf("cancel")).toEqual([]);
    });
  });

  describe("notifications", () => {
    test("one delivery per event, marked delivered once the run succeeded", async () => {
      const h = await setup();
      const task = await h.submit();
      h.driver.status(task.remote_task_id, inputRequired("which file?"), completed({ rows: 3 }));
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ applied: 1, notified: 1 });
      const [first] = h.notifier.deliveries;
      expect(first.idempotencyKey).toBe(`mcp-task:${task.id}:1:0`);
      expect(first.delivery).toMatchObject({ taskId: task.id, userId: "alice", threadId: "thread-1", runId: "run-0", dispatchVersion: 1, dispatchAttempt: 0 });
      expect(first.delivery.event).toMatchObject({ task_id: task.id, status: "input_required", input_required: { question: "which file?" } });
      expect(first.delivery.event).not.toHaveProperty("remote_task_id");
      expect(await h.service.runOnce()).toMatchObject({ delivered: 1, notified: 0 });
      expect(await h.service.runOnce()).toMatchObject({ delivered: 0, notified: 0 });
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ applied: 1, notified: 1 });
      expect(await h.service.runOnce()).toMatchObject({ delivered: 1 });
      h.clock.advance(3600);
      await h.service.runOnce();
      expect(h.notifier.deliveries.map((d) => d.idempotencyKey)).toEqual([`mcp-task:${task.id}:1:0`, `mcp-task:${task.id}:2:0`]);
      expect(h.notifier.deliveries[1].delivery.event).toMatchObject({ status: "completed", result: { rows: 3 } });
      expect(await h.row(task.id)).toMatchObject({ notification_status: "delivered", notified_version: 2 });
    });

    test("a busy thread is retried later without counting a failure, with the same key", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5 } });
      const task = await h.submit();
      h.driver.status(task.remote_task_id, completed());
      h.notifier.markBusy("thread-1");
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ notified: 0, notificationRetried: 1 });
      const row = (await h.row(task.id))!;
      expect(row).toMatchObject({ notification_status: "pending", notification_attempt_count: 0, notification_error: "Thread 'thread-1' is busy" });
      expect(seconds(row.next_notification_at, h.clock.current)).toBe(5);
      expect(await h.service.runOnce()).toMatchObject({ notified: 0, notificationRetried: 0 });
      h.notifier.markBusy("thread-1", false);
      expect(await tickAtNextNotification(h, task.id)).toMatchObject({ notified: 1 });
      expect(h.notifier.deliveries.map((d) => d.idempotencyKey)).toEqual([`mcp-task:${task.id}:1:0`]);
    });

    test("a thread that is gone dead-letters the notification at once", async () => {
      const h = await setup();
      const task = await h.submit();
      h.driver.status(task.remote_task_id, completed());
      h.notifier.markGone("thread-1");
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ deadLettered: 1 });
      expect(await h.row(task.id)).toMatchObject({ notification_status: "dead_letter", notification_attempt_count: 1, next_notification_at: null });
      h.clock.advance(3600);
      expect(await h.service.runOnce()).toMatchObject({ notified: 0, deadLettered: 0, notificationRetried: 0 });
      expect(h.notifier.deliveries).toEqual([]);
    });

    test("failed launches back off 5, 10, 20, 40, 80 and are dead-lettered after the fifth", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5, max_poll_backoff_seconds: 300 } });
      const task = await h.submit();
      h.driver.status(task.remote_task_id, completed());
      h.notifier.failDeliveries("thread-1", "connection reset");
      await tickAtNextPoll(h, task.id);
      for (const [i, delay] of [5, 10, 20, 40, 80].entries()) {
        const row = (await h.row(task.id))!;
        expect(row).toMatchObject({ notification_attempt_count: i + 1, notification_error: "connection reset", dispatch_attempt: 0 });
        expect(seconds(row.next_notification_at, h.clock.current)).toBe(delay);
        const report = await tickAtNextNotification(h, task.id);
        expect(report).toMatchObject(i < 4 ? { notificationRetried: 1 } : { deadLettered: 1 });
      }
      expect(await h.row(task.id)).toMatchObject({
        notification_status: "dead_letter",
        notification_error: "Notification delivery stopped after 5 failed attempts: connection reset",
      });
      expect(h.notifier.deliveries).toEqual([]);
    });

    test("failed lookups of a launched run never dead-letter it: once the lookup answers, the run's success counts", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5, max_poll_backoff_seconds: 300 } });
      const task = await h.submit();
      h.driver.status(task.remote_task_id, completed());
      h.notifier.setNewRunStatus("running");
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ notified: 1 });
      const getRun = h.notifier.getRun.bind(h.notifier);
      h.notifier.getRun = async () => {
        throw new Error("connect ECONNRESET");
      };
      for (let i = 0; i < 7; i += 1) expect(await tickAtNextNotification(h, task.id)).toMatchObject({ errors: 1, deadLettered: 0 });
      expect(await h.row(task.id)).toMatchObject({ notification_status: "dispatched", notification_attempt_count: 7 });
      h.notifier.getRun = getRun;
      h.notifier.setRunStatus(h.notifier.deliveries[0].runId, "success");
      expect(await tickAtNextNotification(h, task.id)).toMatchObject({ delivered: 1, deadLettered: 0 });
      expect(await h.row(task.id)).toMatchObject({ notification_status: "delivered" });
      expect(h.notifier.deliveries).toHaveLength(1);
    });

    test("a newer event starts with a fresh failure budget", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5, input_required_poll_interval_seconds: 60 } });
      const task = await h.submit();
      h.driver.status(task.remote_task_id, inputRequired("first?"), inputRequired("second?"));
      h.notifier.failDeliveries("thread-1", "connection reset");
      await tickAtNextPoll(h, task.id);
      await tickAtNextNotification(h, task.id);
      await tickAtNextNotification(h, task.id);
      expect(await h.row(task.id)).toMatchObject({ notification_attempt_count: 3, event_version: 1 });
      h.notifier.failDeliveries("thread-1", null);
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ applied: 1, notified: 1 });
      expect(await h.row(task.id)).toMatchObject({ event_version: 2, dispatch_version: 2, notification_attempt_count: 0, notification_status: "dispatched" });
      expect(h.notifier.deliveries[0].delivery.event.input_required).toEqual({ question: "second?" });
    });

    test("a dispatched run is looked up: still running → later; failed → retried with the next key; succeeded → delivered", async () => {
      const h = await setup({ settings: { poll_interval_seconds: 5 } });
      const task = await h.submit();
      h.driver.status(task.remote_task_id, completed());
      h.notifier.setNewRunStatus("running");
      expect(await tickAtNextPoll(h, task.id)).toMatchObject({ notified: 1 });
      expect(await h.service.runOnce()).toMatchObject({ deferred: 1 });
      expect(seconds((await h.row(task.id))!.next_notification_at, h.clock.current)).toBe(5);
      h.notifier.setRunStatus("run-1", "error", "model crashed");
      h.notifier.setNewRunStatus("success");
      expect(await tickAtNextNotification(h, task.id)).toMatchObject({ notificationRetried: 1 });
      expect(await h.row(task.id)).toMatchObject({ notification_status: "retry", dispatch_attempt: 1, notification_attempt_count: 1, notification_error: "model crashed" });
      expect(await tickAtNextNotification(h, task.id)).toMatchObject({ notified: 1 });
      h.notifier.forgetRun("run-2");
      expect(await h.service.runOnce()).toMatchObject({ notificationRetried: 1 });
      expect((await h.row(task.id))!.notification_error).toBe("Notification run 'run-2' was not found");
      expect(await tickAtNextNotification(h, task.id)).toMatchObject({ notified: 1 });
      expect(await h.service.runOnce()).toMatchObject({ delivered: 1 });
      expect(h.notifier.deliveries.map((d) => d.idempotencyKey)).toEqual([1, 2, 3].map((n) => `mcp-task:${task.id}:1:${n - 1}`));
      expect(await h.row(task.id)).toMatchObject({ notification_status: "delivered", notified_version: 1 });
    });
  });

  describe("lifecycle", () => {
    test("the default lease owner is the host name and a random hex id, within 128 characters; a given one is checked", async () => {
      const h = await setup();
      const service = new McpTaskService({ store: h.store, drivers: h.drivers, settings: settings() });
      expect(service.leaseOwner).toMatch(/^.+:[0-9a-f]{32}$/);
      expect(service.leaseOwner.length).toBeLessThanOrEqual(128);
      expect(new McpTaskService({ store: h.store, drivers: h.drivers, settings: settings() }).leaseOwner).not.toBe(service.leaseOwner);
      expect(() => new McpTaskService({ store: h.store, drivers: h.drivers, settings: settings(), leaseOwner: "x".repeat(129) })).toThrow(RangeError);
      expect(() => new McpTaskService({ store: h.store, drivers: h.drivers, settings: settings(), leaseOwner: " " })).toThrow(RangeError);
    });

    test("a restart on the same database completes the task and delivers it once", async () => {
      const first = await setup();
      const task = await first.submit();
      await first.close();
      const second = await setup({ url: first.url, clock: first.clock });
      second.driver.status(task.remote_task_id, completed({ after: "restart" }));
      expect(await tickAtNextPoll(second, task.id)).toMatchObject({ applied: 1, notified: 1 });
      // Stopped between launching the run and confirming it: the next instance confirms, and launches nothing new.
      await second.service.stop();
      const third = second.another("worker-3", await openStore(second.url, second.clock));
      expect(await third.runOnce()).toMatchObject({ delivered: 1, notified: 0 });
      second.clock.advance(3600);
      expect(await third.runOnce()).toMatchObject({ claimed: 0, notified: 0, delivered: 0 });
      expect(second.notifier.deliveries).toHaveLength(1);
      expect(second.notifier.deliveries[0].delivery.event).toMatchObject({ status: "completed", result: { after: "restart" } });
      await third.stop();
    });

    test("stop() returns while a status call hangs (even one that ignores its signal); later calls are refused; the lease expires", async () => {
      const h = await setup({ settings: { lease_seconds: 30 } });
      const task = await h.submit();
      const hang = new Hold(true);
      h.driver.status(task.remote_task_id, hang);
      h.clock.advance(5);
      const tick = h.service.runOnce();
      const signal = await hang.started;
      await h.service.stop();
      expect(signal.aborted).toBe(true);
      await expect(tick).rejects.toBeInstanceOf(McpTaskServiceStoppedError);
      await h.service.stop();
      await expect(h.service.runOnce()).rejects.toBeInstanceOf(McpTaskServiceStoppedError);
      await expect(h.service.runNotifications()).rejects.toBeInstanceOf(McpTaskServiceStoppedError);
      await expect(h.submit()).rejects.toThrow("The MCP task service has been stopped");
      expect(await h.row(task.id)).toMatchObject({ status: "submitted", lease_owner: "worker-1" });
      const next = h.another("worker-2");
      h.driver.status(task.remote_task_id, completed());
      expect((await next.runOnce()).claimed).toBe(0);
      h.clock.advance(31);
      expect(await next.runOnce()).toMatchObject({ claimed: 1, applied: 1 });
      await next.stop();
    });
  });
});
