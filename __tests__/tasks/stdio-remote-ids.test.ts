/**
 * Remote ids of a stdio task server are issued per process: one child per (user, thread), and each child may number
 * its jobs from 1. A real stdio job server, a real SQLite file, a createAgent agent and the real worker tick.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import type { ToolMessage } from "@langchain/core/messages";
import type { SubmittedTask } from "../../lib/tasks";
import { JOB_TOOLSET, makeTempDir, stdioFixture, writeConfig } from "../fixtures";
import { agentTurn } from "../fixtures/graph";
import { alive, waitUntil } from "../fixtures/processes";
import { closeTaskHarnesses, pidCall, startTaskHarness, submitCall, type TaskHarness } from "../fixtures/task-harness";
import { REISSUED_REMOTE_TASK_ERROR } from "../../lib/tasks/store";

afterEach(closeTaskHarnesses);

type Setup = TaskHarness;

async function setup(): Promise<Setup> {
  const dir = await makeTempDir("task-stdio-ids-");
  const configPath = await writeConfig(dir, {
    mcpTasks: { enabled: true, poll_interval_seconds: 5 },
    mcpServers: {
      local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"], tasks: true }), task_toolsets: [{ name: "compile", ...JOB_TOOLSET }] },
    },
  });
  return startTaskHarness(dir, configPath);
}

/** One agent turn on (user, thread): the child's pid and the submit's ToolMessage. */
async function submitTurn(s: Setup, user: string, thread: string, args: Record<string, unknown>): Promise<{ pid: number; submitted: ToolMessage }> {
  const [pid, submitted] = await agentTurn(s.tools, user, thread, [pidCall("pid-1"), submitCall(args)]);
  return { pid: Number(pid!.content), submitted: submitted! };
}

const taskIdOf = (m: ToolMessage) => (JSON.parse(String(m.content)) as SubmittedTask).task_id;

describe("a stdio server numbering its jobs per process", () => {
  test("the same remote id from the children of two threads of one user: both are tracked, each completes with its own job", async () => {
    const s = await setup();
    const a = await submitTurn(s, "bob", "th-a", { label: "job-a", steps: 1, remote_id: "job-1" });
    const b = await submitTurn(s, "bob", "th-b", { label: "job-b", steps: 1, remote_id: "job-1" });
    expect(a.pid).not.toBe(b.pid);
    expect([a.submitted.status, b.submitted.status]).toEqual(["success", "success"]);
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(taskIdOf(a.submitted), "bob"))?.result).toMatchObject({ label: "job-a", pid: a.pid });
    expect((await s.runtime.service.getTask(taskIdOf(b.submitted), "bob"))?.result).toMatchObject({ label: "job-b", pid: b.pid });
  });

  test("a child killed while holding job-1: the scope's next child issuing job-1 again is tracked; the old task fails as lost, never with the new job's result", async () => {
    const s = await setup();
    const old = await submitTurn(s, "bob", "th-a", { label: "old", steps: 3, remote_id: "job-1" });
    process.kill(old.pid, "SIGKILL");
    expect(await waitUntil(() => !alive(old.pid))).toBe(true);
    const fresh = await submitTurn(s, "bob", "th-a", { label: "new", steps: 1, remote_id: "job-1" });
    expect(fresh.pid).not.toBe(old.pid);
    expect(fresh.submitted.status).toBe("success");
    await s.runtime.runOnce(s.clock.advance(5));
    const oldRow = await s.runtime.service.getTask(taskIdOf(old.submitted), "bob");
    expect(oldRow?.status).toBe("failed");
    expect(oldRow?.result ?? null).toBeNull();
    expect(oldRow?.error).toBe(REISSUED_REMOTE_TASK_ERROR);
    expect(s.notifier.deliveriesOf(taskIdOf(old.submitted))[0]!.delivery.event).toMatchObject({ status: "failed", error: REISSUED_REMOTE_TASK_ERROR });
    const newRow = await s.runtime.service.getTask(taskIdOf(fresh.submitted), "bob");
    expect([newRow?.status, newRow?.result]).toEqual(["completed", expect.objectContaining({ label: "new", pid: fresh.pid })]);
  });

  test("a completed task's id issued again by the scope's next child (the idle child gone) is a new task, not a duplicate", async () => {
    const s = await setup();
    const old = await submitTurn(s, "bob", "th-a", { label: "old", steps: 1, remote_id: "job-1" });
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(taskIdOf(old.submitted), "bob"))?.result).toMatchObject({ label: "old", pid: old.pid });
    process.kill(old.pid, "SIGKILL");
    expect(await waitUntil(() => !alive(old.pid))).toBe(true);
    const fresh = await submitTurn(s, "bob", "th-a", { label: "new", steps: 1, remote_id: "job-1" });
    expect(fresh.submitted.status).toBe("success");
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(taskIdOf(fresh.submitted), "bob"))?.result).toMatchObject({ label: "new", pid: fresh.pid });
    expect((await s.runtime.service.getTask(taskIdOf(old.submitted), "bob"))?.result).toMatchObject({ label: "old", pid: old.pid });
  });

  test("one child answering the same id twice is still a duplicate: the second submit is refused and the first task kept", async () => {
    const s = await setup();
    const first = await submitTurn(s, "bob", "th-a", { label: "one", steps: 1, remote_id: "job-1" });
    const second = await submitTurn(s, "bob", "th-a", { label: "two", steps: 1, remote_id: "job-1" });
    expect(second.pid).toBe(first.pid);
    expect(String(second.submitted.content)).toBe("Background task 'compile' was not submitted: the server returned a job that is already tracked");
    expect((await s.runtime.service.getTask(taskIdOf(first.submitted), "bob"))?.status).toBe("submitted");
  });

  test("without a new submit, the old task's poll in the scope's next child still fails (the job is unknown there)", async () => {
    const s = await setup();
    const old = await submitTurn(s, "bob", "th-a", { label: "old", steps: 3, remote_id: "job-1" });
    process.kill(old.pid, "SIGKILL");
    expect(await waitUntil(() => !alive(old.pid))).toBe(true);
    await s.runtime.runOnce(s.clock.advance(5));
    const oldRow = await s.runtime.service.getTask(taskIdOf(old.submitted), "bob");
    expect(oldRow?.status).toBe("failed");
  });
});
