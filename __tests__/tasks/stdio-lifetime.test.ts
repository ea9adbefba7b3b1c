/**
 * Durable tasks on a stdio task server against the stdio session lifetime (SPEC §5.1, §6): a task's polls run in its
 * (user, thread) child, which the LRU bound can close. A real stdio job server keeping its jobs in the process, a real
 * SQLite file, a createAgent agent and the real worker tick on an injected clock.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { ScriptedChatModel } from "../../lib/agent";
import type { SubmittedTask } from "../../lib/tasks";
import { JOB_TOOLSET, makeTempDir, startHttpFixture, stdioFixture, TaskBoard, writeConfig } from "../fixtures";
import { agentTurn } from "../fixtures/graph";
import { alive, waitUntil } from "../fixtures/processes";
import { closeTaskHarnesses, pidCall, startTaskHarness, submitWithPid, type TaskHarness } from "../fixtures/task-harness";
import { storedRows } from "../fixtures/task-rows";

afterEach(closeTaskHarnesses);

type Setup = TaskHarness;

function config(extra: Record<string, unknown> = {}, description = "jobs") {
  return {
    mcpTasks: { enabled: true, poll_interval_seconds: 5 },
    mcpServers: {
      local: {
        type: "stdio",
        description,
        ...stdioFixture({ name: "local", toolNames: ["pid"], tasks: true }),
        task_toolsets: [{ name: "compile", ...JOB_TOOLSET }],
      },
      ...extra,
    },
  };
}

async function setup(maxStdioSessions?: number, extra: Record<string, unknown> = {}): Promise<Setup> {
  const dir = await makeTempDir("task-stdio-");
  const configPath = await writeConfig(dir, config(extra));
  return startTaskHarness(dir, configPath, maxStdioSessions ? { maxStdioSessions } : {});
}

describe("the LRU bound and a child holding a pending task", () => {
  test("bound 1: a new scope does not cost an idle child its pending task; the bound still holds once the call is done", async () => {
    const s = await setup(1);
    const { pid: first, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "a", steps: 1 });
    // Another thread of the user: a second child, beyond the bound.
    const [other] = await agentTurn(s.tools, "bob", "th-b", [pidCall("pid-b")]);
    const second = Number(other!.content);
    expect(second).not.toBe(first);
    // The bound is kept: one of the two children goes once its call is over, and it is not the one holding the job.
    expect(await waitUntil(() => !alive(second) || !alive(first))).toBe(true);
    expect(alive(first)).toBe(true);

    await s.runtime.runOnce(s.clock.advance(5));
    const row = await s.runtime.service.getTask(taskId, "bob");
    expect([row?.status, row?.error]).toEqual(["completed", null]);
    expect(row?.result).toMatchObject({ label: "a", pid: first });
    expect(s.notifier.deliveriesOf(taskId)[0]!.delivery.event).toMatchObject({ status: "completed", result: { pid: first } });
  });

  test("bound 2: the idle child without a task goes, not the least recently used one holding a task; exactly 2 live", async () => {
    const s = await setup(2);
    const { pid: holder, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "a", mode: "held" });
    const [b] = await agentTurn(s.tools, "bob", "th-b", [pidCall("pid-b")]);
    const [c] = await agentTurn(s.tools, "bob", "th-c", [pidCall("pid-c")]);
    const [pidB, pidC] = [Number(b!.content), Number(c!.content)];
    expect(await waitUntil(() => [holder, pidB, pidC].filter(alive).length === 2)).toBe(true);
    expect([alive(holder), alive(pidB), alive(pidC)]).toEqual([true, false, true]);
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(taskId, "bob"))?.status).toBe("working");
    expect(s.logger.messages("warn")).toEqual([]);
  });

  test("bound 1: once its task completed, the child is an ordinary idle one again and goes before a new scope's", async () => {
    const s = await setup(1);
    const { pid: first, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "a", steps: 1 });
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(taskId, "bob"))?.status).toBe("completed");
    const [other] = await agentTurn(s.tools, "bob", "th-b", [pidCall("pid-b")]);
    const second = Number(other!.content);
    expect(await waitUntil(() => !alive(first) || !alive(second))).toBe(true);
    expect([alive(first), alive(second)]).toEqual([false, true]);
  });

  test("a child that accepted a task while already closing (bound 1, a task in a second scope) warns; a new process does not know its task", async () => {
    const s = await setup(1);
    const { pid: first, taskId: kept } = await submitWithPid(s.tools, "bob", "th-a", { label: "a", steps: 1 });
    const { taskId: lost } = await submitWithPid(s.tools, "cy", "th-b", { label: "b", steps: 1 });
    expect(s.logger.messages("warn")).toContainEqual(expect.stringContaining("a durable task of MCP server 'local' was accepted by a stdio session that is already closing"));
    await s.runtime.runOnce(s.clock.advance(5));
    const [keptRow, lostRow] = await Promise.all([s.runtime.service.getTask(kept, "bob"), s.runtime.service.getTask(lost, "cy")]);
    expect(keptRow?.status).toBe("completed");
    expect(keptRow?.result).toMatchObject({ label: "a", pid: first });
    expect([lostRow?.status, lostRow?.error]).toEqual(["failed", "no such job"]);
  });
});

describe("a stdio task polled on its child", () => {
  test("the same child across polls still completes the task; the rows keep nothing new", async () => {
    const board = new TaskBoard();
    const http = await startHttpFixture({ name: "jobs", toolNames: ["echo"], taskBoard: board });
    try {
      const s = await setup(undefined, { jobs: { type: "http", url: http.url, task_toolsets: [{ name: "build", ...JOB_TOOLSET }] } });
      const { pid, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "s", steps: 3 });
      const [onHttp] = await agentTurn(s.tools, "bob", "th-a", [ScriptedChatModel.toolCall("jobs_start_job", { label: "h", steps: 2 }, "h-1")]);
      const httpTask = (JSON.parse(String(onHttp!.content)) as SubmittedTask).task_id;
      for (let i = 0; i < 3; i += 1) await s.runtime.runOnce(s.clock.advance(5));
      const row = await s.runtime.service.getTask(taskId, "bob");
      expect(row?.status).toBe("completed");
      expect(row?.result).toMatchObject({ label: "s", pid, step: 3 });
      expect((await s.runtime.service.getTask(httpTask, "bob"))?.status).toBe("completed");

      const rows = await storedRows(s.dbPath);
      const driverData = (id: string) => JSON.parse(String(rows.find((r) => r.id === id)!.driver_data)) as Record<string, unknown>;
      expect(driverData(taskId)).toEqual(JOB_TOOLSET);
      expect(driverData(httpTask)).toEqual(JOB_TOOLSET);
    } finally {
      await http.close();
    }
  });
});

describe("two users on one thread id", () => {
  test("each task is polled in its submitter's child, also when both servers issued the same remote id; each outcome goes to its owner", async () => {
    const s = await setup();
    const ann = await submitWithPid(s.tools, "ann", "th-shared", { label: "ann-job", steps: 1, remote_id: "same-id" });
    const bob = await submitWithPid(s.tools, "bob", "th-shared", { label: "bob-job", steps: 1, remote_id: "same-id" });
    expect(ann.pid).not.toBe(bob.pid);
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(ann.taskId, "ann"))?.result).toMatchObject({ label: "ann-job", pid: ann.pid });
    expect((await s.runtime.service.getTask(bob.taskId, "bob"))?.result).toMatchObject({ label: "bob-job", pid: bob.pid });
    expect(await s.runtime.service.getTask(ann.taskId, "bob")).toBeNull();
    const [toAnn] = s.notifier.deliveriesOf(ann.taskId);
    const [toBob] = s.notifier.deliveriesOf(bob.taskId);
    expect([toAnn!.delivery.userId, toAnn!.delivery.threadId, toAnn!.delivery.event.result]).toEqual(["ann", "th-shared", expect.objectContaining({ label: "ann-job" })]);
    expect([toBob!.delivery.userId, toBob!.delivery.threadId, toBob!.delivery.event.result]).toEqual(["bob", "th-shared", expect.objectContaining({ label: "bob-job" })]);
  });
});

describe("a reload and a child holding a pending task", () => {
  test("a hot reload (the task server's description edited) keeps the holder for the new generation; other children close", async () => {
    const s = await setup();
    const { pid: holder, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "a", steps: 2 });
    const [plain] = await agentTurn(s.tools, "cy", "th-b", [pidCall("pid-b")]);
    await writeConfig(s.dir, config({}, "jobs, edited"));
    const tools = await s.toolkit.getTools();
    expect(await waitUntil(() => !alive(Number(plain!.content)))).toBe(true);
    expect(alive(holder)).toBe(true);

    await s.runtime.runOnce(s.clock.advance(5));
    await s.runtime.runOnce(s.clock.advance(5));
    const row = await s.runtime.service.getTask(taskId, "bob");
    expect([row?.status, row?.error]).toEqual(["completed", null]);
    expect(row?.result).toMatchObject({ label: "a", pid: holder, step: 2 });
    // The new generation's pool owns it: the scope's next call runs there, and close() ends it.
    const [again] = await agentTurn(tools, "bob", "th-a", [pidCall("pid-again")]);
    expect(Number(again!.content)).toBe(holder);
    await s.toolkit.close();
    expect(alive(holder)).toBe(false);
    expect(s.logger.messages("warn")).toEqual([]);
  });

  test("an edit of the task server's launch (frozen: restart needed) is not adopted: its holder closes, its polls name the restart", async () => {
    const s = await setup();
    const { pid: holder, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "e", steps: 2 });
    const edited = config();
    (edited.mcpServers.local as { env: Record<string, string> }).env.EXTRA = "1";
    await writeConfig(s.dir, edited);
    await expect(s.toolkit.getTools()).rejects.toThrow(/restart the process/);
    expect(await waitUntil(() => !alive(holder))).toBe(true);
    await s.runtime.runOnce(s.clock.advance(5));
    const row = await s.runtime.service.getTask(taskId, "bob");
    expect(row?.status).toBe("submitted");
    expect(row?.last_poll_error).toMatch(/restart the process/);
  });

  test("a child SIGKILLed while holding a task: the next poll runs in a new child and the task fails for good, no endless polling", async () => {
    const s = await setup();
    const { pid: holder, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "k", steps: 3 });
    process.kill(holder, "SIGKILL");
    expect(await waitUntil(() => !alive(holder))).toBe(true);
    const report = await s.runtime.runOnce(s.clock.advance(5));
    expect(report).toMatchObject({ claimed: 1 });
    const row = await s.runtime.service.getTask(taskId, "bob");
    expect([row?.status, row?.error]).toEqual(["failed", "no such job"]);
    expect(s.notifier.deliveriesOf(taskId)[0]!.delivery.event).toMatchObject({ status: "failed" });
  });
});
