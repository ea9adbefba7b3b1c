/**
 * A stdio child killed while it held job `job-1`: the scope's next child may hand out `job-1` again to a new submit.
 * The old task's status poll running in that child after it answered the submit, but before the new task's row is
 * written, hears about the new job: that answer must never become the old task's outcome. The moments are made
 * deterministic by an interceptor holding the submit after the child answered it, and by holding the store's insert of
 * the new row. A real stdio job server, a real SQLite file, createAgent agents and the real worker tick on a manual clock.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import * as path from "node:path";
import { ToolMessage } from "@langchain/core/messages";
import type { McpToolInterceptor } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { REISSUED_REMOTE_TASK_ERROR, type TaskStore } from "../../lib/tasks/store";
import { JOB_TOOLSET, makeTempDir, stdioFixture, writeConfig } from "../fixtures";
import { agentTurn } from "../fixtures/graph";
import { alive, waitUntil } from "../fixtures/processes";
import { closeTaskHarnesses, startTaskHarness, submitWithPid, type TaskHarness } from "../fixtures/task-harness";
import { ToolGate } from "../fixtures/tool-gate";

/** When on, answers a failed poll or cancel itself with an error ToolMessage (a common error-handling interceptor). */
const swallowing = { on: false };
const swallowErrors: McpToolInterceptor = async (request, next) => {
  if (!swallowing.on || request.toolName === "start_job") return next(request);
  try {
    return await next(request);
  } catch (err) {
    return new ToolMessage({ content: `failed: ${(err as Error).message}`, tool_call_id: "swallowed", status: "error" });
  }
};
const gates: (() => void)[] = [];

afterEach(async () => {
  swallowing.on = false;
  for (const release of gates.splice(0)) release();
  await closeTaskHarnesses();
});

interface Setup extends TaskHarness {
  /** Writes the config again with another description: a hot reload at the toolkit's next `getTools`. */
  reload: () => Promise<void>;
  gate: ToolGate;
  /** Holds a poll (`job_status`) once answered. */
  statusGate: ToolGate;
}

/** `jobsFile`: the server keeps its jobs there, so each of its children knows the jobs the others started. */
async function setup(jobsFile?: (dir: string) => string): Promise<Setup> {
  const dir = await makeTempDir("task-stdio-reissued-");
  const launch = stdioFixture({ name: "local", toolNames: ["pid"], tasks: true, ...(jobsFile ? { jobsFile: jobsFile(dir) } : {}) });
  const config = (description: string) => ({
    mcpTasks: { enabled: true, poll_interval_seconds: 5 },
    mcpServers: { local: { type: "stdio", description, ...launch, task_toolsets: [{ name: "compile", ...JOB_TOOLSET }] } },
  });
  const configPath = await writeConfig(dir, config("jobs"));
  const gate = new ToolGate();
  const statusGate = new ToolGate("job_status");
  gates.push(() => gate.open(), () => statusGate.open());
  const harness = await startTaskHarness(dir, configPath, { interceptors: [swallowErrors, gate.interceptor, statusGate.interceptor] });
  const reload = async () => {
    await writeConfig(dir, config("jobs, edited"));
    await harness.toolkit.getTools();
  };
  return { ...harness, reload, gate, statusGate };
}

/** One agent turn of bob on th-a: the child's pid, then a submit; resolves with the pid and the submit's task id. */
/** The old task (steps 3) of bob on th-a got `job-1` from a child that is then killed. */
async function oldTaskInKilledChild(s: Setup): Promise<{ pid: number; taskId: string }> {
  const old = await submitWithPid(s.tools, "bob", "th-a", { label: "old", steps: 3, remote_id: "job-1" });
  process.kill(old.pid, "SIGKILL");
  expect(await waitUntil(() => !alive(old.pid))).toBe(true);
  return old;
}

/** Holds the store's insert of the row of remote id `remoteId` until `open()`; `held` resolves once one is held. */
function holdInsert(store: TaskStore, remoteId: string): { held: Promise<void>; open: () => void } {
  const create = store.create.bind(store);
  let reached!: () => void;
  let opened!: () => void;
  const held = new Promise<void>((resolve) => (reached = resolve));
  const gate = new Promise<void>((resolve) => (opened = resolve));
  gates.push(opened);
  store.create = async (input) => {
    if (input.remoteTaskId === remoteId) {
      reached();
      await gate;
    }
    return create(input);
  };
  return { held, open: opened };
}

async function expectOldLostNewCompleted(s: Setup, old: { taskId: string }, fresh: { pid: number; taskId: string }): Promise<void> {
  await s.runtime.runOnce(s.clock.advance(5));
  const oldRow = await s.runtime.service.getTask(old.taskId, "bob");
  expect([oldRow?.status, oldRow?.error, oldRow?.result ?? null]).toEqual(["failed", REISSUED_REMOTE_TASK_ERROR, null]);
  expect(s.notifier.deliveriesOf(old.taskId).map((d) => d.delivery.event)).toEqual([
    expect.objectContaining({ status: "failed", error: REISSUED_REMOTE_TASK_ERROR }),
  ]);
  const newRow = await s.runtime.service.getTask(fresh.taskId, "bob");
  expect([newRow?.status, newRow?.error]).toEqual(["completed", null]);
  expect(newRow?.result).toMatchObject({ label: "new", pid: fresh.pid });
  expect(s.notifier.deliveriesOf(fresh.taskId)[0]!.delivery.event).toMatchObject({ status: "completed", result: { label: "new" } });
}

describe("the old task's poll in the child that handed its remote id out again", () => {
  test("while the new submit is under way (answered, its task not held yet): the poll is inconclusive, no status change, no event; then the old task ends lost and the new one completes with its own result", async () => {
    const s = await setup();
    const old = await oldTaskInKilledChild(s);
    const answered = s.gate.arm();
    const turn = submitWithPid(s.tools, "bob", "th-a", { label: "new", steps: 1, remote_id: "job-1" });
    await answered;
    const tick = await s.runtime.runOnce(s.clock.advance(5));
    const oldRow = await s.runtime.service.getTask(old.taskId, "bob");
    expect(oldRow?.result ?? null).toBeNull();
    expect([oldRow?.status, oldRow?.error, oldRow?.consecutive_poll_error_count, oldRow?.last_poll_error]).toEqual(["submitted", null, 0, null]);
    expect(oldRow?.next_poll_at?.getTime()).toBe(s.clock.current.getTime() + 5000);
    expect([tick.applied, tick.failed, tick.retried]).toEqual([0, 0, 1]);
    expect(s.notifier.deliveriesOf(old.taskId)).toEqual([]);
    s.gate.open();
    const fresh = await turn;
    expect(fresh.pid).not.toBe(old.pid);
    await expectOldLostNewCompleted(s, old, fresh);
  });

  test("a submit sent on that child while the poll was out (the child chosen before it): the answer is not read, the poll is inconclusive; then the old task ends lost", async () => {
    const s = await setup();
    const old = await oldTaskInKilledChild(s);
    // The poll starts the scope's next child, which answers about job-1 before any submit reached it.
    const polled = s.statusGate.arm();
    const tick = s.runtime.runOnce(s.clock.advance(5));
    await polled;
    const answered = s.gate.arm();
    const turn = submitWithPid(s.tools, "bob", "th-a", { label: "new", steps: 1, remote_id: "job-1" });
    await answered;
    s.statusGate.open();
    expect([(await tick).applied, (await tick).failed, (await tick).retried]).toEqual([0, 0, 1]);
    const oldRow = await s.runtime.service.getTask(old.taskId, "bob");
    expect([oldRow?.status, oldRow?.error, oldRow?.consecutive_poll_error_count]).toEqual(["submitted", null, 0]);
    expect(s.notifier.deliveriesOf(old.taskId)).toEqual([]);
    s.gate.open();
    await expectOldLostNewCompleted(s, old, await turn);
  });

  test("once the new submit's task is held but its row not yet written: the old task ends lost at once, never with the new job's result; the child still holds the new task", async () => {
    const s = await setup();
    const old = await oldTaskInKilledChild(s);
    const insert = holdInsert(s.runtime.service.store, "job-1");
    const turn = submitWithPid(s.tools, "bob", "th-a", { label: "new", steps: 1, remote_id: "job-1" });
    await insert.held;
    await s.runtime.runOnce(s.clock.advance(5));
    const oldRow = await s.runtime.service.getTask(old.taskId, "bob");
    expect([oldRow?.status, oldRow?.error, oldRow?.result ?? null]).toEqual(["failed", REISSUED_REMOTE_TASK_ERROR, null]);
    // The old task's end let go of nothing: a reload keeps the child for the new task, which completes in it.
    await s.reload();
    insert.open();
    const fresh = await turn;
    await expectOldLostNewCompleted(s, old, fresh);
  });
});

describe("the old task's cancel in the child that handed its remote id out again", () => {
  test("while the new submit is under way: the cancel waits one poll interval, no cancel error recorded; then the old task ends lost", async () => {
    const s = await setup();
    const old = await oldTaskInKilledChild(s);
    const answered = s.gate.arm();
    const turn = submitWithPid(s.tools, "bob", "th-a", { label: "new", steps: 1, remote_id: "job-1" });
    await answered;
    expect((await s.runtime.service.cancelTask(old.taskId, "th-a", "bob"))?.cancel_requested_at).not.toBeNull();
    await s.runtime.runOnce(s.clock.advance(1));
    const waiting = await s.runtime.service.getTask(old.taskId, "bob");
    expect([waiting?.status, waiting?.last_cancel_error]).toEqual(["submitted", null]);
    expect(waiting?.next_cancel_at?.getTime()).toBe(s.clock.current.getTime() + 5000);
    // Asked again while the submit is still out: one interval again, never backed off as a failed attempt is.
    await s.runtime.runOnce(s.clock.advance(5));
    const again = await s.runtime.service.getTask(old.taskId, "bob");
    expect([again?.status, again?.last_cancel_error, again?.cancel_attempt_count]).toEqual(["submitted", null, 2]);
    expect(again?.next_cancel_at?.getTime()).toBe(s.clock.current.getTime() + 5000);
    s.gate.open();
    const fresh = await turn;
    await s.runtime.runOnce(s.clock.advance(5));
    const oldRow = await s.runtime.service.getTask(old.taskId, "bob");
    expect([oldRow?.status, oldRow?.error]).toEqual(["failed", REISSUED_REMOTE_TASK_ERROR]);
    await expectOldLostNewCompleted(s, old, fresh);
  });

  test("once the new submit's task is held: the old task ends lost, and the cancel is not sent to the child whose job-1 is the new task's, which completes", async () => {
    const s = await setup();
    const old = await oldTaskInKilledChild(s);
    const insert = holdInsert(s.runtime.service.store, "job-1");
    const turn = submitWithPid(s.tools, "bob", "th-a", { label: "new", steps: 1, remote_id: "job-1" });
    await insert.held;
    expect((await s.runtime.service.cancelTask(old.taskId, "th-a", "bob"))?.cancel_requested_at).not.toBeNull();
    await s.runtime.runOnce(s.clock.advance(1));
    const oldRow = await s.runtime.service.getTask(old.taskId, "bob");
    expect([oldRow?.status, oldRow?.error, oldRow?.result ?? null]).toEqual(["failed", REISSUED_REMOTE_TASK_ERROR, null]);
    insert.open();
    const fresh = await turn;
    await expectOldLostNewCompleted(s, old, fresh);
    // The refused cancel left no call open on the child: holding nothing now, a reset closes it at once.
    await s.toolkit.reset();
    expect(await waitUntil(() => !alive(fresh.pid))).toBe(true);
  });
});

describe("a server keeping its jobs across processes", () => {
  test("a task polled in the scope's next child (another process than the one that accepted it) completes there over two polls", async () => {
    const s = await setup((dir) => path.join(dir, "jobs.jsonl"));
    const old = await submitWithPid(s.tools, "bob", "th-a", { label: "kept", steps: 2, remote_id: "job-kept" });
    process.kill(old.pid, "SIGKILL");
    expect(await waitUntil(() => !alive(old.pid))).toBe(true);
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(old.taskId, "bob"))?.status).toBe("working");
    await s.runtime.runOnce(s.clock.advance(5));
    const row = await s.runtime.service.getTask(old.taskId, "bob");
    expect([row?.status, row?.error]).toEqual(["completed", null]);
    expect(row?.result).toMatchObject({ label: "kept", step: 2 });
    expect((row?.result as { pid: number }).pid).not.toBe(old.pid);
  });

  test("a submit on the next child that stays unanswered past the lease: the old task's deferred polls count as errors, tracking_degraded; back once it answers", async () => {
    const s = await setup((dir) => path.join(dir, "jobs.jsonl"));
    const old = await submitWithPid(s.tools, "bob", "th-a", { label: "kept", steps: 2, remote_id: "job-kept" });
    process.kill(old.pid, "SIGKILL");
    expect(await waitUntil(() => !alive(old.pid))).toBe(true);
    const answered = s.gate.arm();
    const turn = submitWithPid(s.tools, "bob", "th-a", { label: "new", steps: 1, remote_id: "job-new" });
    await answered;
    const row = () => s.runtime.service.getTask(old.taskId, "bob");
    await s.runtime.runOnce(s.clock.advance(5));
    expect(await row()).toMatchObject({ status: "submitted", consecutive_poll_error_count: 0, last_poll_error: null, event_version: 0 });
    // Deferred for longer than the lease (120 s): each deferral is an error, one poll interval apart.
    await s.runtime.runOnce(s.clock.advance(121));
    const stuck =
      "Tracking is held back: the task's status cannot be checked while a call to the same stdio MCP server process has been unanswered for longer than lease_seconds";
    expect(await row()).toMatchObject({ status: "submitted", consecutive_poll_error_count: 1, last_poll_error: stuck, event_version: 0 });
    expect((await row())?.next_poll_at).toEqual(new Date(s.clock.current.getTime() + 5000));
    await s.runtime.runOnce(s.clock.advance(5));
    await s.runtime.runOnce(s.clock.advance(5));
    // The third error is the default threshold: the degraded event.
    expect(await row()).toMatchObject({ status: "submitted", consecutive_poll_error_count: 3, last_poll_error: stuck, event_version: 1 });
    s.gate.open();
    await turn;
    await s.runtime.runOnce(s.clock.advance(5));
    expect(await row()).toMatchObject({ status: "working", consecutive_poll_error_count: 0, last_poll_error: null, poll_deferred_at: null });
  });
});

/** Fails the store's first insert of the row of remote id `remoteId` (a database failure after the server accepted the job). */
function failInsert(store: TaskStore, remoteId: string): void {
  const create = store.create.bind(store);
  let failed = false;
  store.create = async (input) => {
    if (input.remoteTaskId === remoteId && !failed) {
      failed = true;
      throw new Error("database unavailable");
    }
    return create(input);
  };
}

describe("the old task polled after the child that handed its remote id out again let go of that id", () => {
  test("a new task of that id that could not be stored (its cancel failed too): the old task ends lost, never with the new job's result", async () => {
    const s = await setup();
    const old = await oldTaskInKilledChild(s);
    failInsert(s.runtime.service.store, "job-1");
    const calls = [ScriptedChatModel.toolCall("local_start_job", { label: "new", steps: 1, cancel_failures: 1, remote_id: "job-1" }, "submit-1")];
    const [submitted] = await agentTurn(s.tools, "bob", "th-a", calls);
    expect(submitted!.status).toBe("error");
    await s.runtime.runOnce(s.clock.advance(5));
    const oldRow = await s.runtime.service.getTask(old.taskId, "bob");
    expect([oldRow?.status, oldRow?.error, oldRow?.result ?? null]).toEqual(["failed", REISSUED_REMOTE_TASK_ERROR, null]);
  });
});

describe("an interceptor answering a refused poll itself", () => {
  test("the refusal still decides: the old task ends lost once the new task of its id is held, not retried as a failed poll", async () => {
    const s = await setup();
    swallowing.on = true;
    const old = await oldTaskInKilledChild(s);
    const insert = holdInsert(s.runtime.service.store, "job-1");
    const turn = submitWithPid(s.tools, "bob", "th-a", { label: "new", steps: 1, remote_id: "job-1" });
    await insert.held;
    await s.runtime.runOnce(s.clock.advance(5));
    const oldRow = await s.runtime.service.getTask(old.taskId, "bob");
    expect([oldRow?.status, oldRow?.error, oldRow?.result ?? null]).toEqual(["failed", REISSUED_REMOTE_TASK_ERROR, null]);
    insert.open();
    await expectOldLostNewCompleted(s, old, await turn);
  });

  test("while the new submit is under way: the poll is deferred, no error counted", async () => {
    const s = await setup();
    swallowing.on = true;
    const old = await oldTaskInKilledChild(s);
    const answered = s.gate.arm();
    const turn = submitWithPid(s.tools, "bob", "th-a", { label: "new", steps: 1, remote_id: "job-1" });
    await answered;
    await s.runtime.runOnce(s.clock.advance(5));
    const oldRow = await s.runtime.service.getTask(old.taskId, "bob");
    expect([oldRow?.status, oldRow?.consecutive_poll_error_count, oldRow?.last_poll_error]).toEqual(["submitted", 0, null]);
    s.gate.open();
    await expectOldLostNewCompleted(s, old, await turn);
  });
});
