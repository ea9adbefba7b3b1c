/**
 * `createTaskWorkerGraph` (SPEC §7): one tick of the background task loop as a compiled LangGraph graph —
 * cancellations → claim → one `Send` per claimed task (poll and apply, fenced) → notifications. Its state
 * reports what the tick did. The graph holds no task rows in its state: a claimed row stays in this process
 * (keyed by the tick) and the `Send` carries only its id, so no remote id or driver data reaches a checkpoint.
 * On a runtime with `mcpTasks.enabled` false the graph still builds (Studio shows it; a `notifier` option throws),
 * and every run fails at its first node with `McpTasksDisabledError`.
 */
import { randomUUID } from "node:crypto";
import { Annotation, END, Overwrite, Send, START, StateGraph } from "@langchain/langgraph";
import type { McpTaskService, PollOutcome, TaskNotifier, TaskRecord, TaskRuntime } from "../tasks";
import { silentLogger, type Logger } from "../shared/logger";
import { cutCodePoints } from "../tasks/payload";

/** Bound on an error text written to a log line. */
const LOGGED_ERROR_MAX_CHARS = 500;

/** The counters of one tick, as `McpTaskService.runOnce` reports them. */
export const TICK_COUNTERS = [
  "cancelled",
  "cancelRetried",
  "claimed",
  "applied",
  "discarded",
  "retried",
  "failed",
  "notified",
  "delivered",
  "notificationRetried",
  "deferred",
  "deadLettered",
  "errors",
] as const;
export type TickCounter = (typeof TICK_COUNTERS)[number];

/** What one claimed task's poll came to (no error text, no remote id). */
export interface TaskPollSummary {
  taskId: string;
  outcome: PollOutcome["outcome"] | "error";
  status?: string;
}

/** The state a tick ends with. */
export type TaskWorkerTickReport = Record<TickCounter, number> & {
  /** The tick's time (ISO), the `now` input when given. */
  tickAt: string;
  polls: TaskPollSummary[];
  /**
   * A phase took a full batch (`max_concurrent_polls` cancels, polls or notifications): more may be due now, so
   * `startTaskWorker` runs the next tick at once instead of after its interval.
   */
  backlog: boolean;
};

const counter = () => Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 });

export const TaskWorkerState = Annotation.Root({
  /** Input: the tick's time (ISO). Without it the runtime's clock. Cleared when the tick ends. */
  now: Annotation<string | null>({ reducer: (_a, b) => b, default: () => null }),
  tickAt: Annotation<string>({ reducer: (_a, b) => b, default: () => "" }),
  /** This invocation's id: the key of its claimed rows in this process. */
  tick: Annotation<string>({ reducer: (_a, b) => b, default: () => "" }),
  cancelled: counter(),
  cancelRetried: counter(),
  claimed: counter(),
  applied: counter(),
  discarded: counter(),
  retried: counter(),
  failed: counter(),
  notified: counter(),
  delivered: counter(),
  notificationRetried: counter(),
  deferred: counter(),
  deadLettered: counter(),
  errors: counter(),
  polls: Annotation<TaskPollSummary[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
  backlog: Annotation<boolean>({ reducer: (a, b) => a || b, default: () => false }),
});
type State = typeof TaskWorkerState.State;
type Update = typeof TaskWorkerState.Update;

interface PollInput {
  tick: string;
  taskId: string;
}

export interface TaskWorkerGraphOptions {
  runtime: TaskRuntime;
  /** Installed on the runtime's service (which must not already deliver through another notifier). */
  notifier?: TaskNotifier;
  logger?: Logger;
}

const errorText = (err: unknown): string => cutCodePoints(err instanceof Error ? err.message || err.name : String(err), LOGGED_ERROR_MAX_CHARS);

/** Every counter back to zero and the poll list emptied: a thread's previous tick does not add up into this one. */
function resetCounters(): Update {
  const update: Record<string, unknown> = { polls: new Overwrite([]) };
  for (const name of TICK_COUNTERS) update[name] = new Overwrite(0);
  return update as Update;
}

/** Graphs built on a runtime with `mcpTasks.enabled` false: every run fails, so `startTaskWorker` refuses them. */
const onDisabledRuntime = new WeakSet<object>();

/** Whether `graph` was built on a runtime with tasks disabled (each of its runs fails). */
export function builtOnDisabledRuntime(graph: object): boolean {
  return onDisabledRuntime.has(graph);
}

export function createTaskWorkerGraph(options: TaskWorkerGraphOptions) {
  const { runtime } = options;
  // Read when a node runs: with tasks disabled it is a run that fails (McpTasksDisabledError), not the graph's build.
  const service = (): McpTaskService => runtime.service;
  const logger = options.logger ?? silentLogger;
  if (options.notifier) service().useNotifier(options.notifier);
  /** Rows claimed by ticks of this process that are still being polled, per tick. */
  const claims = new Map<string, { at: Date; rows: Map<string, TaskRecord> }>();
  const tickTime = (state: State): Date => (state.now ? new Date(state.now) : runtime.store.now());
  /** Every phase claims at most this many rows; a phase that handled as many may have left more due. */
  const full = (handled: number): boolean => handled >= runtime.settings.max_concurrent_polls;

  const cancellations = async (state: State): Promise<Update> => {
    const at = tickTime(state);
    if (Number.isNaN(at.getTime())) throw new RangeError("the worker graph's `now` must be an ISO date-time");
    const report = await service().runCancellations(at);
    return {
      ...resetCounters(),
      tick: randomUUID(),
      tickAt: at.toISOString(),
      cancelled: new Overwrite(report.cancelled),
      cancelRetried: new Overwrite(report.cancelRetried),
      errors: new Overwrite(report.errors),
      backlog: new Overwrite(full(report.cancelled + report.cancelRetried + report.errors)),
    } as Update;
  };

  const claim = async (state: State): Promise<Update> => {
    const at = new Date(state.tickAt);
    const rows = await service().claimDuePolls(at);
    if (rows.length > 0) claims.set(state.tick, { at, rows: new Map(rows.map((row) => [row.id, row])) });
    return { claimed: rows.length, backlog: full(rows.length) };
  };

  const fanOut = (state: State): Send[] | "notifications" => {
    const rows = claims.get(state.tick)?.rows;
    if (!rows || rows.size === 0) return "notifications";
    return [...rows.keys()].map((taskId) => new Send("poll", { tick: state.tick, taskId } satisfies PollInput));
  };

  const poll = async (input: PollInput): Promise<Update> => {
    const claimed = claims.get(input.tick);
    const record = claimed?.rows.get(input.taskId);
    if (!claimed || !record) {
      // A resumed run in another process: the claim's lease expires and another tick polls it.
      logger.warn(`MCP task poll lost its claimed row (task_id=${input.taskId}); the lease will expire for recovery`);
      return { errors: 1, polls: [{ taskId: input.taskId, outcome: "error" }] };
    }
    try {
      const result = await service().pollClaimed(record, claimed.at);
      const counted: Record<PollOutcome["outcome"], TickCounter> = {
        applied: "applied",
        "discarded-by-fence": "discarded",
        retried: "retried",
        deferred: "retried",
        "driver-missing": "retried",
        "failed-protocol": "failed",
      };
      const summary: TaskPollSummary = { taskId: result.taskId, outcome: result.outcome };
      if (result.outcome === "applied") summary.status = result.status;
      return { [counted[result.outcome]]: 1, polls: [summary] } as Update;
    } catch (err) {
      if (service().stopped) throw err;
      logger.error(`Unexpected MCP task poll failure (task_id=${input.taskId}); the lease will expire for recovery: ${errorText(err)}`);
      return { errors: 1, polls: [{ taskId: input.taskId, outcome: "error" }] };
    } finally {
      claimed.rows.delete(input.taskId);
      if (claimed.rows.size === 0) claims.delete(input.tick);
    }
  };

  const notifications = async (state: State): Promise<Update> => {
    claims.delete(state.tick);
    const report = await service().runNotifications(state.now ? new Date(state.now) : runtime.store.now());
    return {
      notified: report.notified,
      delivered: report.delivered,
      notificationRetried: report.notificationRetried,
      deferred: report.deferred,
      deadLettered: report.deadLettered,
      errors: report.errors,
      backlog: full(report.notified + report.delivered + report.notificationRetried + report.deferred + report.deadLettered + report.errors),
      now: null,
    };
  };

  const graph = new StateGraph(TaskWorkerState)
    .addNode("cancellations", cancellations)
    .addNode("claim", claim)
    .addNode("poll", poll as unknown as (state: State) => Promise<Update>)
    .addNode("notifications", notifications)
    .addEdge(START, "cancellations")
    .addEdge("cancellations", "claim")
    .addConditionalEdges("claim", fanOut, ["poll", "notifications"])
    .addEdge("poll", "notifications")
    .addEdge("notifications", END)
    .compile({ name: "mcp_task_worker" });
  if (!runtime.enabled) onDisabledRuntime.add(graph);
  return graph;
}

export type TaskWorkerGraph = ReturnType<typeof createTaskWorkerGraph>;

/** The report of a finished tick, from the graph's output state. */
export function tickReport(state: State): TaskWorkerTickReport {
  const report = { tickAt: state.tickAt, polls: state.polls, backlog: state.backlog } as TaskWorkerTickReport;
  for (const name of TICK_COUNTERS) report[name] = state[name];
  return report;
}

/** Whether the tick did anything (claimed, applied, cancelled, notified, failed, …). */
export function tickChangedSomething(report: Record<TickCounter, number>): boolean {
  return TICK_COUNTERS.some((name) => report[name] > 0);
}
