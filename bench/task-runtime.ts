/**
 * Task runtime figures (issue 12): the price of durability — the agent-visible submit wrapper (remote submit +
 * a row in SQLite or PostgreSQL) against a bare SDK client calling `start_job` on the same server — and how
 * many tasks one service tracks per second when every job completes on its first status call, driven by
 * `runOnce` ticks on an injected clock, against bare `job_status` calls at the same concurrency. The job server
 * is the task fixture over streamable HTTP in this process; every baseline runs in the same process.
 */
import { randomBytes } from "node:crypto";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as PgClient } from "pg";
import { createMcpToolkit, silentLogger, type McpToolkit } from "./built";
import {
  createTaskRuntime,
  MemoryTaskNotifier,
  ORDINARY_MCP_TASK_DRIVER,
  TaskSnapshot,
  type SubmittedTask,
  type TaskRuntime,
} from "../dist/cjs/tasks/index.cjs";
import { ManualClock } from "../__tests__/fixtures/clock";
import { makeTempDir, writeConfig } from "../__tests__/fixtures/config";
import { startHttpFixture } from "../__tests__/fixtures/http-server";
import { TaskBoard } from "../__tests__/fixtures/task-tools";
import { fmtMs, median, percentile, roundRobin, type Row } from "./stats";

const CALLS = Number(process.env.BENCH_CALLS ?? 400);
const TASKS = Number(process.env.BENCH_RUNTIME_TASKS ?? 500);
const CONCURRENCY = [8, 32] as const;
/** PostgreSQL rows run only when one of these is set; each run gets its own schema, dropped afterwards. */
export const PG_URL = process.env.MCP_HARNESS_BENCH_POSTGRES_URL ?? process.env.MCP_HARNESS_TEST_POSTGRES_URL;
export const TOOLSET = { name: "build", submit_tool: "start_job", status_tool: "job_status", cancel_tool: "job_cancel" };
const POLL_INTERVAL = 5;
const submitted = new TaskSnapshot({ status: "working" });

interface Harness {
  configPath: string;
  runtime: TaskRuntime;
  toolkit: McpToolkit;
  submit: DynamicStructuredTool;
  clock: ManualClock;
}

/** Fresh database URLs; PostgreSQL schemas are remembered and dropped by `cleanup`. */
export class Databases {
  readonly #schemas: string[] = [];

  async sqlite(): Promise<string> {
    return `sqlite:${path.join(await makeTempDir("bench-task-runtime-db-"), "tasks.sqlite")}`;
  }

  postgres(base: string): string {
    const schema = `bench_rt_${randomBytes(5).toString("hex")}`;
    this.#schemas.push(schema);
    return `${base}${base.includes("?") ? "&" : "?"}schema=${schema}`;
  }

  async cleanup(base: string | undefined): Promise<void> {
    if (!base || this.#schemas.length === 0) return;
    const client = new PgClient({ connectionString: base });
    await client.connect();
    for (const schema of this.#schemas.splice(0)) await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
  }
}

/**
 * A runtime on `databaseUrl` and the agent toolkit attached to it. `plain` also exposes the same server under
 * a second name without task toolsets, so its `start_job` is an ordinary harness tool (the context row).
 */
async function harness(serverUrl: string, databaseUrl: string, opts: { maxConcurrentPolls?: number; plain?: boolean } = {}): Promise<Harness> {
  const dir = await makeTempDir("bench-task-runtime-");
  const configPath = await writeConfig(dir, {
    mcpTasks: { enabled: true, poll_interval_seconds: POLL_INTERVAL, max_concurrent_polls: opts.maxConcurrentPolls ?? 8 },
    mcpServers: {
      jobs: { type: "http", url: serverUrl, task_toolsets: [TOOLSET] },
      ...(opts.plain ? { plain: { type: "http", url: serverUrl } } : {}),
    },
  });
  const clock = new ManualClock(new Date("2026-03-01T12:00:00.000Z"));
  const runtime = await createTaskRuntime({ configPath, databaseUrl, clock: clock.now, logger: silentLogger });
  const toolkit = createMcpToolkit({ configPath, logger: silentLogger, dataDir: dir, taskRuntime: runtime });
  const submit = (await toolkit.getTools()).find((t) => t.name === "jobs_start_job");
  if (!submit) throw new Error("the submit wrapper jobs_start_job is missing");
  return { configPath, runtime, toolkit, submit, clock };
}

async function close(h: Harness): Promise<void> {
  await h.toolkit.close();
  await h.runtime.stop();
}

let callCounter = 0;

/** One agent-style tool call: a ToolCall invocation with the run's thread and user, as ToolNode makes it. */
async function invokeAsToolCall(tool: DynamicStructuredTool, thread: string): Promise<ToolMessage> {
  const id = `call-${callCounter++}`;
  const message = (await tool.invoke(
    { type: "tool_call", name: tool.name, id, args: { label: id } },
    { configurable: { thread_id: thread }, context: { user_id: "bench" } } as never,
  )) as ToolMessage;
  if (message.status === "error") throw new Error(`${tool.name} failed: ${String(message.content)}`);
  return message;
}

async function submitTask(h: Harness, thread: string): Promise<string> {
  const message = await invokeAsToolCall(h.submit, thread);
  return (JSON.parse(String(message.content)) as SubmittedTask).task_id;
}

export async function bareClient(url: string): Promise<Client> {
  const client = new Client({ name: "bench", version: "0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

/** `count` jobs of `work(i)` over `concurrency` workers; returns the elapsed milliseconds. */
export async function pooled(count: number, concurrency: number, work: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < count; i = next++) await work(i);
    }),
  );
  return performance.now() - t;
}

export function latencyRows(rows: Row[], label: string, ours: number[], base: number[]): void {
  rows.push(
    {
      figure: `${label}, median of ${ours.length}`,
      ours: fmtMs(median(ours)),
      baseline: fmtMs(median(base)),
      ratio: median(ours) / median(base),
      target: "(context)",
    },
    {
      figure: `  p95`,
      ours: fmtMs(percentile(ours, 0.95)),
      baseline: fmtMs(percentile(base, 0.95)),
      ratio: percentile(ours, 0.95) / percentile(base, 0.95),
      target: "(context)",
    },
  );
}

async function submitPrice(rows: Row[], serverUrl: string, dbs: Databases): Promise<void> {
  const sqlite = await harness(serverUrl, await dbs.sqlite(), { plain: true });
  const postgres = PG_URL ? await harness(serverUrl, dbs.postgres(PG_URL)) : null;
  const plain = (await sqlite.toolkit.getTools()).find((t) => t.name === "plain_start_job");
  if (!plain) throw new Error("the ordinary tool plain_start_job is missing");
  const bare = await bareClient(serverUrl);
  try {
    const sides: (() => Promise<unknown>)[] = [
      () => bare.callTool({ name: "start_job", arguments: { label: "bare" } }),
      () => submitTask(sqlite, "bench-thread"),
      () => invokeAsToolCall(plain, "bench-thread"),
      // The row the wrapper writes, alone: one insert on the same SQLite store.
      () =>
        sqlite.runtime.store.create({
          id: `mcp-task-${randomBytes(16).toString("hex")}`,
          userId: "bench",
          threadId: "bench-thread",
          serverName: "jobs",
          driverName: ORDINARY_MCP_TASK_DRIVER,
          remoteTaskId: `row-only-${callCounter++}`,
          taskName: TOOLSET.name,
          snapshot: submitted,
          driverData: { submit_tool: TOOLSET.submit_tool, status_tool: TOOLSET.status_tool, cancel_tool: TOOLSET.cancel_tool },
          nextPollAt: null,
        }),
    ];
    if (postgres) sides.push(() => submitTask(postgres, "bench-thread"));
    const [base, viaSqlite, viaPlain, rowOnly, viaPostgres] = await roundRobin(sides, CALLS);
    latencyRows(rows, "submit wrapper as a tool call, row in SQLite / bare client.callTool('start_job')", viaSqlite, base);
    if (viaPostgres) {
      latencyRows(rows, "submit wrapper as a tool call, row in PostgreSQL / bare client.callTool('start_job')", viaPostgres, base);
    }
    latencyRows(rows, "  context: ordinary harness start_job as a tool call (no task) / bare callTool", viaPlain, base);
    rows.push({
      figure: "  durability alone: submit wrapper (SQLite) / ordinary harness start_job, median",
      ours: fmtMs(median(viaSqlite)),
      baseline: fmtMs(median(viaPlain)),
      ratio: median(viaSqlite) / median(viaPlain),
      target: "(context)",
    });
    rows.push({
      figure: "  of which the row: store.create alone (SQLite) / ordinary harness start_job, median",
      ours: fmtMs(median(rowOnly)),
      baseline: fmtMs(median(viaPlain)),
      ratio: median(rowOnly) / median(viaPlain),
      target: "(context)",
    });
  } finally {
    await bare.close();
    await close(sqlite);
    if (postgres) await close(postgres);
  }
}

interface Tracking {
  /** Milliseconds of ticks until every task was completed (a runtime without a notifier). */
  pollMs: number;
  pollTicks: number;
  /** Milliseconds of ticks, on the same database, until every completed task was delivered. */
  notifyMs: number;
  notifyTicks: number;
}

/** Ticks `runtime` (one poll interval of fake time each) until `done` says so; every tick must go cleanly. */
async function tickUntil(h: { runtime: TaskRuntime; clock: ManualClock }, done: (totals: { applied: number; delivered: number }) => boolean): Promise<{ ms: number; ticks: number }> {
  const totals = { applied: 0, delivered: 0 };
  const limit = Math.ceil(TASKS / Math.min(...CONCURRENCY)) * 3 + 10;
  let ticks = 0;
  const t = performance.now();
  while (!done(totals)) {
    const report = await h.runtime.runOnce(h.clock.advance(POLL_INTERVAL));
    if (report.errors + report.retried + report.failed + report.discarded + report.notificationRetried + report.deadLettered > 0) {
      throw new Error(`tick ${ticks} did not go cleanly: ${JSON.stringify(report)}`);
    }
    totals.applied += report.applied;
    totals.delivered += report.delivered;
    ticks += 1;
    if (ticks > limit) throw new Error(`no progress after ${ticks} ticks (${JSON.stringify(totals)})`);
  }
  return { ms: performance.now() - t, ticks };
}

/**
 * `TASKS` tasks submitted through the wrapper (one thread each, not timed). The poll phase: a runtime without a
 * notifier ticks until every task is completed. Then the notify phase: a second runtime with a
 * `MemoryTaskNotifier` on the same database ticks until every task is delivered (each delivery is launched in
 * one tick and confirmed in a later one). Both runtimes share one clock.
 */
async function track(serverUrl: string, databaseUrl: string, concurrency: number): Promise<Tracking> {
  const polling = await harness(serverUrl, databaseUrl, { maxConcurrentPolls: concurrency });
  let notifying: TaskRuntime | null = null;
  try {
    const ids = new Array<string>(TASKS);
    await pooled(TASKS, 16, async (i) => {
      ids[i] = await submitTask(polling, `thread-${i}`);
    });
    const polls = await tickUntil(polling, (t) => t.applied >= TASKS);
    const notifier = new MemoryTaskNotifier();
    notifying = await createTaskRuntime({
      configPath: polling.configPath,
      databaseUrl,
      notifier,
      clock: polling.clock.now,
      logger: silentLogger,
    });
    const notes = await tickUntil({ runtime: notifying, clock: polling.clock }, (t) => t.delivered >= TASKS);
    // Checked after the timing: every task completed and delivered, exactly once each.
    for (const id of ids) {
      const task = await notifying.service.getTask(id, "bench");
      if (task?.status !== "completed" || task.notification_status !== "delivered") {
        throw new Error(`task ${id} ended ${task?.status ?? "missing"}/${task?.notification_status ?? "-"}`);
      }
    }
    const delivered = new Set(notifier.deliveries.map((d) => d.delivery.taskId));
    if (notifier.deliveries.length !== TASKS || delivered.size !== TASKS) throw new Error(`expected ${TASKS} deliveries, saw ${notifier.deliveries.length}`);
    return { pollMs: polls.ms, pollTicks: polls.ticks, notifyMs: notes.ms, notifyTicks: notes.ticks };
  } finally {
    await notifying?.stop();
    await close(polling);
  }
}

/** The floor: `TASKS` bare `job_status` calls at the same concurrency, on jobs of the same server. */
async function bareStatusRate(client: Client, jobIds: readonly string[], concurrency: number): Promise<number> {
  const elapsed = await pooled(TASKS, concurrency, (i) => client.callTool({ name: "job_status", arguments: { task_id: jobIds[i % jobIds.length] } }));
  return (TASKS / elapsed) * 1000;
}

const fmtRate = (perSecond: number) => `${perSecond.toFixed(0)} tasks/s`;

async function trackingThroughput(rows: Row[], serverUrl: string, board: TaskBoard, dbs: Databases): Promise<void> {
  const stores: { name: string; url: () => Promise<string> }[] = [{ name: "SQLite", url: () => dbs.sqlite() }];
  if (PG_URL) stores.push({ name: "PostgreSQL", url: async () => dbs.postgres(PG_URL) });
  const bare = await bareClient(serverUrl);
  for (let i = 0; i < 50; i += 1) await bare.callTool({ name: "start_job", arguments: { label: `floor-${i}` } });
  try {
    for (const store of stores) {
      for (const concurrency of CONCURRENCY) {
        // The floor is measured just before and just after the run and averaged, so drift hits both sides alike.
        const before = await bareStatusRate(bare, board.log.submits.slice(-TASKS), concurrency);
        const run = await track(serverUrl, await store.url(), concurrency);
        const after = await bareStatusRate(bare, board.log.submits.slice(-TASKS), concurrency);
        const floor = (before + after) / 2;
        const pollRate = (TASKS / run.pollMs) * 1000;
        const wholeRate = (TASKS / (run.pollMs + run.notifyMs)) * 1000;
        rows.push(
          {
            figure: `tracking ${TASKS} tasks, ${store.name}, max_concurrent_polls ${concurrency}: poll phase (${run.pollTicks} ticks) / bare job_status calls at concurrency ${concurrency}`,
            ours: fmtRate(pollRate),
            baseline: `${floor.toFixed(0)} calls/s`,
            ratio: pollRate / floor,
            target: "(context)",
          },
          {
            figure: `  whole lifecycle: poll phase + notify phase to delivered (${run.notifyTicks} more ticks) / the same bare calls`,
            ours: fmtRate(wholeRate),
            baseline: `${floor.toFixed(0)} calls/s`,
            ratio: wholeRate / floor,
            target: "(context)",
          },
        );
      }
    }
  } finally {
    await bare.close();
  }
}

export async function taskRuntimeFigures(rows: Row[]): Promise<void> {
  if (!PG_URL) console.log("task-runtime PostgreSQL rows skipped: set MCP_HARNESS_TEST_POSTGRES_URL (or MCP_HARNESS_BENCH_POSTGRES_URL)");
  const board = new TaskBoard();
  const http = await startHttpFixture({ name: "jobs", toolNames: ["echo"], taskBoard: board });
  const dbs = new Databases();
  try {
    await submitPrice(rows, http.url, dbs);
    await trackingThroughput(rows, http.url, board, dbs);
  } finally {
    await dbs.cleanup(PG_URL);
    await http.close();
  }
}
