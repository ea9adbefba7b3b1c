/**
 * A stateless run's stdio child (its temporary thread the LangGraph server deletes once the run ends) that accepted a
 * durable task: kept while the task is pending, then closed `temporaryStdioIdleSeconds` after the task ended, as a
 * temporary thread's child that never served a task is. The task's own calls (its submit, the worker's polls) do not
 * make it an ordinary child. A real stdio job server keeping its jobs in the process, a real SQLite file, a real
 * ToolNode graph run as the server runs a stateless run, and the real worker tick on an injected clock; the idle time
 * passes on jest's fake clock (only this process's timers), switched back to the real one before waiting for a process
 * to end.
 */
import { afterEach, describe, expect, jest, test } from "@jest/globals";
import { existsSync } from "node:fs";
import * as path from "node:path";
import { RecordingLogger } from "../../lib";
import { MemoryTaskNotifier, type SubmittedTask, type TaskRuntime } from "../../lib/tasks";
import { threadPaths } from "../../lib/sessions/workspace";
import { callThroughGraph, JOB_TOOLSET, makeTempDir, ManualClock, stdioFixture, toolNodeGraph, writeConfig, type ToolNodeGraph } from "../fixtures";
import { alive, waitUntil } from "../fixtures/processes";
import { closeTaskHarnesses, startTaskHarness } from "../fixtures/task-harness";
import { ToolGate } from "../fixtures/tool-gate";

const FAKE: Parameters<typeof jest.useFakeTimers>[0] = { doNotFake: ["nextTick", "queueMicrotask", "setImmediate", "Date", "hrtime", "performance"] };
const SECOND = 1000;

const gates: ToolGate[] = [];

afterEach(async () => {
  jest.useRealTimers();
  for (const gate of gates.splice(0)) gate.open();
  await closeTaskHarnesses();
});

/** A stateless run of the LangGraph server on `thread`: the server's ids, no checkpointer. */
const run = (thread: string) => ({ configurable: { thread_id: thread, graph_id: "agent", assistant_id: "a-1" } });

interface Kit {
  dir: string;
  runtime: TaskRuntime;
  clock: ManualClock;
  notifier: MemoryTaskNotifier;
  logger: RecordingLogger;
  stateless: ToolNodeGraph;
  gate: ToolGate;
  /** The pid of the child of `thread` (a stateless run's call). */
  pid(thread: string): Promise<number>;
}

/** A toolkit with a stdio task server and a 60 s idle bound for temporary threads' children, on jest's fake clock. */
async function kit(): Promise<Kit> {
  jest.useFakeTimers(FAKE);
  const dir = await makeTempDir("task-temporary-");
  const configPath = await writeConfig(dir, {
    mcpTasks: { enabled: true, poll_interval_seconds: 5 },
    mcpServers: {
      local: {
        type: "stdio",
        ...stdioFixture({ name: "local", toolNames: ["pid"], tasks: true }),
        // The submit answered, its answer held by the interceptor while the fake clock runs past the bound.
        tool_call_timeout: null,
        task_toolsets: [{ name: "compile", ...JOB_TOOLSET }],
      },
    },
  });
  const gate = new ToolGate();
  gates.push(gate);
  const { runtime, clock, notifier, logger, tools } = await startTaskHarness(dir, configPath, { temporaryStdioIdleSeconds: 60, interceptors: [gate.interceptor] });
  const stateless = toolNodeGraph(tools);
  const pid = async (thread: string) => Number((await callThroughGraph(stateless, "local_pid", {}, run(thread))).content);
  return { dir, runtime, clock, notifier, logger, stateless, gate, pid };
}

/** Back on the real clock, waits for `pid` to end and the thread folder to go. */
async function closedAndRemoved(pid: number, dir: string, thread: string): Promise<boolean> {
  jest.useRealTimers();
  return waitUntil(() => !alive(pid) && !existsSync(path.dirname(threadPaths(dir, thread).userData)), 30_000);
}

describe("a stateless run's stdio child that accepted a durable task", () => {
  test("is kept while the task is pending, polls included; closes once idle for the temporary bound after the task ended", async () => {
    const k = await kit();
    const child = await k.pid("temp-task");
    const submitted = await callThroughGraph(k.stateless, "local_start_job", { label: "t", steps: 2 }, run("temp-task"));
    expect(submitted.status).toBe("success");
    const taskId = (JSON.parse(String(submitted.content)) as SubmittedTask).task_id;
    // Pending: time alone does not close it, before or after a poll.
    jest.advanceTimersByTime(600 * SECOND);
    expect(await k.pid("temp-task")).toBe(child);
    await k.runtime.runOnce(k.clock.advance(5));
    expect((await k.runtime.service.getTask(taskId, "default"))?.status).toBe("working");
    jest.advanceTimersByTime(600 * SECOND);
    expect(await k.pid("temp-task")).toBe(child);

    await k.runtime.runOnce(k.clock.advance(5));
    const row = await k.runtime.service.getTask(taskId, "default");
    expect([row?.status, row?.error]).toEqual(["completed", null]);
    expect(row?.result).toMatchObject({ label: "t", pid: child, step: 2 });
    expect(k.notifier.deliveriesOf(taskId)[0]!.delivery.event).toMatchObject({ status: "completed", result: { pid: child } });

    // The task's end starts the count of a temporary thread's child; the poll that ended it made it no ordinary one.
    jest.advanceTimersByTime(59 * SECOND);
    expect(await k.pid("temp-task")).toBe(child);
    jest.advanceTimersByTime(61 * SECOND);
    expect(await closedAndRemoved(child, k.dir, "temp-task")).toBe(true);
    expect(k.logger.messages("warn")).toEqual([]);
  });

  test("a submit that failed (no task) leaves it a temporary thread's child: it closes once idle for the bound", async () => {
    const k = await kit();
    const child = await k.pid("temp-failed");
    const failed = await callThroughGraph(k.stateless, "local_start_job", { label: "f", submit_error: true }, run("temp-failed"));
    expect(failed.status).toBe("error");
    jest.advanceTimersByTime(59 * SECOND);
    expect(await k.pid("temp-failed")).toBe(child);
    jest.advanceTimersByTime(61 * SECOND);
    expect(await closedAndRemoved(child, k.dir, "temp-failed")).toBe(true);
  });

  test("the idle count does not close it between the submit's answer and its task's hold; the task completes there", async () => {
    const k = await kit();
    const child = await k.pid("temp-gated");
    const answered = k.gate.arm();
    const submit = callThroughGraph(k.stateless, "local_start_job", { label: "g", steps: 1 }, run("temp-gated"));
    await answered;
    // The submit's call is over, the child idle: far past the bound before the driver reads the answer.
    jest.advanceTimersByTime(600 * SECOND);
    k.gate.open();
    const submitted = await submit;
    expect(submitted.status).toBe("success");
    const taskId = (JSON.parse(String(submitted.content)) as SubmittedTask).task_id;
    await k.runtime.runOnce(k.clock.advance(5));
    const row = await k.runtime.service.getTask(taskId, "default");
    expect([row?.status, row?.error]).toEqual(["completed", null]);
    expect(row?.result).toMatchObject({ label: "g", pid: child });
    jest.advanceTimersByTime(61 * SECOND);
    expect(await closedAndRemoved(child, k.dir, "temp-gated")).toBe(true);
  });

  test("a failed submit's count, run out while its answer was read, starts again once the submit is known to have no task", async () => {
    const k = await kit();
    const child = await k.pid("temp-gated-failed");
    const answered = k.gate.arm();
    const submit = callThroughGraph(k.stateless, "local_start_job", { label: "g", submit_error: true }, run("temp-gated-failed"));
    await answered;
    jest.advanceTimersByTime(600 * SECOND);
    k.gate.open();
    expect((await submit).status).toBe("error");
    jest.advanceTimersByTime(61 * SECOND);
    expect(await closedAndRemoved(child, k.dir, "temp-gated-failed")).toBe(true);
  });
});
