/**
 * Durable tasks as they meet sessions: what a task row stores when a process that did not take the submit polls it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import * as path from "node:path";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import sqlite3 from "sqlite3";
import { createMcpToolkit, silentLogger, type McpToolkit, type McpToolkitOptions } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { createTaskRuntime, MemoryTaskNotifier, type SubmittedTask, type TaskRuntime } from "../../lib/tasks";
import { makeTempDir, ManualClock, startHttpFixture, stdioFixture, TaskBoard, writeConfig } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";

const TOOLSET = { submit_tool: "start_job", status_tool: "job_status", cancel_tool: "job_cancel" };

let board: TaskBoard;
let http: StreamableHttpFixture;
const open: { runtime?: TaskRuntime; toolkit?: McpToolkit }[] = [];

beforeAll(async () => {
  board = new TaskBoard();
  http = await startHttpFixture({ name: "jobs", toolNames: ["echo"], taskBoard: board });
});

afterEach(async () => {
  for (const { runtime, toolkit } of open.splice(0)) {
    await toolkit?.close();
    await runtime?.stop();
  }
});

afterAll(async () => {
  await http.close();
});

interface Setup {
  dir: string;
  configPath: string;
  dbPath: string;
  runtime: TaskRuntime;
  toolkit: McpToolkit;
  tools: DynamicStructuredTool[];
  notifier: MemoryTaskNotifier;
  clock: ManualClock;
}

function baseConfig(extra: Record<string, unknown> = {}) {
  return {
    mcpTasks: { enabled: true, poll_interval_seconds: 5 },
    mcpServers: {
      local: {
        type: "stdio",
        ...stdioFixture({ name: "local", toolNames: ["pid"], tasks: true }),
        task_toolsets: [{ name: "compile", ...TOOLSET }],
      },
      ...extra,
    },
  };
}

async function setup(config: object = baseConfig(), toolkitOptions: Partial<McpToolkitOptions> = {}, dir?: string, clock = new ManualClock()): Promise<Setup> {
  dir ??= await makeTempDir("task-sessions-");
  const configPath = await writeConfig(dir, config);
  const dbPath = path.join(dir, "tasks.sqlite");
  const notifier = new MemoryTaskNotifier();
  const runtime = await createTaskRuntime({ configPath, databaseUrl: `sqlite:${dbPath}`, notifier, clock: clock.now, logger: silentLogger });
  const toolkit = createMcpToolkit({ configPath, logger: silentLogger, dataDir: dir, taskRuntime: runtime, ...toolkitOptions });
  open.push({ runtime, toolkit });
  return { dir, configPath, dbPath, runtime, toolkit, tools: await toolkit.getTools(), notifier, clock };
}

function toolMessages(messages: BaseMessage[]): ToolMessage[] {
  return messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
}

async function agentCalls(s: Setup, calls: ReturnType<typeof ScriptedChatModel.toolCall>[], user: string, thread: string, context: Record<string, unknown> = {}) {
  const model = new ScriptedChatModel([...calls, { content: "done" }]);
  const agent = createAgent({ model, tools: s.tools, checkpointer: new MemorySaver() });
  const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { context: { user_id: user, ...context }, configurable: { thread_id: thread } });
  return toolMessages(result.messages);
}

function taskIdOf(message: ToolMessage): string {
  return (JSON.parse(String(message.content)) as SubmittedTask).task_id;
}

function rows(dbPath: string): Promise<Record<string, unknown>[]> {
  return new Promise((resolve, reject) => {
    const db = new sqlite3.Database(dbPath, sqlite3.OPEN_READONLY, (err) => {
      if (err) return reject(err);
      db.all("SELECT * FROM mcp_tasks", (e, r) => {
        db.close();
        if (e) reject(e);
        else resolve(r as Record<string, unknown>[]);
      });
    });
  });
}

describe("secrets in stored task rows", () => {
  test("a user_auth credential a job server echoes is not stored after a restart (the worker knows it from the config)", async () => {
    const token = "Bearer ann-Literal-Tok-93";
    const config = {
      mcpTasks: { enabled: true, poll_interval_seconds: 5 },
      mcpServers: {
        jobs: {
          type: "http",
          url: http.url,
          user_auth: { header: "X-User-Token", users: { ann: token } },
          task_toolsets: [{ name: "build", ...TOOLSET }],
        },
      },
    };
    const first = await setup(config);
    const [submitted] = await agentCalls(first, [ScriptedChatModel.toolCall("jobs_start_job", { label: "e", mode: "echo_submit" }, "s")], "ann", "th-U");
    const taskId = taskIdOf(submitted!);
    await first.toolkit.close();
    await first.runtime.stop();
    const worker = await createTaskRuntime({ configPath: first.configPath, databaseUrl: `sqlite:${first.dbPath}`, clock: first.clock.now, logger: silentLogger, toolkitOptions: { dataDir: first.dir } });
    open.push({ runtime: worker });
    await worker.runOnce(first.clock.advance(5));
    expect((await worker.service.getTask(taskId, "ann"))?.status).toBe("completed");
    const stored = JSON.stringify(await rows(first.dbPath));
    // The server did echo it (raw, as JSON text and base64): the row must hold none of them.
    expect(stored).toContain("x-user-token");
    expect(stored).not.toContain("ann-Literal-Tok-93");
    const result = JSON.parse(String((await rows(first.dbPath))[0]!.result)) as { b64: string };
    expect(Buffer.from(result.b64, "base64").toString("utf8")).not.toContain("ann-Literal-Tok-93");
  });
});
