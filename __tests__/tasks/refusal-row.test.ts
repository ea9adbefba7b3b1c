/**
 * Review of 21ac45b (a streamable HTTP refusal names its status): a durable task's status call the server refuses with
 * a body echoing the call's credential is stored as a retried error that names the status and holds the credential in
 * no form, in any column of the SQLite row, nor in a log line.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { createTaskRuntime, MemoryTaskNotifier, TaskSubmitRequest, type TaskRuntime } from "../../lib/tasks";
import { JOB_TOOLSET, makeTempDir, ManualClock, startHttpFixture, TaskBoard, writeConfig } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";
import { startProxy, type Proxy } from "../fixtures/proxy";
import { storedRows } from "../fixtures/task-rows";

const SECRET = "sk-task-refused/Zq8+w";

let http: StreamableHttpFixture;
let front: Proxy;
let runtime: TaskRuntime | undefined;
let toolkit: McpToolkit | undefined;

beforeAll(async () => {
  http = await startHttpFixture({ name: "jobs", toolNames: ["echo"], taskBoard: new TaskBoard() });
  front = await startProxy(http.url);
});
afterAll(async () => {
  await toolkit?.close();
  await runtime?.stop();
  await front?.close();
  await http?.close();
});

const forms = (secret: string) => [
  secret,
  JSON.stringify(secret).slice(1, -1),
  encodeURIComponent(secret),
  Buffer.from(secret).toString("base64").replace(/=+$/, ""),
];

test("a refused status call: the stored error names the HTTP status, the echoed key scrubbed from every column", async () => {
  const dir = await makeTempDir("task-refusal-row-");
  const configPath = await writeConfig(dir, {
    mcpTasks: { enabled: true, poll_interval_seconds: 5 },
    mcpServers: { jobs: { type: "http", url: front.url(new URL(http.url).pathname), headers: { "X-Api-Key": "${JOBS_KEY}" }, task_toolsets: [{ name: "build", ...JOB_TOOLSET }] } },
  });
  const env = { JOBS_KEY: SECRET };
  const dbPath = path.join(dir, "tasks.sqlite");
  const clock = new ManualClock();
  const logger = new RecordingLogger();
  runtime = await createTaskRuntime({ configPath, env, databaseUrl: `sqlite:${dbPath}`, notifier: new MemoryTaskNotifier(), clock: clock.now, logger });
  toolkit = createMcpToolkit({ configPath, env, logger, dataDir: dir, taskRuntime: runtime });
  await toolkit.getTools();
  const record = await runtime.service.submit(
    "ordinary-tools",
    new TaskSubmitRequest({ userId: "ann", threadId: "th-refused", serverName: "jobs", taskName: "build", arguments: { label: "r" }, driverData: { ...JOB_TOOLSET } }),
  );
  front.rule = (r) =>
    r.rpcMethod === "tools/call" && r.params?.name === "job_status"
      ? { status: 403, body: `{"error":"key ${String(r.headers["x-api-key"])} refused"}\n\u001b[31mdenied\u001b[0m`, contentType: "application/json" }
      : undefined;
  await runtime.runOnce(clock.advance(5));
  front.rule = () => undefined;
  const rows = await storedRows(dbPath);
  const row = rows.find((r) => r.id === record.id)!;
  expect(row.last_poll_error).toBe(
    "MCP tool 'job_status' on server 'jobs' failed: Streamable HTTP error: Error POSTing to endpoint (HTTP 403): " +
      String.raw`{"error":"key [redacted] refused"}\n\x1b[31mdenied\x1b[0m`,
  );
  for (const stored of rows) for (const [column, value] of Object.entries(stored)) for (const form of forms(SECRET)) expect(`${column}: ${String(value).includes(form)}`).toBe(`${column}: false`);
  for (const form of forms(SECRET)) expect(JSON.stringify(logger.lines)).not.toContain(form);
});
