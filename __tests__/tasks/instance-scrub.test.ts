/**
 * A class instance an interceptor puts in a task tool's answer, built from a header: its stored form (what
 * `JSON.stringify` gives it: an array subclass's `toJSON`) must hold no secret, in any column, the delivered
 * notification or a log line.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import * as path from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { REDACTED } from "../../lib/shared";
import type { McpToolInterceptor } from "../../lib/shared/interceptor";
import { createTaskRuntime, MemoryTaskNotifier, TaskSubmitRequest, type TaskRuntime } from "../../lib/tasks";
import { JOB_TOOLSET, makeTempDir, ManualClock, startHttpFixture, TaskBoard, writeConfig } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";
import { storedRows } from "../fixtures/task-rows";

const SECRET = 'static-Key/Ab12+cd34"q';

/** A page of items with the cursor to the next one: an array of its own class, serialized by its `toJSON`. */
class Page extends Array<string> {
  cursor = "";
  toJSON(): { items: string[]; cursor: string } {
    return { items: [...this], cursor: this.cursor };
  }
}

let board: TaskBoard;
let http: StreamableHttpFixture;
const open: { runtime: TaskRuntime; toolkit: McpToolkit }[] = [];

beforeAll(async () => {
  board = new TaskBoard();
  http = await startHttpFixture({ name: "jobs", toolNames: ["echo"], taskBoard: board });
});

afterEach(async () => {
  for (const { runtime, toolkit } of open.splice(0)) {
    await toolkit.close();
    await runtime.stop();
  }
});

afterAll(async () => {
  await http.close();
});

function forms(secret: string): string[] {
  return [
    secret,
    JSON.stringify(secret).slice(1, -1),
    JSON.stringify(JSON.stringify(secret)).slice(1, -1),
    encodeURIComponent(secret),
    Buffer.from(secret).toString("base64").replace(/=+$/, ""),
    Buffer.from(secret).toString("base64url"),
  ];
}

function expectNoSecret(where: string, text: string): void {
  for (const form of forms(SECRET)) expect(`${where}: ${text.includes(form) ? `holds ${form}` : "clean"}`).toBe(`${where}: clean`);
}

/**
 * Signs every call with an API key header of its own, and replaces a completed status answer's result by a page
 * whose cursor carries that key.
 */
const pagedResult: McpToolInterceptor = async (request, next) => {
  const signed = request.override({ headers: { ...request.headers, "X-Api-Key": SECRET } });
  const outcome = await next(signed);
  if (request.toolName !== "job_status") return outcome;
  const result = outcome as CallToolResult;
  const content = result.structuredContent as Record<string, unknown> | undefined;
  if (content?.status !== "completed") return outcome;
  const page = new Page();
  page.push("first");
  page.cursor = `/jobs?page=2&key=${signed.headers["X-Api-Key"]}`;
  return { ...result, structuredContent: { ...content, result: { page } } };
};

describe("class instances in a task's status answer", () => {
  test("an array subclass whose JSON form carries a header is stored, delivered and logged scrubbed", async () => {
    const dir = await makeTempDir("task-instance-");
    const configPath = await writeConfig(dir, {
      mcpTasks: { enabled: true, poll_interval_seconds: 5 },
      mcpServers: { jobs: { type: "http", url: http.url, task_toolsets: [{ name: "build", ...JOB_TOOLSET }] } },
    });
    const dbPath = path.join(dir, "tasks.sqlite");
    const clock = new ManualClock();
    const notifier = new MemoryTaskNotifier();
    const logger = new RecordingLogger();
    const runtime = await createTaskRuntime({ configPath, databaseUrl: `sqlite:${dbPath}`, notifier, clock: clock.now, logger });
    const toolkit = createMcpToolkit({ configPath, logger, dataDir: dir, taskRuntime: runtime, interceptors: [pagedResult] });
    open.push({ runtime, toolkit });
    await toolkit.getTools();
    const request = new TaskSubmitRequest({
      userId: "ann",
      threadId: "th-page",
      serverName: "jobs",
      taskName: "build",
      arguments: { label: "p" },
      driverData: { ...JOB_TOOLSET },
    });
    const record = await runtime.service.submit("ordinary-tools", request);
    await runtime.runOnce(clock.advance(5));
    const task = (await runtime.service.getTask(record.id, "ann"))!;
    expect(task.status).toBe("completed");
    const rows = await storedRows(dbPath);
    const stored = JSON.stringify(rows);
    // The interceptor did put its page in (so the checks below can fail): its JSON form is what was stored.
    expect(stored).toContain("cursor");
    for (const row of rows) for (const [column, value] of Object.entries(row)) expectNoSecret(`column ${column}`, String(value));
    expect(stored).toContain(REDACTED);
    await runtime.runOnce(clock.advance(5));
    expect(notifier.deliveriesOf(record.id)).toHaveLength(1);
    expectNoSecret("notification", JSON.stringify(notifier.deliveriesOf(record.id)));
    expectNoSecret("log", JSON.stringify(logger.lines));
  });
});
