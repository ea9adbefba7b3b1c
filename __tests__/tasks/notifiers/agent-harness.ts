/**
 * A task runtime delivering into a real createAgent agent (MemorySaver) through the graph notifier, driven by a
 * scripted policy: "submit <label> [steps]" calls the job server's submit tool, "wait" calls a tool that blocks
 * until released, "list"/"cancel [task]" call the background task tools, and a notification is answered with a
 * one-line report of the framed event.
 */
import * as path from "node:path";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { tool, type DynamicStructuredTool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent, createMiddleware } from "langchain";
import { z } from "zod";
import { createMcpToolkit, silentLogger, type McpToolkit } from "../../../lib";
import { ScriptedChatModel, type ScriptPolicy } from "../../../lib/agent";
import {
  createBackgroundTaskTools,
  createBackgroundTasksMiddleware,
  createGraphNotifier,
  createTaskRuntime,
  notificationMarkerOf,
  UNTRUSTED_BEGIN,
  UNTRUSTED_END,
  type GraphNotifier,
  type TaskRuntime,
} from "../../../lib/tasks";
import { afterAll, afterEach, beforeAll } from "@jest/globals";
import { JOB_TOOLSET, makeTempDir, startHttpFixture, TaskBoard, writeConfig } from "../../fixtures";
import type { StreamableHttpFixture } from "../../fixtures/http-server";
import { ManualClock as Clock } from "../../fixtures/clock";

export { Clock };

export const RunContext = z.object({ user_id: z.string(), non_interactive: z.boolean().optional() });

/** A gate the `wait_here` tool blocks on. */
export class Gate {
  #open!: () => void;
  #started!: () => void;
  readonly opened = new Promise<void>((resolve) => (this.#open = resolve));
  readonly started = new Promise<void>((resolve) => (this.#started = resolve));
  open(): void {
    this.#open();
  }
  markStarted(): void {
    this.#started();
  }
}

function lastText(messages: BaseMessage[]): BaseMessage | undefined {
  return messages.at(-1);
}

/** The event a notification message frames. */
export function framedEvent(message: BaseMessage): Record<string, unknown> {
  const text = message.text;
  const start = text.indexOf(UNTRUSTED_BEGIN) + UNTRUSTED_BEGIN.length;
  return JSON.parse(text.slice(start, text.indexOf(UNTRUSTED_END)).trim()) as Record<string, unknown>;
}

export const reportPolicy: ScriptPolicy = (messages, _tools, ctx) => {
  const last = lastText(messages);
  const call = (name: string, args: Record<string, unknown>) =>
    new AIMessage({ content: "", tool_calls: [{ name, args, id: ctx.nextToolCallId(), type: "tool_call" }] });
  if (last && ToolMessage.isInstance(last)) return { content: `tool said: ${last.text}` };
  if (last && HumanMessage.isInstance(last)) {
    if (notificationMarkerOf(last)) {
      const event = framedEvent(last);
      return { content: `Task ${String(event.task_name)} ${String(event.status)}: ${JSON.stringify(event.result)}` };
    }
    const [verb, arg, extra] = last.text.split(" ");
    if (verb === "submit") return call("jobs_start_job", { label: arg, ...(extra ? { steps: Number(extra) } : {}) });
    if (verb === "wait") return call("wait_here", {});
    if (verb === "list") return call("list_background_tasks", arg === "active" ? { active_only: true } : {});
    if (verb === "cancel") return call("cancel_background_task", arg ? { task: arg } : {});
  }
  return { content: "ok" };
};

export interface AgentHarness {
  dir: string;
  runtime: TaskRuntime;
  toolkit: McpToolkit;
  notifier: GraphNotifier;
  checkpointer: MemorySaver;
  agent: ReturnType<typeof buildAgent>;
  model: ScriptedChatModel;
  clock: Clock;
  gate: Gate;
  /** The run context each agent run started with, in order. */
  contexts: Record<string, unknown>[];
  say(thread: string, text: string, user?: string): Promise<BaseMessage[]>;
  messages(thread: string): Promise<BaseMessage[]>;
  close(): Promise<void>;
}

function buildAgent(model: ScriptedChatModel, tools: DynamicStructuredTool[], runtime: TaskRuntime, checkpointer: MemorySaver, contexts: Record<string, unknown>[]) {
  const recorder = createMiddleware({
    name: "ContextRecorder",
    contextSchema: RunContext,
    beforeAgent: (_state, run) => {
      contexts.push({ ...(run.context as Record<string, unknown>) });
      return undefined;
    },
  });
  return createAgent({
    model,
    tools,
    contextSchema: RunContext,
    checkpointer,
    middleware: [createBackgroundTasksMiddleware(runtime), recorder],
  });
}

export async function startAgentHarness(jobsUrl: string, taskName = "build"): Promise<AgentHarness> {
  const dir = await makeTempDir("graph-notifier-");
  const configPath = await writeConfig(dir, {
    mcpTasks: { enabled: true, poll_interval_seconds: 5 },
    mcpServers: { jobs: { type: "http", url: jobsUrl, task_toolsets: [{ name: taskName, ...JOB_TOOLSET }] } },
  });
  const clock = new Clock();
  let agent: ReturnType<typeof buildAgent> | undefined;
  const notifier = createGraphNotifier({ graph: () => agent });
  const runtime = await createTaskRuntime({
    configPath,
    databaseUrl: `sqlite:${path.join(dir, "tasks.sqlite")}`,
    notifier,
    clock: clock.now,
    logger: silentLogger,
  });
  const toolkit = createMcpToolkit({ configPath, logger: silentLogger, dataDir: dir, taskRuntime: runtime });
  const gate = new Gate();
  const waitHere = tool(
    async () => {
      gate.markStarted();
      await gate.opened;
      return "released";
    },
    { name: "wait_here", description: "Blocks until released.", schema: z.object({}) },
  );
  const model = new ScriptedChatModel([], { fallback: reportPolicy });
  const checkpointer = new MemorySaver();
  const tools = [...(await toolkit.getTools()), ...createBackgroundTaskTools(runtime), waitHere];
  const contexts: Record<string, unknown>[] = [];
  agent = buildAgent(model, tools, runtime, checkpointer, contexts);
  const built = agent;
  const config = (thread: string, user: string) => ({ context: { user_id: user }, configurable: { thread_id: thread } });
  return {
    dir,
    runtime,
    toolkit,
    notifier,
    checkpointer,
    agent: built,
    model,
    clock,
    gate,
    contexts,
    say: async (thread, text, user = "ann") => (await built.invoke({ messages: [new HumanMessage(text)] }, config(thread, user))).messages,
    messages: async (thread) => ((await built.graph.getState({ configurable: { thread_id: thread } })).values as { messages?: BaseMessage[] }).messages ?? [],
    close: async () => {
      await notifier.close();
      await toolkit.close();
      await runtime.stop();
    },
  };
}

export interface AgentHarnessSuite {
  /** The job server's board, shared by every harness of the file. */
  readonly board: TaskBoard;
  /** A fresh harness on the file's job server, closed after the test. */
  harness(): Promise<AgentHarness>;
}

/** Registers the hooks of a suite of harness tests: one job server for the file, every harness closed after its test. */
export function agentHarnessSuite(): AgentHarnessSuite {
  const board = new TaskBoard();
  let http: StreamableHttpFixture | undefined;
  const open: AgentHarness[] = [];
  beforeAll(async () => {
    http = await startHttpFixture({ name: "jobs", toolNames: ["echo"], taskBoard: board });
  });
  afterEach(async () => {
    for (const h of open.splice(0)) await h.close();
  });
  afterAll(async () => {
    await http?.close();
  });
  return {
    board,
    async harness() {
      if (!http) throw new Error("the job server has not started");
      const h = await startAgentHarness(http.url);
      open.push(h);
      return h;
    },
  };
}
