/**
 * Background task worker figures (issue 13).
 *
 * Latency from a job's remote completion to the start of its notification run, at `poll_interval_seconds` 1:
 * `TASKS` tasks submitted by a real `createAgent` agent (scripted model, `MemorySaver`) through the submit
 * wrapper, one thread each, tracked by `startTaskWorker` on the real clock and delivered back into the same agent
 * by the in-process graph notifier. The jobs (task fixture over streamable HTTP, mode `held`) are released at
 * random moments; the start is measured by a `beforeAgent` middleware, the first node of the run. The baseline,
 * in the same run and on the same agent: a hand-written loop that calls `job_status` on a bare SDK client for
 * every open job once per second and invokes the agent on the job's thread when it completes. Each of its jobs
 * is released at the same moment as one of ours.
 *
 * Memory: RSS of one worker process (`task-worker-rss.ts`) tracking 1,000 and 10,000 active (never finishing)
 * tasks with the ordinary-tools driver over HTTP, against the same process with no tasks, after the same number of
 * ticks (several full poll rounds over 10,000).
 */
import { execFile } from "node:child_process";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createAgent, createMiddleware } from "langchain";
import { z } from "zod";
import { createMcpToolkit, silentLogger } from "./built";
import { ScriptedChatModel, type ScriptPolicy } from "../dist/cjs/agent/index.cjs";
import { createGraphNotifier, createTaskRuntime, migrate, notificationMarkerOf, openTaskDatabase } from "../dist/cjs/tasks/index.cjs";
import { startTaskWorker } from "../dist/cjs/worker/index.cjs";
import { makeTempDir, writeConfig } from "../__tests__/fixtures/config";
import { startHttpFixture } from "../__tests__/fixtures/http-server";
import { TSX_CJS_REGISTER } from "../__tests__/fixtures/stdio";
import { TaskBoard } from "../__tests__/fixtures/task-tools";
import { fmtMs, median, type Row } from "./stats";
import { bareClient, Databases, latencyRows, PG_URL, TOOLSET } from "./task-runtime";
import { seedRows } from "./tasks-seed";

const TASKS = Number(process.env.BENCH_WORKER_TASKS ?? 50);
/** The releases are spread uniformly over this window. */
const WINDOW_MS = Number(process.env.BENCH_WORKER_WINDOW_MS ?? 10_000);
const RSS_TASKS = (process.env.BENCH_WORKER_RSS_TASKS ?? "1000,10000").split(",").map(Number);
/** Full poll rounds over the largest size; every size runs that many ticks. */
const RSS_ROUNDS = Number(process.env.BENCH_WORKER_RSS_ROUNDS ?? 3);
const RSS_MAX_CONCURRENT_POLLS = 64;
const POLL_INTERVAL_SECONDS = 1;
const BASELINE_PREFIX = "Background job finished: ";
const RSS_SEEDED_AT = "2026-03-01T12:00:00.000Z";
const run = promisify(execFile);

const RunContext = z.object({ user_id: z.string(), non_interactive: z.boolean().optional() });

/** "submit <label>" starts a held job through the submit wrapper; anything else gets a one-word answer. */
const submitPolicy: ScriptPolicy = (messages, _tools, ctx) => {
  const last = messages.at(-1);
  if (last && HumanMessage.isInstance(last) && !notificationMarkerOf(last) && last.text.startsWith("submit ")) {
    const args = { label: last.text.slice("submit ".length), mode: "held" };
    return new AIMessage({ content: "", tool_calls: [{ name: `jobs_${TOOLSET.submit_tool}`, args, id: ctx.nextToolCallId(), type: "tool_call" }] });
  }
  return { content: "ok" };
};

/** When each thread's completion run started (`performance.now()`); a second start on a thread is an error. */
class RunStarts {
  readonly at = new Map<string, number>();
  #error: Error | null = null;
  #expected = Number.POSITIVE_INFINITY;
  #settle: (() => void) | null = null;

  record(thread: string | undefined): void {
    const now = performance.now();
    if (thread === undefined) this.#error ??= new Error("a completion run without a thread id");
    else if (this.at.has(thread)) this.#error ??= new Error(`a second completion run on thread ${thread}`);
    else this.at.set(thread, now);
    if (this.#error || this.at.size >= this.#expected) this.#settle?.();
  }

  /** Resolves once `count` threads have started a completion run; rejects on an error or after `timeoutMs`. */
  all(count: number, timeoutMs: number): Promise<void> {
    this.#expected = count;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#error ??= new Error(`${this.at.size} of ${count} completion runs started`);
        this.#settle?.();
      }, timeoutMs);
      this.#settle = () => {
        clearTimeout(timer);
        this.#settle = null;
        if (this.#error) reject(this.#error);
        else resolve();
      };
      if (this.#error || this.at.size >= count) this.#settle();
    });
  }
}

function buildAgent(model: ScriptedChatModel, tools: DynamicStructuredTool[], starts: RunStarts) {
  const recorder = createMiddleware({
    name: "CompletionRunStart",
    contextSchema: RunContext,
    beforeAgent: (state, runtime) => {
      const last = state.messages.at(-1);
      if (notificationMarkerOf(last) || last?.text.startsWith(BASELINE_PREFIX)) starts.record(runtime.configurable?.thread_id);
      return undefined;
    },
  });
  return createAgent({ model, tools, contextSchema: RunContext, checkpointer: new MemorySaver(), middleware: [recorder] });
}

type Agent = ReturnType<typeof buildAgent>;

const runConfig = (thread: string) => ({ configurable: { thread_id: thread }, context: { user_id: "bench" } });

interface Job {
  thread: string;
  remoteId: string;
}

/**
 * The hand-written poller: every `intervalMs` (after the last round ended), `job_status` for every open job on a
 * bare client, concurrently; a completed job's thread gets an agent run, started without waiting for it.
 */
function startBarePoller(client: Client, jobs: readonly Job[], agent: Agent, intervalMs: number) {
  const open = new Map(jobs.map((j) => [j.remoteId, j.thread]));
  const runs: Promise<unknown>[] = [];
  const state = { rounds: 0, stopped: false };
  const loop = (async () => {
    while (!state.stopped && open.size > 0) {
      await Promise.all(
        [...open].map(async ([remoteId, thread]) => {
          const result = await client.callTool({ name: TOOLSET.status_tool, arguments: { task_id: remoteId } });
          const status = result.structuredContent as { status: string; result?: unknown };
          if (status.status !== "completed") return;
          open.delete(remoteId);
          runs.push(agent.invoke({ messages: [new HumanMessage(`${BASELINE_PREFIX}${JSON.stringify(status.result)}`)] }, runConfig(thread)));
        }),
      );
      state.rounds += 1;
      await sleep(intervalMs);
    }
  })();
  return {
    get rounds() {
      return state.rounds;
    },
    async stop(): Promise<void> {
      state.stopped = true;
      await loop;
      await Promise.all(runs);
    },
  };
}

async function waitFor(what: string, ready: () => boolean, timeoutMs = 120_000): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!ready()) {
    if (performance.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

interface LatencyRun {
  ours: number[];
  base: number[];
}

/** One run: ours and the baseline side by side, `TASKS` jobs each, released in pairs at random moments. */
async function completionLatency(
  serverUrl: string,
  board: TaskBoard,
  databaseUrl: string,
  tag: string,
  opts: { tickMs: number; maxConcurrentPolls: number },
): Promise<LatencyRun> {
  const dir = await makeTempDir("bench-task-worker-");
  const configPath = await writeConfig(dir, {
    mcpTasks: { enabled: true, poll_interval_seconds: POLL_INTERVAL_SECONDS, max_concurrent_polls: opts.maxConcurrentPolls },
    mcpServers: { jobs: { type: "http", url: serverUrl, task_toolsets: [TOOLSET] } },
  });
  const starts = new RunStarts();
  let agent: Agent | undefined;
  const notifier = createGraphNotifier({ graph: () => agent });
  const runtime = await createTaskRuntime({ configPath, databaseUrl, notifier, logger: silentLogger });
  const toolkit = createMcpToolkit({ configPath, logger: silentLogger, dataDir: dir, taskRuntime: runtime });
  const client = await bareClient(serverUrl);
  agent = buildAgent(new ScriptedChatModel([], { fallback: submitPolicy }), await toolkit.getTools(), starts);
  const built = agent;
  let poller: ReturnType<typeof startBarePoller> | null = null;
  let worker: ReturnType<typeof startTaskWorker> | null = null;
  try {
    const ours: Job[] = [];
    const base: Job[] = [];
    for (let i = 0; i < TASKS; i += 1) {
      const thread = `${tag}-ours-${i}`;
      await built.invoke({ messages: [new HumanMessage(`submit ${thread}`)] }, runConfig(thread));
      const remoteId = board.log.submits.at(-1)!;
      if (board.jobs.get(remoteId)?.label !== thread) throw new Error(`the agent did not submit a job for ${thread}`);
      ours.push({ thread, remoteId });
      const baseThread = `${tag}-base-${i}`;
      const started = await client.callTool({ name: TOOLSET.submit_tool, arguments: { label: baseThread, mode: "held" } });
      base.push({ thread: baseThread, remoteId: (started.structuredContent as { task_id: string }).task_id });
    }
    let applied = 0;
    worker = startTaskWorker({
      runtime,
      intervalMs: opts.tickMs,
      logger: silentLogger,
      onTick: (report) => {
        applied += report.applied;
      },
      onError: (err) => console.error("task worker tick failed:", err),
    });
    poller = startBarePoller(client, base, built, POLL_INTERVAL_SECONDS * 1000);
    // Warm: every task polled once by the worker, one full round by the baseline.
    const warm = poller;
    await waitFor("the first poll round", () => applied >= TASKS && warm.rounds >= 1);

    const released = new Map<string, number>();
    const done = starts.all(2 * TASKS, WINDOW_MS + 120_000);
    const timers = ours.map((job, i) => {
      const pair = [job, base[i]];
      return setTimeout(() => {
        for (const { thread, remoteId } of pair) {
          released.set(thread, performance.now());
          board.release(remoteId);
        }
      }, Math.random() * WINDOW_MS);
    });
    try {
      await done;
    } finally {
      timers.forEach(clearTimeout);
    }
    const latency = (jobs: Job[]) =>
      jobs.map(({ thread }) => {
        const ms = starts.at.get(thread)! - released.get(thread)!;
        if (!(ms > 0)) throw new Error(`the completion run on ${thread} started before its job was released`);
        return ms;
      });
    return { ours: latency(ours), base: latency(base) };
  } finally {
    await poller?.stop();
    await worker?.stop();
    await notifier.idle();
    await notifier.close();
    await Promise.all([toolkit.close(), client.close()]);
    await runtime.stop();
  }
}

async function latencyFigures(rows: Row[], serverUrl: string, board: TaskBoard, dbs: Databases): Promise<void> {
  const interval = `${POLL_INTERVAL_SECONDS} s`;
  const baseline = `bare ${interval} job_status poller`;
  const runs: { label: string; store: () => Promise<string>; tickMs: number; maxConcurrentPolls: number }[] = [
    {
      label: `remote completion → notification run start, SQLite, worker tick ${interval} (the CLI worker's default: poll_interval_seconds), max_concurrent_polls 8 / ${baseline}`,
      store: () => dbs.sqlite(),
      tickMs: POLL_INTERVAL_SECONDS * 1000,
      maxConcurrentPolls: 8,
    },
  ];
  if (PG_URL) {
    const pg = PG_URL;
    runs.push({
      label: `  the same on PostgreSQL (worker tick ${interval}, max_concurrent_polls 8) / ${baseline}`,
      store: async () => dbs.postgres(pg),
      tickMs: POLL_INTERVAL_SECONDS * 1000,
      maxConcurrentPolls: 8,
    });
  }
  runs.push(
    { label: `  context: SQLite, worker tick 100 ms, max_concurrent_polls 8 / ${baseline}`, store: () => dbs.sqlite(), tickMs: 100, maxConcurrentPolls: 8 },
    {
      label: `  context: SQLite, worker tick ${interval}, max_concurrent_polls 64 / ${baseline}`,
      store: () => dbs.sqlite(),
      tickMs: POLL_INTERVAL_SECONDS * 1000,
      maxConcurrentPolls: 64,
    },
  );
  for (const [i, r] of runs.entries()) {
    const { ours, base } = await completionLatency(serverUrl, board, await r.store(), `run${i}`, r);
    latencyRows(rows, r.label, ours, base);
    rows.push({
      figure: `  our median / poll_interval_seconds (${interval})`,
      ours: fmtMs(median(ours)),
      baseline: fmtMs(POLL_INTERVAL_SECONDS * 1000),
      ratio: median(ours) / (POLL_INTERVAL_SECONDS * 1000),
      target: "(context)",
    });
  }
}

interface WorkerMemory {
  rss: number;
  heapUsed: number;
  ticks: number;
  applied: number;
  ms: number;
}

/**
 * A SQLite file with `active` working rows (remote ids `due-0000000`, …), held jobs with those ids on the board,
 * and one worker process (`task-worker-rss.ts`) ticking `ticks` times over them.
 */
async function workerMemory(serverUrl: string, board: TaskBoard, active: number, ticks: number): Promise<WorkerMemory> {
  const dir = await makeTempDir("bench-task-worker-rss-");
  const databaseUrl = `sqlite:${path.join(dir, "tasks.sqlite")}`;
  const { db } = await openTaskDatabase({ url: databaseUrl });
  await migrate(db);
  await seedRows(db, active, 0, new Date(RSS_SEEDED_AT), {
    submit_tool: TOOLSET.submit_tool,
    status_tool: TOOLSET.status_tool,
    cancel_tool: TOOLSET.cancel_tool,
  });
  await db.close();
  for (let i = 0; i < active; i += 1) {
    const id = `due-${String(i).padStart(7, "0")}`;
    if (!board.jobs.has(id)) board.start({ label: id, mode: "held", remote_id: id });
  }
  const configPath = await writeConfig(dir, {
    mcpTasks: { enabled: true, poll_interval_seconds: POLL_INTERVAL_SECONDS, max_concurrent_polls: RSS_MAX_CONCURRENT_POLLS },
    mcpServers: { jobs: { type: "http", url: serverUrl, task_toolsets: [TOOLSET] } },
  });
  const script = path.join(__dirname, "task-worker-rss.ts");
  // Without warnings: one per tick (more than 10 abort listeners on a tick's signal, one per `Send`) and per
  // request (undici's listener on the SDK transport's signal, dropped when the request is collected) flood stderr.
  const args = ["--expose-gc", "--no-warnings", "--require", TSX_CJS_REGISTER, script, configPath, databaseUrl, String(ticks), RSS_SEEDED_AT];
  const { stdout } = await run(process.execPath, args);
  const memory = JSON.parse(stdout.trim()) as WorkerMemory;
  const expected = ticks * Math.min(active, RSS_MAX_CONCURRENT_POLLS);
  if (memory.applied !== expected) throw new Error(`the worker over ${active} tasks applied ${memory.applied} polls in ${ticks} ticks, expected ${expected}`);
  return memory;
}

const fmtMb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/**
 * Every size runs the same number of ticks (`RSS_ROUNDS` full rounds over the largest size): RSS grows with the
 * ticks a process has run whatever it tracks, so equal work per tick and equal ticks leave the task count as the
 * only difference.
 */
async function memoryFigures(rows: Row[], serverUrl: string, board: TaskBoard): Promise<void> {
  const ticks = RSS_ROUNDS * Math.ceil(Math.max(...RSS_TASKS) / RSS_MAX_CONCURRENT_POLLS);
  const runs = [{ active: 0, memory: await workerMemory(serverUrl, board, 0, ticks) }];
  for (const active of RSS_TASKS) runs.push({ active, memory: await workerMemory(serverUrl, board, active, ticks) });
  for (const { active, memory } of runs) {
    const rounds = active > 0 ? `, ${(memory.applied / active).toFixed(1)} full poll rounds` : "";
    console.log(`worker with ${active} active tasks: ${memory.ticks} ticks${rounds} in ${(memory.ms / 1000).toFixed(1)} s, heap used after GC ${fmtMb(memory.heapUsed)}, RSS ${fmtMb(memory.rss)}`);
  }
  const how = `${ticks} ticks each (${RSS_ROUNDS} full poll rounds at ${Math.max(...RSS_TASKS).toLocaleString("en")}); max_concurrent_polls ${RSS_MAX_CONCURRENT_POLLS}, tick interval 0, injected clock +${POLL_INTERVAL_SECONDS} s a tick: every row due every tick`;
  const name = (active: number) => (active === 0 ? "idle worker (0 tasks)" : `${active.toLocaleString("en")} active tasks`);
  for (let i = 1; i < runs.length; i += 1) {
    const [previous, current] = [runs[i - 1], runs[i]];
    rows.push({
      figure: `worker process RSS, ${name(current.active)} / ${name(previous.active)}${i === 1 ? ` (after ${how})` : ""}`,
      ours: fmtMb(current.memory.rss),
      baseline: fmtMb(previous.memory.rss),
      ratio: current.memory.rss / previous.memory.rss,
      target: "(context)",
    });
  }
  const [smallest, largest] = [runs[1], runs[runs.length - 1]];
  rows.push({
    figure: `  heap used after GC, ${name(largest.active)} / ${name(smallest.active)}`,
    ours: fmtMb(largest.memory.heapUsed),
    baseline: fmtMb(smallest.memory.heapUsed),
    ratio: largest.memory.heapUsed / smallest.memory.heapUsed,
    target: "(context)",
  });
}

export async function taskWorkerFigures(rows: Row[]): Promise<void> {
  if (!PG_URL) console.log("task-worker PostgreSQL rows skipped: set MCP_HARNESS_TEST_POSTGRES_URL (or MCP_HARNESS_BENCH_POSTGRES_URL)");
  const board = new TaskBoard();
  const http = await startHttpFixture({ name: "jobs", toolNames: ["echo"], taskBoard: board });
  const dbs = new Databases();
  try {
    await latencyFigures(rows, http.url, board, dbs);
    await memoryFigures(rows, http.url, board);
  } finally {
    await dbs.cleanup(PG_URL);
    await http.close();
  }
}
