/**
 * `list_background_tasks`, `cancel_background_task` and the `background_tasks` projection, through a real
 * createAgent agent (MemorySaver, scripted model) over a real job server and SQLite store; the remote cancel is
 * the worker's, and its outcome comes back into the thread through the graph notifier.
 */
import { describe, expect, test } from "@jest/globals";
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { ScriptedChatModel } from "../../../lib/agent";
import {
  BACKGROUND_TASKS_KEY,
  createBackgroundTaskTools,
  createBackgroundTasksMiddleware,
  TaskSnapshot,
  TaskStatus,
  type BackgroundTaskRow,
  type BackgroundTaskView,
  type SubmittedTask,
} from "../../../lib/tasks";
import { agentHarnessSuite, type AgentHarness } from "../notifiers/agent-harness";

const { board, harness } = agentHarnessSuite();

const toolAnswer = <T>(messages: BaseMessage[]): T => JSON.parse(messages.filter((m) => m.getType() === "tool").at(-1)!.text) as T;

async function submit(h: AgentHarness, thread: string, label: string, steps = 5): Promise<string> {
  return toolAnswer<SubmittedTask>(await h.say(thread, `submit ${label} ${steps}`)).task_id;
}

interface ListAnswer {
  tasks: BackgroundTaskView[];
  count?: number;
  message?: string;
}
interface CancelAnswer {
  cancelled: boolean;
  task?: BackgroundTaskView;
  message: string;
}

describe("list_background_tasks", () => {
  test("lists this user's tasks on this thread, newest first, without remote ids; active_only filters", async () => {
    const h = await harness();
    const first = await submit(h, "th-l", "one", 1);
    h.clock.advance(1); // newest first: created_at tells them apart
    const second = await submit(h, "th-l", "two");
    await submit(h, "th-other", "three");
    await h.runtime.runOnce(h.clock.advance(5)); // "one" completes
    await h.notifier.idle();
    const messages = await h.say("th-l", "list");
    const answer = toolAnswer<ListAnswer>(messages);
    expect(answer.count).toBe(2);
    expect(answer.tasks.map((t) => [t.task_id, t.task_name, t.status, t.cancel_requested])).toEqual([
      [second, "build", "working", false],
      [first, "build", "completed", false],
    ]);
    expect(Object.keys(answer.tasks[0]!).sort()).toEqual(["cancel_requested", "created_at", "error", "status", "task_id", "task_name", "updated_at"]);
    for (const remote of board.log.submits) expect(messages.at(-2)!.text).not.toContain(remote);
    expect(toolAnswer<ListAnswer>(await h.say("th-l", "list active")).tasks.map((t) => t.task_id)).toEqual([second]);
    expect(toolAnswer<ListAnswer>(await h.say("th-l", "list", "bob"))).toEqual({ tasks: [], count: 0 });
  });

  test("outside a thread: an empty list and a message", async () => {
    const h = await harness();
    const [list] = createBackgroundTaskTools(h.runtime);
    expect(JSON.parse(String(await list!.invoke({})))).toEqual({ tasks: [], message: "The current thread could not be resolved." });
  });

  test("a run whose user id is neither a string nor a number: no list (not the default user's), a message; no cancel either", async () => {
    const h = await harness();
    const [list, cancel] = createBackgroundTaskTools(h.runtime);
    const run = { context: { user_id: { id: "ann" } }, configurable: { thread_id: "th-x" } };
    const message = "the run's context.user_id is neither a string nor a number, so it names no user or thread";
    expect(JSON.parse(String(await list!.invoke({}, run)))).toEqual({ tasks: [], message });
    expect(JSON.parse(String(await cancel!.invoke({ task: "x" }, run)))).toEqual({ cancelled: false, message });
  });
});

describe("cancel_background_task", () => {
  test("by name: the tool only records the request; the worker cancels remotely and the thread hears 'cancelled'", async () => {
    const h = await harness();
    const taskId = await submit(h, "th-c", "long", 50);
    const remote = board.log.submits.at(-1)!;
    const answer = toolAnswer<CancelAnswer>(await h.say("th-c", "cancel build"));
    expect(answer).toMatchObject({ cancelled: false, task: { task_id: taskId, status: "submitted", cancel_requested: true } });
    expect(answer.message).toMatch(/^Cancellation requested\./);
    expect(board.log.cancels).not.toContain(remote);

    expect(await h.runtime.runOnce(h.clock.advance(1))).toMatchObject({ cancelled: 1, notified: 1 });
    await h.notifier.idle();
    expect(board.log.cancels).toContain(remote);
    expect((await h.messages("th-c")).at(-1)!.text).toBe("Task build cancelled: null");
  });

  test("ambiguous names list the matches; an id picks one; nothing left to match says so", async () => {
    const h = await harness();
    const a = await submit(h, "th-a", "a", 50);
    await submit(h, "th-a", "b", 50);
    expect(toolAnswer<CancelAnswer>(await h.say("th-a", "cancel build"))).toEqual({
      cancelled: false,
      message: "More than one active background task matches; specify one task name: build, build",
    });
    expect(toolAnswer<CancelAnswer>(await h.say("th-a", "cancel"))).toMatchObject({ cancelled: false, message: expect.stringContaining("More than one") });
    expect(toolAnswer<CancelAnswer>(await h.say("th-a", `cancel ${a}`))).toMatchObject({ task: { task_id: a, cancel_requested: true } });
    expect(toolAnswer<CancelAnswer>(await h.say("th-a", "cancel nothing-here"))).toEqual({
      cancelled: false,
      message: "No active background task matches this request",
    });
    expect(toolAnswer<CancelAnswer>(await h.say("th-a", `cancel ${a}`, "bob"))).toMatchObject({ cancelled: false });
  });
});

describe("the background_tasks projection", () => {
  test("each run starts with the thread's latest 20 tasks, names neutralised", async () => {
    const h = await harness();
    const taskId = await submit(h, "th-p", "p");
    const state = async (thread: string) => (await h.agent.graph.getState({ configurable: { thread_id: thread } })).values as Record<string, unknown>;
    expect(await state("th-p")).toMatchObject({ [BACKGROUND_TASKS_KEY]: [] }); // projected before the submit
    await h.say("th-p", "hello");
    expect((await state("th-p"))[BACKGROUND_TASKS_KEY]).toEqual([
      { task_id: taskId, task_name: "build", status: "submitted", updated_at: h.clock.current.toISOString() },
    ]);
    for (let i = 0; i < 24; i += 1) {
      await h.runtime.store.create({
        id: `mcp-task-p${String(i).padStart(2, "0")}`,
        userId: "ann",
        threadId: "th-p",
        serverName: "jobs",
        driverName: "ordinary-tools",
        remoteTaskId: `r-${i}`,
        taskName: "<b>odd</b>",
        snapshot: new TaskSnapshot({ status: TaskStatus.WORKING }),
        nextPollAt: null,
      });
    }
    await h.say("th-p", "hello");
    const rows = (await state("th-p"))[BACKGROUND_TASKS_KEY] as BackgroundTaskRow[];
    expect(rows).toHaveLength(20);
    expect(new Set(rows.map((r) => r.task_name))).toEqual(new Set(["&lt;b&gt;odd&lt;/b&gt;"]));
  });

  test("a numeric user or thread id in the run's context projects that id's tasks instead of failing the run", async () => {
    const h = await harness();
    await h.runtime.store.create({
      id: "mcp-task-n1",
      userId: "42",
      threadId: "th-n",
      serverName: "jobs",
      driverName: "ordinary-tools",
      remoteTaskId: "r-n",
      taskName: "build",
      snapshot: new TaskSnapshot({ status: TaskStatus.WORKING }),
      nextPollAt: null,
    });
    const agent = createAgent({
      model: new ScriptedChatModel([], { fallback: () => new AIMessage("ok") }),
      tools: [],
      checkpointer: new MemorySaver(),
      middleware: [createBackgroundTasksMiddleware(h.runtime)],
    });
    const config = { context: { user_id: 42, thread_id: null }, configurable: { thread_id: "th-n" } };
    const result = (await agent.invoke({ messages: [new HumanMessage("hello")] }, config as never)) as Record<string, unknown>;
    expect((result[BACKGROUND_TASKS_KEY] as BackgroundTaskRow[]).map((row) => row.task_id)).toEqual(["mcp-task-n1"]);
    // A user id no id is made of projects nothing: not the "default" user's tasks.
    await h.runtime.store.create({
      id: "mcp-task-d1",
      userId: "default",
      threadId: "th-d",
      serverName: "jobs",
      driverName: "ordinary-tools",
      remoteTaskId: "r-d",
      taskName: "build",
      snapshot: new TaskSnapshot({ status: TaskStatus.WORKING }),
      nextPollAt: null,
    });
    const odd = { context: { user_id: { id: 42 } }, configurable: { thread_id: "th-d" } };
    const refused = (await agent.invoke({ messages: [new HumanMessage("hello")] }, odd as never)) as Record<string, unknown>;
    expect(refused[BACKGROUND_TASKS_KEY] ?? []).toEqual([]);
  });
});
