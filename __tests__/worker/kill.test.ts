/**
 * The kill test (issue 13 acceptance): 200 tasks of random durations (1–5 status calls each) on the job fixture
 * server (streamable HTTP in this test process, so it outlives the workers); two `mcp-harness worker` child
 * processes on one database (a SQLite file; PostgreSQL too when MCP_HARNESS_TEST_POSTGRES_URL is set); one of
 * them is SIGKILLed at a random moment of its work three times and restarted. Tasks are submitted in four waves
 * (one at the start, one after each restart) so that every kill lands while there is work in flight.
 *
 * What is counted: every row ends `completed` with exactly one attention event (event_version 1) and that event
 * delivered; the workers deliver through the file notifier (MCP_HARNESS_TEST_NOTIFY_FILE), which appends a line
 * per delivery call. "Exactly one notification per task event" = for every task, the lines name exactly one
 * distinct idempotency key, `mcp-task:<task>:1:<attempt>`, on the task's own thread; a key may appear on several
 * lines (a worker killed between launching the run and recording it makes the next worker launch it again with
 * the same key, which the notifier answers with the same run), but it counts once — a second key for the same
 * event would be a second notification.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import { readFile } from "node:fs/promises";
import * as path from "node:path";
import type { TaskRecord, TaskRuntime } from "../../lib/tasks";
import type { FileNotifierLine, TaskWorkerTickReport } from "../../lib/worker";
import { startHttpFixture, TaskBoard } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";
import { targets } from "../tasks/store/helpers";
import { startWorkerChild, type WorkerChild } from "./cli-child";
import { setupRuntime, submitJob } from "./helpers";

const TASKS = 200;
const WAVES = 4;
const THREADS = 40;
const USERS = ["ann", "bob", "cy", "dee"];
const KILLS = 3;

let board: TaskBoard;
let http: StreamableHttpFixture;
const runtimes: TaskRuntime[] = [];
const children: WorkerChild[] = [];
const databases = targets();

beforeAll(async () => {
  board = new TaskBoard();
  http = await startHttpFixture({ name: "jobs", toolNames: [], taskBoard: board });
});
afterEach(async () => {
  for (const c of children.splice(0)) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill("SIGKILL");
  for (const runtime of runtimes.splice(0)) await runtime.stop();
});
afterAll(async () => {
  await http.close();
  for (const target of databases) await target.cleanup();
});

const randomInt = (max: number): number => Math.floor(Math.random() * max);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const threadOf = (i: number) => `th-${i % THREADS}`;
const userOf = (i: number) => USERS[(i % THREADS) % USERS.length]!;

describe.each(databases.map((d) => [d.name, d] as const))("kill test on %s", (_name, target) => {
  test("two workers, one SIGKILLed three times: every task terminal once, every event notified exactly once", async () => {
    const databaseUrl = await target.fresh();
    const s = await setupRuntime({ url: http.url, databaseUrl, tasks: { poll_interval_seconds: 1, lease_seconds: 5, max_concurrent_polls: 8 } });
    runtimes.push(s.runtime);
    const notifyFile = path.join(s.dir, "notify.jsonl");
    const env = { MCP_HARNESS_DATABASE_URL: databaseUrl, MCP_HARNESS_DATA_DIR: s.dir, MCP_HARNESS_TEST_NOTIFY_FILE: notifyFile };
    const submitted: TaskRecord[] = [];
    let next = 0;
    const submitWave = async () => {
      const wave = Array.from({ length: TASKS / WAVES }, () => next++);
      const records = await Promise.all(
        wave.map((i) => submitJob(s.runtime, { label: `job-${i}`, steps: 1 + randomInt(5) }, { user: userOf(i), thread: threadOf(i) })),
      );
      submitted.push(...records);
    };

    // Completion is checked whenever a worker reports a delivery.
    let allDelivered!: () => void;
    const finished = new Promise<void>((resolve) => (allDelivered = resolve));
    let checking = false;
    const deliveredCount = async (): Promise<number> => {
      let count = 0;
      for (let t = 0; t < THREADS; t += 1) {
        const rows = await s.runtime.store.listByThread(`th-${t}`, USERS[t % USERS.length]!, { limit: 100 });
        count += rows.filter((r) => r.notification_status === "delivered").length;
      }
      return count;
    };
    // A delivery reported while a count is running triggers one more count, so the last delivery is never missed.
    let recount = false;
    const check = (): void => {
      if (submitted.length < TASKS) return;
      if (checking) {
        recount = true;
        return;
      }
      checking = true;
      void deliveredCount().then((n) => {
        checking = false;
        if (n === TASKS) allDelivered();
        else if (recount) {
          recount = false;
          check();
        }
      });
    };
    const watch = (worker: WorkerChild) => {
      worker.events.on("line", (line: string) => {
        if ((JSON.parse(line) as TaskWorkerTickReport).delivered > 0) check();
      });
    };
    const start = (): WorkerChild => {
      const worker = startWorkerChild([s.configPath, "--interval", "0.05", "--json"], env, s.dir);
      children.push(worker);
      watch(worker);
      return worker;
    };

    await submitWave();
    let victim = start();
    const steady = start();
    await Promise.all([victim.started, steady.started]);
    const kills: (NodeJS.Signals | null)[] = [];
    for (let k = 0; k < KILLS; k += 1) {
      // A random moment of its work: after a tick in which it claimed something, plus 0–250 ms.
      await victim.nextLine((line) => (JSON.parse(line) as TaskWorkerTickReport).claimed > 0);
      await pause(randomInt(250));
      victim.child.kill("SIGKILL");
      kills.push((await victim.exited).signal);
      victim = start();
      await Promise.all([victim.started, submitWave()]);
    }
    // The last wave may already be delivered by the time the watcher first looks.
    check();
    await finished;
    for (const worker of [victim, steady]) worker.child.kill("SIGTERM");
    expect(await victim.exited).toEqual({ code: 0, signal: null });
    expect(await steady.exited).toEqual({ code: 0, signal: null });
    expect(kills).toEqual(["SIGKILL", "SIGKILL", "SIGKILL"]);

    // Every task: terminal once, its one event delivered; the remote job agrees.
    expect(submitted).toHaveLength(TASKS);
    for (const task of submitted) {
      const row = (await s.runtime.store.get(task.id, task.user_id))!;
      expect(row).toMatchObject({ status: "completed", event_version: 1, notified_version: 1, notification_status: "delivered", lease_owner: null });
      expect(board.jobs.get(task.remote_task_id)!.state).toBe("completed");
    }

    // Every event: exactly one distinct key, on the task's own thread, whatever the redeliveries.
    const lines = (await readFile(notifyFile, "utf8")).trim().split("\n").map((l) => JSON.parse(l) as FileNotifierLine);
    const keysByTask = new Map<string, Set<string>>();
    for (const line of lines) {
      const set = keysByTask.get(line.taskId) ?? new Set<string>();
      set.add(line.key);
      keysByTask.set(line.taskId, set);
    }
    expect(keysByTask.size).toBe(TASKS);
    const perThread = new Map<string, number>();
    for (const task of submitted) {
      const keys = [...keysByTask.get(task.id)!];
      expect(keys).toHaveLength(1);
      expect(keys[0]).toMatch(new RegExp(`^mcp-task:${task.id}:1:\\d+$`));
      for (const line of lines.filter((l) => l.taskId === task.id)) {
        expect(line).toMatchObject({ threadId: task.thread_id, userId: task.user_id, status: "completed", dispatchVersion: 1 });
      }
      perThread.set(task.thread_id, (perThread.get(task.thread_id) ?? 0) + 1);
    }
    const distinctPerThread = new Map<string, number>();
    for (const [taskId] of keysByTask) {
      const thread = submitted.find((t) => t.id === taskId)!.thread_id;
      distinctPerThread.set(thread, (distinctPerThread.get(thread) ?? 0) + 1);
    }
    expect(distinctPerThread).toEqual(perThread);
    // Redeliveries (same key, several lines) are allowed; they are what the kills leave behind.
    expect(lines.length).toBeGreaterThanOrEqual(TASKS);
  }, 240_000);
});
