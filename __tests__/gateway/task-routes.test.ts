/**
 * The gateway's task routes (SPEC §8.4) over a real task runtime: SQLite file, the job fixture server over
 * streamable HTTP, tasks submitted through the agent-visible wrapper.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import * as path from "node:path";
import { ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { Hono } from "hono";
import { createMcpToolkit, silentLogger, type McpToolkit } from "../../lib";
import { createGatewayApp, PUBLIC_ERROR_MAX_CHARS } from "../../lib/gateway";
import { createTaskRuntime, type SubmittedTask, type TaskRuntime } from "../../lib/tasks";
import { JOB_TOOLSET, makeTempDir, startHttpFixture, TaskBoard, writeConfig } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";

const TOOLSET = { name: "build", ...JOB_TOOLSET };
const SUMMARY_KEYS = ["cancel_requested", "created_at", "error", "status", "task_id", "task_name", "tracking_degraded", "updated_at"];

let board: TaskBoard;
let http: StreamableHttpFixture;
let runtime: TaskRuntime;
let toolkit: McpToolkit;
let submit: DynamicStructuredTool;
let now = new Date("2026-01-01T00:00:00.000Z");
const clock = () => now;
let gateway: Hono;
let dir: string;

const authorize = (request: Request) => {
  const user = request.headers.get("x-user");
  return user ? { userId: user, admin: false } : null;
};

async function submitAs(user: string, thread: string, args: Record<string, unknown>): Promise<{ taskId: string; remoteId: string }> {
  const message = (await submit.invoke(
    { type: "tool_call", name: submit.name, id: `c-${user}-${thread}`, args },
    { context: { user_id: user }, configurable: { thread_id: thread } },
  )) as ToolMessage;
  const answer = JSON.parse(String(message.content)) as SubmittedTask;
  return { taskId: answer.task_id, remoteId: board.log.submits.at(-1)! };
}

function get(url: string, user = "ann", app: Hono = gateway) {
  return app.request(url, { headers: { "x-user": user } });
}

function post(url: string, user = "ann") {
  return gateway.request(url, { method: "POST", headers: { "x-user": user } });
}

let ann: { taskId: string; remoteId: string };
let failed: { taskId: string; remoteId: string };
let bob: { taskId: string; remoteId: string };

beforeAll(async () => {
  board = new TaskBoard();
  http = await startHttpFixture({ name: "jobs", toolNames: [], taskBoard: board });
  dir = await makeTempDir("gateway-tasks-");
  const configPath = await writeConfig(dir, {
    mcpTasks: { enabled: true },
    mcpServers: { jobs: { type: "http", url: http.url, task_toolsets: [TOOLSET] } },
  });
  runtime = await createTaskRuntime({ configPath, databaseUrl: `sqlite:${path.join(dir, "tasks.sqlite")}`, clock, logger: silentLogger });
  toolkit = createMcpToolkit({ configPath, logger: silentLogger, dataDir: dir, taskRuntime: runtime });
  submit = (await toolkit.getTools()).find((t) => t.name === "jobs_start_job")!;
  gateway = createGatewayApp({ taskRuntime: runtime, authorize, logger: silentLogger });
  ann = await submitAs("ann", "th-1", { label: "a", steps: 5 });
  failed = await submitAs("ann", "th-1", { label: "x".repeat(800), mode: "fail" });
  bob = await submitAs("bob", "th-2", { label: "b" });
  now = new Date(now.getTime() + 5000);
  await runtime.runOnce(now);
});

afterAll(async () => {
  await toolkit.close();
  await runtime.stop();
  await http.close();
});

test("list: the caller's tasks on that thread, allowlisted fields only, errors cut to 500 characters", async () => {
  const response = await get("/api/threads/th-1/mcp-tasks");
  expect(response.status).toBe(200);
  const text = await response.text();
  const items = JSON.parse(text) as Record<string, unknown>[];
  expect(items.map((i) => i.task_id).sort()).toEqual([ann.taskId, failed.taskId].sort());
  for (const item of items) expect(Object.keys(item).sort()).toEqual(SUMMARY_KEYS);
  const failedItem = items.find((i) => i.task_id === failed.taskId)!;
  expect(failedItem.status).toBe("failed");
  expect((failedItem.error as string).length).toBe(PUBLIC_ERROR_MAX_CHARS);
  for (const secretish of [ann.remoteId, failed.remoteId, "jobs", "driver_data", "remote_task_id"]) expect(text).not.toContain(secretish);
  expect(JSON.parse(await (await get("/api/threads/th-1/mcp-tasks?limit=1")).text())).toHaveLength(1);
});

test("detail: never the remote id, driver data or server name; another user's or thread's task is 404", async () => {
  const response = await get(`/api/threads/th-1/mcp-tasks/${ann.taskId}`);
  const text = await response.text();
  expect(response.status).toBe(200);
  expect(JSON.parse(text)).toMatchObject({ task_id: ann.taskId, task_name: "build", status: "working", notification_status: "none" });
  for (const hidden of [ann.remoteId, "remote_task_id", "driver_data", "server_name", "start_job"]) expect(text).not.toContain(hidden);
  expect((await get(`/api/threads/th-2/mcp-tasks/${bob.taskId}`)).status).toBe(404); // ann asking for bob's
  expect((await get(`/api/threads/th-9/mcp-tasks/${ann.taskId}`)).status).toBe(404); // ann's task, other thread
  expect(await (await get(`/api/threads/th-2/mcp-tasks/${bob.taskId}`)).json()).toEqual({ detail: "MCP task not found" });
  expect((await get(`/api/threads/th-2/mcp-tasks/${bob.taskId}`, "bob")).status).toBe(200);
});

test("cancel returns once the request is stored, before any remote call; another user's cancel is 404", async () => {
  expect((await post(`/api/threads/th-2/mcp-tasks/${bob.taskId}/cancel`)).status).toBe(404);
  const response = await post(`/api/threads/th-1/mcp-tasks/${ann.taskId}/cancel`);
  expect(response.status).toBe(200);
  expect(await response.json()).toMatchObject({ task_id: ann.taskId, cancel_requested: true, status: "working" });
  expect(board.log.cancels).not.toContain(ann.remoteId);
  await runtime.runOnce(now);
  expect(board.log.cancels).toContain(ann.remoteId);
  expect(await (await get(`/api/threads/th-1/mcp-tasks/${ann.taskId}`)).json()).toMatchObject({ status: "cancelled" });
});

test("bad thread ids and limits are 400; no caller is 401", async () => {
  expect((await get("/api/threads/th.1/mcp-tasks")).status).toBe(400);
  expect((await get(`/api/threads/${"t".repeat(129)}/mcp-tasks`)).status).toBe(400);
  for (const limit of ["0", "101", "abc", "1.5"]) expect((await get(`/api/threads/th-1/mcp-tasks?limit=${limit}`)).status).toBe(400);
  expect((await gateway.request("/api/threads/th-1/mcp-tasks")).status).toBe(401);
});

/** `app` mounted as the LangGraph API server mounts `http.app`, behind its auth middleware (`x-user` signs in). */
function behindServerAuth(app: Hono): Hono {
  const server = new Hono();
  server.use(async (c, next) => {
    const user = c.req.header("x-user");
    if (user) (c as unknown as { set(k: string, v: unknown): void }).set("auth", { user: { identity: user, is_authenticated: true } });
    await next();
  });
  server.route("/", app);
  return server;
}

test("without an authorize hook the LangGraph server's authenticated user is the caller", async () => {
  const bare = createGatewayApp({ taskRuntime: runtime, logger: silentLogger });
  expect((await bare.request("/api/threads/th-2/mcp-tasks")).status).toBe(401);
  const server = behindServerAuth(bare);
  const items = (await (await get("/api/threads/th-2/mcp-tasks", "bob", server)).json()) as { task_id: string }[];
  expect(items.map((i) => i.task_id)).toEqual([bob.taskId]);
  expect((await get("/api/threads/th-2/mcp-tasks", "ann", server)).status).toBe(200);
  expect(await (await get("/api/threads/th-2/mcp-tasks", "ann", server)).json()).toEqual([]);
});

test("with an authorize hook that knows only the admin, the LangGraph server's authenticated users still reach their tasks", async () => {
  const adminOnly = createGatewayApp({
    taskRuntime: runtime,
    logger: silentLogger,
    authorize: (request) => (request.headers.get("authorization") === "Bearer admin-token" ? { userId: "admin", admin: true } : null),
  });
  const server = behindServerAuth(adminOnly);
  const items = (await (await get("/api/threads/th-2/mcp-tasks", "bob", server)).json()) as { task_id: string }[];
  expect(items.map((i) => i.task_id)).toEqual([bob.taskId]);
  expect((await server.request("/api/threads/th-2/mcp-tasks")).status).toBe(401);
  const asAdmin = await server.request("/api/threads/th-2/mcp-tasks", { headers: { authorization: "Bearer admin-token", "x-user": "bob" } });
  expect(await asAdmin.json()).toEqual([]); // the hook's user wins: the admin has no tasks there
});

test("a store that fails: one clean line naming the task request, never the database's text", async () => {
  const configPath = path.join(dir, "extensions_config.json");
  const broken = await createTaskRuntime({ configPath, databaseUrl: `sqlite:${path.join(dir, "broken.sqlite")}`, clock, logger: silentLogger });
  const app = createGatewayApp({ taskRuntime: broken, authorize, logger: silentLogger });
  await broken.store.close(); // the runtime still runs; every query now fails
  try {
    const response = await get("/api/threads/th-1/mcp-tasks", "ann", app);
    expect(response.status).toBe(500);
    expect(await response.json()).toEqual({ detail: "Failed to handle the MCP task request" });
  } finally {
    await broken.stop().catch(() => undefined);
  }
});

test("a stopped runtime, or none: 503 for list, detail and cancel alike", async () => {
  const none = createGatewayApp({ authorize, logger: silentLogger });
  expect((await get("/api/threads/th-1/mcp-tasks", "ann", none)).status).toBe(503);
  await runtime.stop();
  expect((await get("/api/threads/th-1/mcp-tasks")).status).toBe(503);
  expect((await get(`/api/threads/th-1/mcp-tasks/${failed.taskId}`)).status).toBe(503);
  const cancel = await post(`/api/threads/th-1/mcp-tasks/${failed.taskId}/cancel`);
  expect(cancel.status).toBe(503);
  expect(await cancel.json()).toEqual({ detail: "MCP task service not available" });
});
