/**
 * The ordinary-tools driver against real job servers (stdio child, streamable HTTP) through the toolkit's task
 * caller: payload schemas, status mapping, protocol failures vs retryable errors, and scrubbing.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import { McpTaskProtocolError, TaskStatus, type TaskReference } from "../../lib/tasks";
import { OrdinaryToolsDriver, toolkitTaskCaller, TaskSubmitRequest } from "../../lib/tasks";
import { createMcpToolkit, silentLogger, type McpToolkit } from "../../lib";
import { echoForms, JOB_TOOLSET, makeTempDir, startHttpFixture, stdioFixture, TaskBoard, writeConfig } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";

const SECRET = "tok-Zq9";

let http: StreamableHttpFixture;
let board: TaskBoard;
let toolkit: McpToolkit;
let driver: OrdinaryToolsDriver;

beforeAll(async () => {
  board = new TaskBoard();
  http = await startHttpFixture({ name: "jobs", toolNames: [], taskBoard: board });
  const dir = await makeTempDir("ordinary-driver-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      web: { type: "http", url: http.url, headers: { Authorization: `Bearer ${SECRET}` } },
      short: { type: "http", url: http.url, headers: { "X-Tenant": "acme", "X-Api-Version": "2", "X-Team-Key": "team-key-7f3" } },
      local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"], tasks: true }) },
    },
  });
  toolkit = createMcpToolkit({ configPath, logger: silentLogger, dataDir: dir });
  driver = new OrdinaryToolsDriver(toolkitTaskCaller(toolkit));
});

afterAll(async () => {
  await toolkit.close();
  await http.close();
});

function request(server: string, args: Record<string, unknown>, roles: Record<string, string> = JOB_TOOLSET): TaskSubmitRequest {
  return new TaskSubmitRequest({ userId: "u1", threadId: "t1", serverName: server, taskName: "job", arguments: args, driverData: roles });
}

async function submitted(server: string, args: Record<string, unknown>): Promise<TaskReference> {
  const submission = await driver.submit(request(server, args));
  return { localTaskId: "local-1", userId: "u1", threadId: "t1", serverName: server, remoteTaskId: submission.remoteTaskId, driverData: JOB_TOOLSET };
}

test.each(["web", "local"])("%s: submit, running → working, then completed with the result", async (server) => {
  const submission = await driver.submit(request(server, { label: "a", steps: 2 }));
  expect(submission.snapshot.status).toBe(TaskStatus.SUBMITTED);
  expect(submission.driverData).toEqual(JOB_TOOLSET);
  expect(submission.driverData).not.toHaveProperty("remote_task_id");
  const ref: TaskReference = { localTaskId: "x", userId: "u1", threadId: "t1", serverName: server, remoteTaskId: submission.remoteTaskId, driverData: JOB_TOOLSET };
  expect((await driver.getStatus(ref)).status).toBe(TaskStatus.WORKING);
  const done = await driver.getStatus(ref);
  expect(done.status).toBe(TaskStatus.COMPLETED);
  expect(done.result).toMatchObject({ label: "a", step: 2 });
});

test("failed, input_required, poll hints and task_not_found map onto snapshots", async () => {
  expect(await driver.getStatus(await submitted("web", { label: "f", mode: "fail" }))).toMatchObject({ status: "failed", error: "job f failed" });
  const input = await driver.getStatus(await submitted("web", { label: "i", mode: "input" }));
  expect(input).toMatchObject({ status: "input_required", input_required: { question: "confirm i?" } });
  expect((await driver.getStatus(await submitted("web", { label: "h", mode: "hint", hint: 7.5 }))).poll_after_seconds).toBe(7.5);
  // task_not_found wins over the reported status.
  expect(await driver.getStatus(await submitted("web", { label: "n", mode: "not_found" }))).toMatchObject({
    status: "failed",
    error: "Remote MCP task was not found",
  });
  const gone = { localTaskId: "x", userId: "u1", threadId: "t1", serverName: "web", remoteTaskId: "never-issued", driverData: JOB_TOOLSET };
  expect(await driver.getStatus(gone)).toMatchObject({ status: "failed", error: "no such job" });
});

test.each([
  ["malformed", /Invalid structuredContent from MCP task tool 'job_status': status/],
  ["text_only", /must return structuredContent; text content is not parsed/],
  ["mismatch", /^MCP task response task_id does not match the persisted remote task$/],
  ["hint", /poll_after_seconds/],
])("%s status answer → permanent protocol error", async (mode, message) => {
  const ref = await submitted("web", { label: "p", mode, hint: mode === "hint" ? -1 : undefined });
  const err = await driver.getStatus(ref).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(McpTaskProtocolError);
  expect((err as Error).message).toMatch(message);
  expect((err as Error).message).not.toContain(ref.remoteTaskId);
});

test("only the fixed payload bounds fail a status answer in the driver: a result of any size comes back whole (the service previews it)", async () => {
  const big = await driver.getStatus(await submitted("web", { label: "b", mode: "big", size: 100_000 }));
  expect([big.status, (big.result as string).length, big.result_truncated]).toEqual([TaskStatus.COMPLETED, 100_000, false]);
  const err = await driver.getStatus(await submitted("web", { label: "a", mode: "bad_artifact" })).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(McpTaskProtocolError);
  expect((err as Error).message).toBe("MCP task result_artifact payload exceeds the 65536-byte limit");
});

test("isError on status is retryable, with the first text block scrubbed of the sent headers and bounded", async () => {
  const ref = await submitted("web", { label: "e", mode: "status_error" });
  const err = (await driver.getStatus(ref).catch((e: unknown) => e)) as Error;
  expect(err).not.toBeInstanceOf(McpTaskProtocolError);
  expect(err.message).toMatch(/^MCP task tool 'job_status' returned an error: status backend down/);
  for (const form of echoForms(SECRET)) expect(err.message).not.toContain(form);
  expect(err.message.length).toBeLessThanOrEqual("MCP task tool 'job_status' returned an error: ".length + 500);
});

test("cancel returns the terminal status; a failing cancel is a retryable error; repeat cancels stay terminal", async () => {
  const ref = await submitted("web", { label: "c", cancel_failures: 1 });
  await expect(driver.cancel(ref)).rejects.toThrow(/^MCP task tool 'job_cancel' returned an error: cancel backend busy$/);
  expect((await driver.cancel(ref)).status).toBe(TaskStatus.CANCELLED);
  expect((await driver.cancel(ref)).status).toBe(TaskStatus.CANCELLED);
  const done = await submitted("web", { label: "d" });
  await driver.getStatus(done);
  expect((await driver.cancel(done)).status).toBe(TaskStatus.COMPLETED);
});

test("status and cancel answers are held to the persisted id, not to the length a stored id may have", async () => {
  // The cancel that compensates a submit whose id was too long to store must understand the server's answer.
  const long = await submitted("web", { label: "l", steps: 5, remote_id: "j".repeat(300) });
  expect((await driver.getStatus(long)).status).toBe(TaskStatus.WORKING);
  expect((await driver.cancel(long)).status).toBe(TaskStatus.CANCELLED);
});

test("protocol fields are read as the server sent them; what is kept is scrubbed (short header values 'acme', '2')", async () => {
  // An id is stored as issued: a short value inside it is a coincidence (most UUIDs hold a '2'), a long one an echo.
  const coincidence = await driver.submit(request("short", { label: "s", remote_id: "acme-2-77" }));
  expect(coincidence).toMatchObject({ remoteTaskId: "acme-2-77", remoteIdHoldsSecret: false });
  const echo = await driver.submit(request("short", { label: "e", remote_id: "job-team-key-7f3" }));
  expect(echo).toMatchObject({ remoteTaskId: "job-team-key-7f3", remoteIdHoldsSecret: true });
  const encoded = await driver.submit(request("short", { label: "b", remote_id: `job-${Buffer.from("team-key-7f3").toString("base64")}` }));
  expect(encoded.remoteIdHoldsSecret).toBe(true);
  expect((await driver.getStatus({ ...(await submitted("short", { label: "p", steps: 3, remote_id: "acme-2-78" })) })).status).toBe(TaskStatus.WORKING);
  const hinted = await submitted("short", { label: "h", mode: "hint", hint: 2 });
  expect(await driver.getStatus(hinted)).toMatchObject({ status: "working", poll_after_seconds: 2 });
  const failed = await submitted("short", { label: "acme", mode: "fail" });
  expect(await driver.getStatus(failed)).toMatchObject({ status: "failed", error: "job [redacted] failed" });
});

test("a submit answer that is not {task_id, status: running} or a missing role is a protocol error", async () => {
  await expect(driver.submit(request("web", { label: "x" }, { status_tool: "job_status", cancel_tool: "job_cancel" }))).rejects.toThrow(
    new McpTaskProtocolError("Task driver_data is missing required 'submit_tool'"),
  );
  const wrongTool = { ...JOB_TOOLSET, submit_tool: "job_log" };
  await expect(driver.submit(request("web", {}, wrongTool))).rejects.toBeInstanceOf(McpTaskProtocolError);
  const refused = await driver.submit(request("web", { label: "r", submit_error: true })).catch((e: unknown) => e);
  expect(refused).not.toBeInstanceOf(McpTaskProtocolError);
  expect((refused as Error).message).toBe("MCP task tool 'start_job' returned an error: could not start r");
});

test("stdio status and cancel calls run in the task's own (user, thread) child, not the default one", async () => {
  const ref = await submitted("local", { label: "s" });
  const status = await driver.getStatus(ref);
  const log = board.log; // the HTTP board; the stdio child has its own
  expect(log.submits).not.toContain(ref.remoteTaskId);
  const { pid } = status.result as { pid: number };
  const other = { ...ref, threadId: "t2" };
  // Another thread's child never saw this job.
  expect(await driver.getStatus(other)).toMatchObject({ status: "failed", error: "no such job" });
  expect(pid).toBeGreaterThan(0);
  expect((status.result as { cwd: string }).cwd).toMatch(/threads[\\/]t1[\\/]user-data[\\/]workspace$/);
});
