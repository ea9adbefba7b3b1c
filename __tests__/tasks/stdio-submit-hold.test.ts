/**
 * A durable task's submit holds its stdio child from before the call is sent until the driver has recorded the task
 * (or knows there is none): a hot reload or the LRU bound landing after the child answered the submit but before the
 * hold is recorded keeps that child, and the task completes in it. The moment is made deterministic by an interceptor
 * awaiting a promise the test controls after `next()` returned. A real stdio job server keeping its jobs in the
 * process, a real SQLite file, a createAgent agent and the real worker tick on an injected clock. Also: what a submit
 * took is all it gives back (two submits answered with one id), a submit `runtime.stop()` settled lets go of its
 * child when its answer comes, and the hold goes to the child whose answer the interceptors returned.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { realpathSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import type { McpToolInterceptor } from "../../lib";
import { threadPaths } from "../../lib/sessions/workspace";
import { McpTaskServiceStoppedError, TaskSubmitRequest, type SubmittedTask } from "../../lib/tasks";
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
  /** Holds a task's cancel (`job_cancel`) once its server answered, when armed. */
  cancels: Gate;
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

async function setup(maxStdioSessions?: number, extra: McpToolInterceptor[] = []): Promise<Setup> {
  const dir = await makeTempDir("task-submit-hold-");
  const configPath = await writeConfig(dir, config());
  const gate = new Gate();
  const cancels = new Gate("job_cancel");
  gates.push(gate, cancels);
  const interceptors = [gate.interceptor, cancels.interceptor, ...extra];
  const harness = await startTaskHarness(dir, configPath, { interceptors, ...(maxStdioSessions ? { maxStdioSessions } : {}) });
  return { ...harness, gate, cancels };
}

/** bob's submit on th-a straight through the task service (no agent run): its child is the one of bob's turns there. */
function serviceSubmit(s: Setup, args: Record<string, unknown>, signal?: AbortSignal) {
  const request = new TaskSubmitRequest({ userId: "bob", threadId: "th-a", serverName: "local", taskName: "compile", arguments: args, driverData: { ...JOB_TOOLSET } });
  return s.runtime.service.submit("ordinary-tools", request, signal ? { signal } : {});
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

describe("two submits the child answered with the same remote id", () => {
  test("the first, refused (its caller aborted, its untracked cancel failed), lets go after the second's row was stored: the child still holds that row's task, a reload keeps it and the task completes there", async () => {
    const s = await setup();
    const [pid] = await agentTurn(s.tools, "bob", "th-a", [pidCall("pid-1")]);
    const holder = Number(pid!.content);
    const answered = s.gate.arm();
    const aborted = new AbortController();
    const first = serviceSubmit(s, { label: "h", steps: 2, remote_id: "job-same", cancel_failures: 1 }, aborted.signal);
    await answered;
    // The server answered: the caller's abort lets the answer come back, to be cancelled as untracked.
    aborted.abort(new Error("run cancelled"));
    const cancelAnswered = s.cancels.arm();
    s.gate.open();
    await cancelAnswered;
    // The first submit holds the id, its job still runs (the cancel failed); meanwhile the server answers a second
    // submit with that job (an idempotent server), whose row is stored.
    const second = await serviceSubmit(s, { label: "h", steps: 2, remote_id: "job-same" });
    s.cancels.open();
    await expect(first).rejects.toThrow("run cancelled");
    expect(s.logger.messages("warn")).toEqual([expect.stringMatching(/^Failed to cancel untracked MCP task .*cancel backend busy/)]);
    s.logger.lines.splice(0);
    await writeConfig(s.dir, config("jobs, edited"));
    await s.toolkit.getTools();
    await expectCompletedIn(s, second.id, holder);
  });
});

describe("runtime.stop() settling a submit whose answer is on its way", () => {
  test("the answer's task, which nobody stores, does not hold the child: a reset closes it", async () => {
    const s = await setup();
    const [pid] = await agentTurn(s.tools, "bob", "th-a", [pidCall("pid-1")]);
    const child = Number(pid!.content);
    const answered = s.gate.arm();
    const submit = serviceSubmit(s, { label: "h", steps: 2 });
    await answered;
    await s.runtime.stop();
    await expect(submit).rejects.toBeInstanceOf(McpTaskServiceStoppedError);
    // The child is held for the submit still running (its interceptor has the answer): the reset keeps it for now.
    await s.toolkit.reset();
    s.gate.open();
    expect(await waitUntil(() => !alive(child))).toBe(true);
  });
});

/**
 * Sends the next submit again once its server answered and that child (`crash`) died, until an attempt is answered
 * (by a new child), and returns the first answer: the one whose job the task is.
 */
class ResendAfterCrash {
  crash: number | undefined;

  readonly interceptor: McpToolInterceptor = async (request, next) => {
    const crashed = this.crash;
    if (request.toolName !== "start_job" || crashed === undefined) return next(request);
    this.crash = undefined;
    const first = await next(request);
    process.kill(crashed, "SIGKILL");
    expect(await waitUntil(() => !alive(crashed))).toBe(true);
    // The first resend may still meet the dead child's session: its failure drops it, the next starts a new child.
    for (let tries = 0; tries < 3; tries += 1) if ((await next(request).catch(() => undefined)) !== undefined) return first;
    throw new Error("no resend was answered");
  };
}

describe("an interceptor whose attempts went to different children", () => {
  test.each([
    ["an answer naming no path", (_dir: string): Record<string, unknown> => ({})],
    // The direct call returns the answer with that file's path translated: another object than the interceptor returned.
    [
      "an answer naming a file of the thread workspace",
      (dir: string) => {
        const log = path.join(threadPaths(realpathSync(dir), "th-a").workspace, "job.log");
        writeFileSync(log, "started\n");
        return { note: log };
      },
    ],
  ])("%s: the answer returned is the dead child's, the live child the resend went to holds nothing and a reset closes it", async (_name, extra) => {
    const resend = new ResendAfterCrash();
    const s = await setup(undefined, [resend.interceptor]);
    const [first] = await agentTurn(s.tools, "bob", "th-a", [pidCall("pid-1")]);
    const answering = Number(first!.content);
    resend.crash = answering;
    await serviceSubmit(s, { label: "h", steps: 2, ...extra(s.dir) });
    const [second] = await agentTurn(s.tools, "bob", "th-a", [pidCall("pid-2")]);
    const live = Number(second!.content);
    expect([alive(answering), live === answering]).toEqual([false, false]);
    await s.toolkit.reset();
    expect(await waitUntil(() => !alive(live))).toBe(true);
  });
});
