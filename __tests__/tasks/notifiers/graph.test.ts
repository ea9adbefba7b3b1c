/**
 * The in-process graph notifier end to end: a createAgent agent (MemorySaver, scripted model) submits a job to a
 * real MCP job server, `runOnce` ticks on an injected clock carry it to completion, and the notification lands as
 * one run in the same thread, which the model answers.
 */
import { describe, expect, test } from "@jest/globals";
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { END, interrupt, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { BusyThreadError, notificationIdempotencyKey, notificationMarkerOf, ThreadGoneError, type SubmittedTask, type TaskDelivery } from "../../../lib/tasks";
import * as path from "node:path";
import { silentLogger } from "../../../lib";
import { createGraphNotifier, createTaskRuntime } from "../../../lib/tasks";
import { waitUntil } from "../../fixtures/processes";
import { agentHarnessSuite, type AgentHarness } from "./agent-harness";
import { taskDelivery } from "../deliveries";

const { board, harness } = agentHarnessSuite();

const notifications = (messages: BaseMessage[]) => messages.filter((m) => notificationMarkerOf(m) !== undefined);

async function submit(h: AgentHarness, thread: string, label: string, steps = 1): Promise<string> {
  const messages = await h.say(thread, `submit ${label} ${steps}`);
  const tool = messages.find((m) => m.getType() === "tool")!;
  return (JSON.parse(tool.text) as SubmittedTask).task_id;
}

/** One tick, then the notification runs it started. */
async function tick(h: AgentHarness, seconds = 5) {
  const report = await h.runtime.runOnce(h.clock.advance(seconds));
  await h.notifier.idle();
  return report;
}

describe("delivery into the agent's thread", () => {
  test("a completed task lands as one hidden notification run; the model reports it; more ticks deliver nothing", async () => {
    const h = await harness();
    const taskId = await submit(h, "th-1", "alpha");
    const remoteId = board.log.submits.at(-1)!;
    const before = (await h.messages("th-1")).length;

    expect(await tick(h)).toMatchObject({ claimed: 1, applied: 1, notified: 1 });
    const messages = await h.messages("th-1");
    expect(messages).toHaveLength(before + 2);
    const [note] = notifications(messages);
    expect(note!.additional_kwargs).toMatchObject({
      hide_from_ui: true,
      mcp_task_notification: { task_id: taskId, dispatch_version: 1, dispatch_attempt: 0, idempotency_key: notificationIdempotencyKey(taskId, 1, 0), user_id: "ann" },
    });
    expect(note!.text).not.toContain(remoteId);
    expect(messages.at(-1)!.text).toBe(`Task build completed: {"cwd":${JSON.stringify(process.cwd())},"label":"alpha","pid":${process.pid},"step":1}`);
    // The model saw the notification as the newest input, in a run for the owner with nobody to answer.
    expect(h.model.calls.at(-1)!.at(-1)!.id).toBe(note!.id);
    expect(h.contexts.at(-1)).toEqual({ user_id: "ann", non_interactive: true });

    expect(await tick(h)).toMatchObject({ delivered: 1 });
    expect((await h.runtime.service.getTask(taskId, "ann"))?.notification_status).toBe("delivered");
    for (let i = 0; i < 3; i += 1) expect(await tick(h, 60)).toMatchObject({ notified: 0, claimed: 0 });
    expect(notifications(await h.messages("th-1"))).toHaveLength(1);
    expect(await h.messages("th-1")).toHaveLength(before + 2);
  });

  test("a thread deleted before delivery: the notification is dead-lettered at once", async () => {
    const h = await harness();
    const taskId = await submit(h, "th-gone", "beta");
    await h.checkpointer.deleteThread("th-gone");
    expect(await tick(h)).toMatchObject({ applied: 1, notified: 0, deadLettered: 1 });
    const row = await h.runtime.service.getTask(taskId, "ann");
    expect(row).toMatchObject({ notification_status: "dead_letter", notification_error: "Thread 'th-gone' has no checkpoint" });
    expect(await h.messages("th-gone")).toEqual([]);
  });

  test("a thread with a run in flight is busy: retried without counting a failure, delivered once the run is over", async () => {
    const h = await harness();
    const taskId = await submit(h, "th-busy", "gamma");
    const running = h.say("th-busy", "wait");
    await h.gate.started;
    // The model step's checkpoint names the tools node still to run.
    let next: readonly string[] = [];
    const poll = async () => (next = (await h.agent.graph.getState({ configurable: { thread_id: "th-busy" } })).next);
    await poll();
    expect(await waitUntil(() => (void poll(), next.length > 0))).toBe(true);
    expect(await tick(h)).toMatchObject({ applied: 1, notified: 0, notificationRetried: 1 });
    const row = await h.runtime.service.getTask(taskId, "ann");
    expect(row).toMatchObject({ notification_status: "pending", notification_attempt_count: 0 });
    h.gate.open();
    await running;
    expect(await tick(h)).toMatchObject({ notified: 1 });
    expect(await tick(h)).toMatchObject({ delivered: 1 });
    const messages = await h.messages("th-busy");
    expect(notifications(messages)).toHaveLength(1);
    expect(messages.at(-1)!.text).toMatch(/^Task build completed: \{.*"label":"gamma"/);
  });
});

describe("a restart between launch and confirmation", () => {
  test("a new runtime and notifier find the launched run's message on the thread: delivered, nothing sent twice", async () => {
    const h = await harness();
    const taskId = await submit(h, "th-r", "delta");
    expect(await tick(h)).toMatchObject({ notified: 1 });
    await h.runtime.stop();
    const worker = await createTaskRuntime({
      configPath: path.join(h.dir, "extensions_config.json"),
      databaseUrl: `sqlite:${path.join(h.dir, "tasks.sqlite")}`,
      notifier: createGraphNotifier({ graph: h.agent }),
      clock: h.clock.now,
      logger: silentLogger,
      toolkitOptions: { dataDir: h.dir },
    });
    try {
      expect(await worker.runOnce(h.clock.advance(5))).toMatchObject({ delivered: 1, notificationRetried: 0 });
      expect((await worker.service.getTask(taskId, "ann"))?.notification_status).toBe("delivered");
      expect(notifications(await h.messages("th-r"))).toHaveLength(1);
    } finally {
      await worker.stop();
    }
  });

  test("after a restart, an agent graph not built yet defers the launched run's lookup: once built, delivered once", async () => {
    const h = await harness();
    const taskId = await submit(h, "th-late", "epsilon");
    expect(await tick(h)).toMatchObject({ notified: 1 });
    await h.runtime.stop();
    let built = false;
    const worker = await createTaskRuntime({
      configPath: path.join(h.dir, "extensions_config.json"),
      databaseUrl: `sqlite:${path.join(h.dir, "tasks.sqlite")}`,
      notifier: createGraphNotifier({ graph: () => (built ? h.agent : undefined) }),
      clock: h.clock.now,
      logger: silentLogger,
      toolkitOptions: { dataDir: h.dir },
    });
    try {
      expect(await worker.runOnce(h.clock.advance(5))).toMatchObject({ deferred: 1, delivered: 0, notificationRetried: 0 });
      built = true;
      expect(await worker.runOnce(h.clock.advance(60))).toMatchObject({ delivered: 1, notified: 0 });
      expect((await worker.service.getTask(taskId, "ann"))?.notification_status).toBe("delivered");
      expect(notifications(await h.messages("th-late"))).toHaveLength(1);
    } finally {
      await worker.stop();
    }
  });
});

describe("the notifier on its own, over the same real agent", () => {
  function delivery(thread: string, taskId = "mcp-task-x"): TaskDelivery {
    return taskDelivery({ taskId, threadId: thread });
  }

  test("the same key twice starts one run; after a restart the key on the thread makes it a no-op and a success", async () => {
    const h = await harness();
    await h.say("th-k", "hello");
    const key = notificationIdempotencyKey("mcp-task-x", 1, 0);
    const first = await h.notifier.deliver(delivery("th-k"), key);
    expect(await h.notifier.deliver(delivery("th-k"), key)).toEqual(first);
    await h.notifier.idle();
    expect(await h.notifier.getRun(first.runId, "ann")).toEqual({ status: "success" });
    expect(await h.notifier.getRun(first.runId, "bob")).toBeNull();
    const count = (await h.messages("th-k")).length;

    const restarted = createGraphNotifier({ graph: h.agent });
    const again = await restarted.deliver(delivery("th-k"), key);
    await restarted.idle();
    expect(again.runId).not.toBe(first.runId);
    expect(await h.messages("th-k")).toHaveLength(count);
    // A run started before the restart is found by its key on the thread.
    const fresh = createGraphNotifier({ graph: h.agent });
    expect(await fresh.getRun(first.runId, "ann", { threadId: "th-k", idempotencyKey: key })).toEqual({ status: "success" });
    expect(await fresh.getRun(first.runId, "bob", { threadId: "th-k", idempotencyKey: key })).toBeNull();
    expect(await fresh.getRun(first.runId, "ann", { threadId: "th-k", idempotencyKey: `${key}0` })).toBeNull();
    expect(await fresh.getRun(first.runId, "ann")).toBeNull();
  });

  test("two deliveries to one thread at once: one starts, the other is busy; a thread never seen is gone", async () => {
    const h = await harness();
    await h.say("th-2", "hello");
    const results = await Promise.allSettled([
      h.notifier.deliver(delivery("th-2", "mcp-task-a"), notificationIdempotencyKey("mcp-task-a", 1, 0)),
      h.notifier.deliver(delivery("th-2", "mcp-task-b"), notificationIdempotencyKey("mcp-task-b", 1, 0)),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(results.find((r) => r.status === "rejected")).toMatchObject({ reason: expect.any(BusyThreadError) });
    await h.notifier.idle();
    await expect(h.notifier.deliver(delivery("never"), "k-never")).rejects.toBeInstanceOf(ThreadGoneError);
  });

  test("a run that fails reports its error kind only; a graph not built yet is busy", async () => {
    const h = await harness();
    await h.say("th-f", "hello");
    const failing = createGraphNotifier({
      graph: {
        getState: (config) => h.agent.graph.getState(config),
        invoke: async () => {
          throw new TypeError("provider said: sk-secret-value");
        },
      },
    });
    const { runId } = await failing.deliver(delivery("th-f"), "k-f");
    await failing.idle();
    expect(await failing.getRun(runId, "ann")).toEqual({ status: "error", error: "Notification run failed (TypeError)" });
    const unbuilt = createGraphNotifier({ graph: () => undefined });
    await expect(unbuilt.deliver(delivery("th-f"), "k-u")).rejects.toBeInstanceOf(BusyThreadError);
  });

  test("each run gets a signal of its own (LangGraph never removes its listener), and close() still aborts a run in flight", async () => {
    const h = await harness();
    const signals: AbortSignal[] = [];
    const recording = createGraphNotifier({
      graph: {
        getState: (config) => h.agent.graph.getState(config),
        invoke: (input, config) => {
          signals.push(config.signal!);
          return h.agent.invoke(input as never, config as never);
        },
      },
    });
    for (const thread of ["th-s1", "th-s2", "th-s3"]) {
      await h.say(thread, "hello");
      await recording.deliver(delivery(thread), `k-${thread}`);
    }
    await recording.idle();
    expect(new Set(signals).size).toBe(3);

    await h.say("th-hang", "hello");
    const hanging = createGraphNotifier({
      graph: {
        getState: (config) => h.agent.graph.getState(config),
        invoke: (_input, config) =>
          new Promise((_resolve, reject) => config.signal!.addEventListener("abort", () => reject(config.signal!.reason), { once: true })),
      },
    });
    const { runId } = await hanging.deliver(delivery("th-hang"), "k-hang");
    await hanging.close();
    expect(await hanging.getRun(runId, "ann")).toEqual({ status: "error", error: "Notification run failed (Error)" });
  });
});

describe("threads whose last run failed or did not finish, on a hand-written graph", () => {
  /**
   * A one-node graph with a checkpointer whose node fails while `failures` is above 0, or waits while `held` is set;
   * `entered` is called as the node starts.
   */
  function replyGraph() {
    const control = { failures: 0, held: undefined as Promise<void> | undefined, entered: () => undefined as void };
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("reply", async () => {
        control.entered();
        if (control.held) await control.held;
        if (control.failures > 0) {
          control.failures -= 1;
          throw new Error("the provider answered 500");
        }
        return { messages: [new AIMessage("noted")] };
      })
      .addEdge(START, "reply")
      .addEdge("reply", END)
      .compile({ checkpointer: new MemorySaver() });
    return { graph, control };
  }
  const delivery = (thread: string) => taskDelivery({ taskId: "mcp-task-f", threadId: thread });

  /** A thread with one user run, then a notification run under `key` held inside its node until `release()`. */
  async function heldDelivery(thread: string, key: string) {
    const { graph, control } = replyGraph();
    const first = createGraphNotifier({ graph });
    await graph.invoke({ messages: [new HumanMessage("hello")] }, { configurable: { thread_id: thread } });
    let release!: () => void;
    control.held = new Promise<void>((resolve) => (release = resolve));
    const entered = new Promise<void>((resolve) => (control.entered = resolve));
    const { runId } = await first.deliver(delivery(thread), key);
    await entered;
    return { graph, control, first, runId, release };
  }

  test("a thread whose last run failed is not busy: the next delivery runs on it and the thread completes", async () => {
    const { graph, control } = replyGraph();
    const notifier = createGraphNotifier({ graph });
    await graph.invoke({ messages: [new HumanMessage("hello")] }, { configurable: { thread_id: "th-fail" } });
    control.failures = 1;
    const failed = await notifier.deliver(delivery("th-fail"), "k-1");
    await notifier.idle();
    expect(await notifier.getRun(failed.runId, "ann")).toMatchObject({ status: "error" });
    expect((await graph.getState({ configurable: { thread_id: "th-fail" } })).next).toEqual(["reply"]);
    // After a restart the key on the thread tells the same: that run failed.
    const restarted = createGraphNotifier({ graph });
    expect(await restarted.getRun(failed.runId, "ann", { threadId: "th-fail", idempotencyKey: "k-1" })).toMatchObject({ status: "error" });

    const retried = await notifier.deliver(delivery("th-fail"), "k-2");
    await notifier.idle();
    expect(await notifier.getRun(retried.runId, "ann")).toEqual({ status: "success" });
    const state = await graph.getState({ configurable: { thread_id: "th-fail" } });
    expect(state.next).toEqual([]);
    expect(await restarted.getRun(retried.runId, "ann", { threadId: "th-fail", idempotencyKey: "k-2" })).toEqual({ status: "success" });
    // The thread completed, but not in the run that took k-1 in: that one still failed.
    expect(await createGraphNotifier({ graph }).getRun(failed.runId, "ann", { threadId: "th-fail", idempotencyKey: "k-1" })).toMatchObject({ status: "error" });
  });

  test("after a restart, a run that took the event in and finished is delivered, though a later run on the thread failed", async () => {
    const { graph, control } = replyGraph();
    const first = createGraphNotifier({ graph });
    await graph.invoke({ messages: [new HumanMessage("hello")] }, { configurable: { thread_id: "th-later" } });
    const { runId } = await first.deliver(delivery("th-later"), "k-later");
    await first.idle();
    expect(await first.getRun(runId, "ann")).toEqual({ status: "success" });
    // The user's next run on the thread fails: the thread's latest checkpoint is a failed one.
    control.failures = 1;
    await expect(graph.invoke({ messages: [new HumanMessage("next")] }, { configurable: { thread_id: "th-later" } })).rejects.toThrow("500");
    const restarted = createGraphNotifier({ graph });
    expect(await restarted.getRun(runId, "ann", { threadId: "th-later", idempotencyKey: "k-later" })).toEqual({ status: "success" });
    const again = await restarted.deliver(delivery("th-later"), "k-later");
    expect(await restarted.getRun(again.runId, "ann")).toEqual({ status: "success" });
    await restarted.idle();
    expect(notifications((await graph.getState({ configurable: { thread_id: "th-later" } })).values.messages)).toHaveLength(1);
  });

  test("after a restart, a run that took the event in but has not finished is running, not delivered", async () => {
    const { graph, control, first, runId, release } = await heldDelivery("th-open", "k-open");
    const restarted = createGraphNotifier({ graph });
    expect(await restarted.getRun(runId, "ann", { threadId: "th-open", idempotencyKey: "k-open" })).toEqual({ status: "running" });
    // Delivered again under the same key (the row still said claimed): not a second run, and not delivered yet.
    await expect(restarted.deliver(delivery("th-open"), "k-open")).rejects.toBeInstanceOf(BusyThreadError);
    control.held = undefined;
    release();
    await first.idle();
    expect(await restarted.getRun(runId, "ann", { threadId: "th-open", idempotencyKey: "k-open" })).toEqual({ status: "success" });
    const again = await restarted.deliver(delivery("th-open"), "k-open");
    expect(await restarted.getRun(again.runId, "ann")).toEqual({ status: "success" });
  });

  test("after a restart, a run killed with its process (no progress past staleRunSeconds) failed: the retry runs on the thread", async () => {
    // The run that takes the event in stops inside its node and never goes on: what a SIGKILL leaves on the thread.
    const { graph, control, first, runId, release } = await heldDelivery("th-dead", "k-dead");
    let now = Date.now();
    // Without staleRunSeconds (the default) such a thread stays busy however old.
    const unset = createGraphNotifier({ graph, now: () => now + 3_600_000 });
    expect(await unset.getRun(runId, "ann", { threadId: "th-dead", idempotencyKey: "k-dead" })).toEqual({ status: "running" });
    await expect(unset.deliver(delivery("th-dead"), "k-next")).rejects.toBeInstanceOf(BusyThreadError);
    const restarted = createGraphNotifier({ graph, staleRunSeconds: 600, now: () => now });
    // Within the bound it may still be running (a slow model call): waited for.
    expect(await restarted.getRun(runId, "ann", { threadId: "th-dead", idempotencyKey: "k-dead" })).toEqual({ status: "running" });
    await expect(restarted.deliver(delivery("th-dead"), "k-next")).rejects.toBeInstanceOf(BusyThreadError);
    now += 601_000;
    expect(await restarted.getRun(runId, "ann", { threadId: "th-dead", idempotencyKey: "k-dead" })).toMatchObject({
      status: "error",
      error: expect.stringContaining("stopped before its end"),
    });
    // The service's retry (a new attempt key) is not held up by the dead run: it runs on the thread and completes it.
    control.held = undefined;
    const retried = await restarted.deliver(delivery("th-dead"), "k-retry");
    await restarted.idle();
    expect(await restarted.getRun(retried.runId, "ann")).toEqual({ status: "success" });
    expect((await graph.getState({ configurable: { thread_id: "th-dead" } })).next).toEqual([]);
    release();
    await first.idle();
  });

  test("a thread waiting at an interrupt() is never taken for a dead run, however old", async () => {
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("ask", () => {
        interrupt("approve?");
        return { messages: [new AIMessage("approved")] };
      })
      .addEdge(START, "ask")
      .addEdge("ask", END)
      .compile({ checkpointer: new MemorySaver() });
    await graph.invoke({ messages: [new HumanMessage("hello")] }, { configurable: { thread_id: "th-ask" } });
    expect((await graph.getState({ configurable: { thread_id: "th-ask" } })).next).toEqual(["ask"]);
    const later = createGraphNotifier({ graph, staleRunSeconds: 600, now: () => Date.now() + 3_600_000 });
    await expect(later.deliver(delivery("th-ask"), "k-ask")).rejects.toBeInstanceOf(BusyThreadError);
  });

  test("nor a thread stopped at a static breakpoint of a graph compiled with one", async () => {
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("plan", () => ({ messages: [new AIMessage("plan")] }))
      .addNode("act", () => ({ messages: [new AIMessage("done")] }))
      .addEdge(START, "plan")
      .addEdge("plan", "act")
      .addEdge("act", END)
      .compile({ checkpointer: new MemorySaver(), interruptBefore: ["act"] });
    await graph.invoke({ messages: [new HumanMessage("hello")] }, { configurable: { thread_id: "th-break" } });
    expect((await graph.getState({ configurable: { thread_id: "th-break" } })).next).toEqual(["act"]);
    const later = createGraphNotifier({ graph, staleRunSeconds: 600, now: () => Date.now() + 3_600_000 });
    await expect(later.deliver(delivery("th-break"), "k-break")).rejects.toBeInstanceOf(BusyThreadError);
  });
});
