/**
 * A durable task's submit holds its stdio child from before the call is sent until the driver has recorded the task
 * (or knows there is none): a hot reload or the LRU bound landing after the child answered the submit but before the
 * hold is recorded keeps that child, and the task completes in it. The moment is made deterministic by an interceptor
 * awaiting a promise the test controls after `next()` returned. A real stdio job server keeping its jobs in the
 * process, a real SQLite file, a createAgent agent and the real worker tick on an injected clock.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import type { SubmittedTask } from "../../lib/tasks";
import { JOB_TOOLSET, makeTempDir, stdioFixture, writeConfig } from "../fixtures";
import { agentTurn } from "../fixtures/graph";
import { alive, waitUntil } from "../fixtures/processes";
import { closeTaskHarnesses, pidCall, startTaskHarness, submitCall, type TaskHarness } from "../fixtures/task-harness";
import { ToolGate as Gate } from "../fixtures/tool-gate";

const gates: Gate[] = [];

afterEach(async () => {
  for (const gate of gates.splice(0)) gate.open();
  await closeTaskHarnesses();
});

interface Setup extends TaskHarness {
  gate: Gate;
}

function config(description = "jobs") {
  return {
    mcpTasks: { enabled: true, poll_interval_seconds: 5 },
    mcpServers: {
      local: {
        type: "stdio",
        description,
        ...stdioFixture({ name: "local", toolNames: ["pid"], tasks: true }),
        task_toolsets: [{ name: "compile", ...JOB_TOOLSET }],
      },
    },
  };
}

async function setup(maxStdioSessions?: number): Promise<Setup> {
  const dir = await makeTempDir("task-submit-hold-");
  const configPath = await writeConfig(dir, config());
  const gate = new Gate();
  gates.push(gate);
  const harness = await startTaskHarness(dir, configPath, { interceptors: [gate.interceptor], ...(maxStdioSessions ? { maxStdioSessions } : {}) });
  return { ...harness, gate };
}

/** bob's turn on th-a (its child's pid, then a submit held by the gate once answered), and that turn's outcome. */
async function gatedSubmit(s: Setup, args: Record<string, unknown>): Promise<() => Promise<{ pid: number; taskId: string }>> {
  const answered = s.gate.arm();
  const turn = agentTurn(s.tools, "bob", "th-a", [pidCall("pid-1"), submitCall(args)]);
  await answered;
  return async () => {
    const [pid, submitted] = await turn;
    expect(submitted!.status).not.toBe("error");
    return { pid: Number(pid!.content), taskId: (JSON.parse(String(submitted!.content)) as SubmittedTask).task_id };
  };
}

/** The task completes in `holder` over two polls, and its outcome is delivered. */
async function expectCompletedIn(s: Setup, taskId: string, holder: number): Promise<void> {
  await s.runtime.runOnce(s.clock.advance(5));
  await s.runtime.runOnce(s.clock.advance(5));
  const row = await s.runtime.service.getTask(taskId, "bob");
  expect([row?.status, row?.error]).toEqual(["completed", null]);
  expect(row?.result).toMatchObject({ label: "h", pid: holder, step: 2 });
  expect(s.notifier.deliveriesOf(taskId)[0]!.delivery.event).toMatchObject({ status: "completed", result: { pid: holder } });
  expect(s.logger.messages("warn")).toEqual([]);
}

describe("a submit holds its stdio child until its task is held", () => {
  test("a hot reload after the child answered the submit, before the hold is recorded: the next generation adopts the child, the task completes there", async () => {
    const s = await setup();
    const outcome = await gatedSubmit(s, { label: "h", steps: 2 });
    // The submit's call is over (the child is idle), its task not yet held: the reload retires the pool now.
    await writeConfig(s.dir, config("jobs, edited"));
    const tools = await s.toolkit.getTools();
    s.gate.open();
    const { pid: holder, taskId } = await outcome();
    await expectCompletedIn(s, taskId, holder);
    // The new generation's pool owns it: the scope's next call runs there, and close() ends it.
    expect(Number((await agentTurn(tools, "bob", "th-a", [pidCall("pid-again")]))[0]!.content)).toBe(holder);
    await s.toolkit.close();
    expect(alive(holder)).toBe(false);
  });

  test("bound 1: a new scope's child after the child answered the submit, before the hold is recorded: that new child goes, the task completes in its own", async () => {
    const s = await setup(1);
    const outcome = await gatedSubmit(s, { label: "h", steps: 2 });
    const [other] = await agentTurn(s.tools, "cy", "th-b", [pidCall("pid-b")]);
    expect(other!.status).not.toBe("error");
    const second = Number(other!.content);
    s.gate.open();
    const { pid: holder, taskId } = await outcome();
    expect(second).not.toBe(holder);
    await expectCompletedIn(s, taskId, holder);
    // The bound is kept: one of the two children went once the new scope's call was over, not the task's.
    expect(await waitUntil(() => !alive(second) || !alive(holder))).toBe(true);
    expect([alive(holder), alive(second)]).toEqual([true, false]);
  });
});

describe("a submit with no task lets go of its stdio child", () => {
  test("tools reset (its pool retired, no new generation yet) after the child answered a failed submit: the child, kept only for it, closes", async () => {
    const s = await setup();
    const [first] = await agentTurn(s.tools, "bob", "th-a", [pidCall("pid-1")]);
    const child = Number(first!.content);
    const answered = s.gate.arm();
    const turn = agentTurn(s.tools, "bob", "th-a", [submitCall({ label: "x", submit_error: true })]);
    await answered;
    await s.toolkit.reset();
    s.gate.open();
    const [failed] = await turn;
    expect(failed!.status).toBe("error");
    expect(await waitUntil(() => !alive(child))).toBe(true);
  });

  test("a session the submit's call started after its answer came (an interceptor answered first): not held, a reset closes it", async () => {
    const s = await setup();
    s.gate.answersFirst = true;
    // The scope's first call: the child starts after the interceptor answered.
    const [failed] = await agentTurn(s.tools, "bob", "th-a", [submitCall({ label: "y" })]);
    expect(failed!.status).toBe("error");
    await s.gate.attempt;
    const [pid] = await agentTurn(s.tools, "bob", "th-a", [pidCall("pid-1")]);
    const child = Number(pid!.content);
    await s.toolkit.reset();
    expect(await waitUntil(() => !alive(child))).toBe(true);
  });

  test("a submit whose call failed after the child answered it (an interceptor threw): not held, a reset closes the child", async () => {
    const s = await setup();
    s.gate.failsAfterAnswer = true;
    const [pid, failed] = await agentTurn(s.tools, "bob", "th-a", [pidCall("pid-1"), submitCall({ label: "z" })]);
    expect(failed!.status).toBe("error");
    const child = Number(pid!.content);
    await s.toolkit.reset();
    expect(await waitUntil(() => !alive(child))).toBe(true);
  });
});

describe("a submit whose task the service refuses after the child accepted it lets go of the child", () => {
  test("a remote id too long to store whose untracked cancel fails: nothing polls the job, a reset closes the child", async () => {
    const s = await setup();
    const [pid, refused] = await agentTurn(s.tools, "bob", "th-a", [
      pidCall("pid-1"),
      submitCall({ label: "long", remote_id: `job-${"x".repeat(300)}`, cancel_failures: 1 }),
    ]);
    expect(refused!.status).toBe("error");
    expect(String(refused!.content)).toMatch(/must not exceed 255 characters/);
    expect(s.logger.messages("warn")).toEqual([expect.stringMatching(/^Failed to cancel untracked MCP task .*cancel backend busy/)]);
    const child = Number(pid!.content);
    await s.toolkit.reset();
    expect(await waitUntil(() => !alive(child))).toBe(true);
  });

  test("a remote id another row already tracked to its end (an idempotent server): the job is that row's, a reset closes the child", async () => {
    const s = await setup();
    const [pid, first] = await agentTurn(s.tools, "bob", "th-a", [pidCall("pid-1"), submitCall({ label: "same", remote_id: "job-same" })]);
    const taskId = (JSON.parse(String(first!.content)) as SubmittedTask).task_id;
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(taskId, "bob"))?.status).toBe("completed");
    const [again] = await agentTurn(s.tools, "bob", "th-a", [submitCall({ label: "same", remote_id: "job-same" })]);
    expect([again!.status, String(again!.content)]).toEqual(["error", expect.stringMatching(/already tracked/)]);
    const child = Number(pid!.content);
    await s.toolkit.reset();
    expect(await waitUntil(() => !alive(child))).toBe(true);
  });

  test("a remote id another pending row tracks: the child still holds that row's task, a reload keeps it and the task completes there", async () => {
    const s = await setup();
    const [pid, first] = await agentTurn(s.tools, "bob", "th-a", [pidCall("pid-1"), submitCall({ label: "h", steps: 2, remote_id: "job-same" })]);
    const taskId = (JSON.parse(String(first!.content)) as SubmittedTask).task_id;
    const [again] = await agentTurn(s.tools, "bob", "th-a", [submitCall({ label: "h", steps: 2, remote_id: "job-same" })]);
    expect(again!.status).toBe("error");
    await writeConfig(s.dir, config("jobs, edited"));
    await s.toolkit.getTools();
    await expectCompletedIn(s, taskId, Number(pid!.content));
  });
});
