/**
 * A durable task's submit whose caller (the agent run) is cancelled after the server answered, while an interceptor
 * after `next` still runs: the answer still reaches the task service, which cancels the job it started (SPEC: the
 * caller cancelled mid-submit leaves no job running). Real HTTP job server, the toolkit's task caller, the ordinary
 * driver and a real SQLite store; the interceptor blocks on a promise the test controls.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { McpTaskDriverRegistry, McpTaskService, OrdinaryToolsDriver, TaskSubmitRequest, toolkitTaskCaller, type TaskStore } from "../../lib/tasks";
import { JOB_TOOLSET, makeTempDir, startHttpFixture, TaskBoard, writeConfig } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";
import { settings } from "./scripted-driver";
import { ManualClock, openStore, targets } from "./store/helpers";

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const target = targets()[0];

let http: StreamableHttpFixture;
let board: TaskBoard;
let toolkit: McpToolkit;
let store: TaskStore;
let service: McpTaskService;
let hold = false;
let answered = deferred();
let release = deferred();

// An audit-style interceptor: it awaits something of its own after the server's answer.
const after: McpToolInterceptor = async (request, next) => {
  const result = await next(request);
  if (hold && request.toolName === "start_job") {
    answered.resolve();
    await release.promise;
  }
  return result;
};

beforeAll(async () => {
  board = new TaskBoard();
  http = await startHttpFixture({ name: "jobs", toolNames: [], taskBoard: board });
  const dir = await makeTempDir("submit-abort-answered-");
  const configPath = await writeConfig(dir, { mcpServers: { jobs: { type: "http", url: http.url, tool_call_timeout: 30 } } });
  toolkit = createMcpToolkit({ configPath, logger: new RecordingLogger(), dataDir: dir, interceptors: [after] });
  const clock = new ManualClock();
  store = await openStore(await target.fresh(), clock);
  const drivers = new McpTaskDriverRegistry();
  drivers.register("ordinary", new OrdinaryToolsDriver(toolkitTaskCaller(toolkit)));
  service = new McpTaskService({ store, drivers, settings: settings(), clock: clock.now, logger: new RecordingLogger() });
});

afterAll(async () => {
  release.resolve();
  await service.stop();
  await store.close();
  await toolkit.close();
  await http.close();
  await target.cleanup();
});

test("the caller cancelled while an interceptor after `next` runs: the job the server started is cancelled, not left running", async () => {
  hold = true;
  answered = deferred();
  release = deferred();
  const caller = new AbortController();
  const request = new TaskSubmitRequest({ userId: "u1", threadId: "t1", serverName: "jobs", taskName: "job", arguments: { label: "a", steps: 50 }, driverData: JOB_TOOLSET });
  const submitting = service.submit("ordinary", request, { signal: caller.signal });
  const outcome = submitting.then(
    () => "submitted",
    (err: unknown) => (err as Error).name,
  );
  await answered.promise;
  expect(board.log.submits).toHaveLength(1);
  caller.abort();
  release.resolve();
  expect(await outcome).toBe("AbortError");
  // The submit settles once the compensating cancel was made.
  expect(board.log.cancels).toEqual(board.log.submits);
  expect(await service.listTasks("t1", "u1")).toEqual([]);
});
