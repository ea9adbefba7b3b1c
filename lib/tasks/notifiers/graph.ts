/**
 * The in-process notifier (SPEC §7): delivers task events into a compiled agent graph that has a checkpointer,
 * as a run on the task's thread. A thread without a checkpoint is gone; a thread with a run in flight (one this
 * notifier started, or a checkpoint with nodes still to run) is busy; a delivery whose key is already on a
 * message of the thread is a no-op. Runs go on in the background: `deliver` returns once one has started.
 */
import { randomUUID } from "node:crypto";
import type { BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { withCallSignal } from "../../shared/abort";
import { silentLogger, type Logger } from "../../shared/logger";
import {
  BusyThreadError,
  ThreadGoneError,
  type NotificationRun,
  type NotificationRunStatus,
  type RunLookupOptions,
  type TaskDelivery,
  type TaskNotifier,
} from "../notifier";
import { notificationMarkerOf, notificationMessage } from "./message";

/** Runs remembered for `getRun`; older settled ones are forgotten (their key is still found on the thread). */
const MAX_REMEMBERED_RUNS = 10_000;

export interface NotificationInput {
  messages: BaseMessage[];
}

/** How a notification run is invoked: on the task's thread, for its owner, with nobody there to answer. */
export interface NotificationRunConfig {
  configurable: { thread_id: string };
  context: { user_id: string; non_interactive: true };
  signal?: AbortSignal;
}

/** What the notifier reads of a thread's latest checkpoint. */
export interface ThreadStateView {
  values: unknown;
  next: readonly string[];
  /** The pending tasks: an `error` on each one means the run that left them failed (none is running). */
  tasks?: readonly { error?: unknown; interrupts?: readonly unknown[] }[];
  /** Absent when the thread has no checkpoint. */
  createdAt?: string;
}

/** A checkpoint as the thread's history lists it. */
export interface ThreadCheckpointView extends ThreadStateView {
  /** `source` "input": the checkpoint a run's input started. */
  metadata?: { source?: string };
}

export interface ThreadStateReader {
  getState(config: RunnableConfig): Promise<ThreadStateView>;
  /** Newest first (a compiled graph has it): the run that took an event in is then judged by its own checkpoints. */
  getStateHistory?(config: RunnableConfig, options?: { limit?: number }): AsyncIterableIterator<ThreadCheckpointView>;
}

/**
 * A compiled `StateGraph` (it reads its own state) or a `createAgent` agent (whose `graph` does) with a
 * checkpointer, and a `messages` channel.
 */
export interface NotifiableGraph {
  invoke(input: NotificationInput, config: NotificationRunConfig): Promise<unknown>;
  getState?(config: RunnableConfig): Promise<ThreadStateView>;
  readonly graph?: ThreadStateReader;
}

export interface GraphNotifierOptions {
  /**
   * The agent graph, or a function returning it (the agent is usually built after the task runtime, whose
   * toolkit makes its tools). While it returns undefined, deliveries are put off like a busy thread's.
   */
  graph: NotifiableGraph | (() => NotifiableGraph | undefined);
  logger?: Logger;
  /**
   * Off by default. When set, a thread left with work to run, no error and no `interrupt()`, whose latest checkpoint is
   * older than this, counts as one whose run was killed with its process: it is not busy, and a notification run that
   * took an event in and stopped there failed (its event is retried). Only for graphs whose threads never wait
   * otherwise: set it above the longest step the graph takes (a model call, a tool call, a whole subgraph), and not
   * when runs stop at static breakpoints (`interruptBefore`/`interruptAfter`, also given per run), which leave a thread
   * looking the same. A graph compiled with such breakpoints keeps every such thread busy regardless.
   */
  staleRunSeconds?: number;
  /** The clock checkpoint ages are measured with (default `Date.now`). */
  now?: () => number;
}

interface GraphRun {
  userId: string;
  status: NotificationRunStatus;
  error?: string;
}

export interface GraphNotifier extends TaskNotifier {
  /** Resolves once no run this notifier started is in flight. */
  idle(): Promise<void>;
  /** Aborts the runs in flight and waits for them to settle; later deliveries are refused. */
  close(): Promise<void>;
}

function stateReader(graph: NotifiableGraph): ThreadStateReader {
  if (graph.graph && typeof graph.graph.getState === "function") return graph.graph;
  if (typeof graph.getState === "function") return graph as ThreadStateReader;
  throw new TypeError("the notifier's graph cannot read thread state (compile it with a checkpointer)");
}

/**
 * Whether the thread's last run failed: it left tasks to run, each holding the error it stopped with. Such a thread
 * is not busy (nothing runs on it): a new run continues from it. A thread at an interrupt, or with tasks still
 * running (or that a crash left without an error), has tasks without one.
 */
function lastRunFailed(state: ThreadStateView): boolean {
  const tasks = state.tasks ?? [];
  return (
    state.next.length > 0 &&
    tasks.length > 0 &&
    tasks.every((task) => task.error !== undefined && task.error !== null && (task.interrupts?.length ?? 0) === 0)
  );
}

/** How the run that took an event into the thread went: it succeeded only if it ran to its end. */
function landedRun(state: ThreadStateView): { status: "success" | "running" } | { status: "error"; error: string } {
  if (state.next.length === 0) return { status: "success" };
  return lastRunFailed(state) ? { status: "error", error: "Notification run failed (it stopped with an error)" } : { status: "running" };
}

/** Whether the graph (or an agent's graph) was compiled with static breakpoints, where threads wait looking like dead runs. */
function hasBreakpoints(graph: NotifiableGraph): boolean {
  const declared = (g: unknown): boolean => {
    const { interruptBefore, interruptAfter } = (g ?? {}) as { interruptBefore?: unknown; interruptAfter?: unknown };
    const set = (value: unknown) => value === "*" || (Array.isArray(value) && value.length > 0);
    return set(interruptBefore) || set(interruptAfter);
  };
  return declared(graph) || declared(graph.graph);
}

/** Whether any pending task waits at an `interrupt()` (a thread waiting for its user, not a dead run). */
function atInterrupt(state: ThreadStateView): boolean {
  return (state.tasks ?? []).some((task) => (task.interrupts?.length ?? 0) > 0);
}

/** How far back a thread's history is read for the run that took an event in (usually its last few checkpoints). */
const MAX_HISTORY_CHECKPOINTS = 1_000;

type Landed = ReturnType<typeof landedRun>;

/**
 * How the run that took the event with `key` in went. The thread's latest checkpoint tells that only while that run is
 * the thread's last one: a later run (the user's next message) may have failed, or be running. So that run's own
 * checkpoints are read, from the first that holds the event to the next run's input: one with nothing left to run
 * means it ran to its end; a next run's input without one means it stopped early (it failed, or was cancelled).
 */
async function landedRunOf(reader: ThreadStateReader, threadId: string, key: string, latest: ThreadStateView): Promise<Landed> {
  if (typeof reader.getStateHistory !== "function") return landedRun(latest);
  const newestFirst: ThreadCheckpointView[] = [];
  let before = false;
  for await (const checkpoint of reader.getStateHistory({ configurable: { thread_id: threadId } }, { limit: MAX_HISTORY_CHECKPOINTS })) {
    if (!holdsMarker(checkpoint, key)) {
      before = true;
      break;
    }
    newestFirst.push(checkpoint);
  }
  if (!before) return landedRun(latest);
  const ofRun = newestFirst.reverse();
  for (const [i, checkpoint] of ofRun.entries()) {
    if (i > 0 && checkpoint.metadata?.source === "input") return { status: "error", error: "Notification run failed (it stopped before its end)" };
    if (checkpoint.next.length === 0) return { status: "success" };
  }
  return landedRun(latest);
}

function holdsMarker(state: ThreadStateView, key: string): boolean {
  return messagesOf(state.values).some((m) => notificationMarkerOf(m)?.idempotency_key === key);
}

function messagesOf(values: unknown): readonly BaseMessage[] {
  const messages = (values as { messages?: unknown } | null)?.messages;
  return Array.isArray(messages) ? (messages as BaseMessage[]) : [];
}

class InProcessGraphNotifier implements GraphNotifier {
  readonly #graph: () => NotifiableGraph | undefined;
  readonly #logger: Logger;
  readonly #runs = new Map<string, GraphRun>();
  readonly #byKey = new Map<string, string>();
  /** Threads with a delivery being started or a run in flight. */
  readonly #threads = new Set<string>();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #close = new AbortController();
  readonly #staleRunMs: number | null;
  readonly #now: () => number;

  constructor(options: GraphNotifierOptions) {
    const { graph } = options;
    this.#graph = typeof graph === "function" ? graph : () => graph;
    this.#logger = options.logger ?? silentLogger;
    const { staleRunSeconds } = options;
    if (staleRunSeconds !== undefined && (!Number.isFinite(staleRunSeconds) || staleRunSeconds <= 0)) {
      throw new TypeError("staleRunSeconds must be a positive number of seconds");
    }
    this.#staleRunMs = staleRunSeconds === undefined ? null : staleRunSeconds * 1000;
    this.#now = options.now ?? Date.now;
  }

  /** Whether the thread's pending work was left by a run no one runs any more (see `staleRunSeconds`). */
  #abandoned(graph: NotifiableGraph, state: ThreadStateView): boolean {
    if (this.#staleRunMs === null || hasBreakpoints(graph)) return false;
    if (state.next.length === 0 || state.createdAt === undefined || atInterrupt(state) || lastRunFailed(state)) return false;
    const at = Date.parse(state.createdAt);
    return Number.isFinite(at) && this.#now() - at > this.#staleRunMs;
  }

  /** How the run that took the event in went, a run left unfinished by a dead process counted as failed. */
  async #landed(graph: NotifiableGraph, threadId: string, key: string, state: ThreadStateView): Promise<Landed> {
    const landed = await landedRunOf(stateReader(graph), threadId, key, state);
    if (landed.status !== "running" || !this.#abandoned(graph, state)) return landed;
    return { status: "error", error: `Notification run stopped before its end (no progress for over ${this.#staleRunMs! / 1000}s; its process ended)` };
  }

  async deliver(delivery: TaskDelivery, idempotencyKey: string): Promise<{ runId: string }> {
    if (this.#close.signal.aborted) throw new Error("The graph notifier is closed");
    const known = this.#byKey.get(idempotencyKey);
    if (known !== undefined) return { runId: known };
    const { threadId } = delivery;
    // Reserved before the first await, so two deliveries to one thread never both start a run.
    if (this.#threads.has(threadId)) throw new BusyThreadError(`Thread '${threadId}' is running a notification`);
    this.#threads.add(threadId);
    let started = false;
    try {
      const graph = this.#graph();
      if (graph === undefined) throw new BusyThreadError("The agent graph is not ready yet");
      const state = await stateReader(graph).getState({ configurable: { thread_id: threadId } });
      if (state.createdAt === undefined) throw new ThreadGoneError(`Thread '${threadId}' has no checkpoint`);
      if (holdsMarker(state, idempotencyKey)) {
        // A run started before a restart took this event in: nothing is sent again, and it counts as delivered only
        // once that run ran to its end.
        const landed = await this.#landed(graph, threadId, idempotencyKey, state);
        if (landed.status === "running") throw new BusyThreadError(`Thread '${threadId}' is still running the run that took this event in`);
        return { runId: this.#remember(idempotencyKey, { userId: delivery.userId, ...landed }) };
      }
      if (state.next.length > 0 && !lastRunFailed(state) && !this.#abandoned(graph, state)) {
        throw new BusyThreadError(`Thread '${threadId}' has a run in flight`);
      }
      const run: GraphRun = { userId: delivery.userId, status: "running" };
      const runId = this.#remember(idempotencyKey, run);
      const settled = withCallSignal(this.#close.signal, (signal) => {
        const config: NotificationRunConfig = {
          configurable: { thread_id: threadId },
          context: { user_id: delivery.userId, non_interactive: true },
          signal,
        };
        return graph.invoke({ messages: [notificationMessage(delivery, idempotencyKey)] }, config);
      })
        .then(
          () => {
            run.status = "success";
          },
          (err: unknown) => {
            run.status = "error";
            // Only the error's kind: its text may quote a provider's answer, and it is stored in the task row.
            run.error = `Notification run failed (${err instanceof Error ? err.name : typeof err})`;
            this.#logger.warn(`MCP task notification run failed (task_id=${delivery.taskId}): ${run.error}`);
          },
        )
        .finally(() => {
          this.#threads.delete(threadId);
          this.#inFlight.delete(settled);
        });
      this.#inFlight.add(settled);
      started = true;
      return { runId };
    } finally {
      if (!started) this.#threads.delete(threadId);
    }
  }

  async getRun(runId: string, userId: string, options: RunLookupOptions = {}): Promise<NotificationRun | null> {
    const run = this.#runs.get(runId);
    if (run) {
      if (run.userId !== userId) return null;
      return run.error === undefined ? { status: run.status } : { status: run.status, error: run.error };
    }
    // A run started before a restart: its message in the thread says it landed.
    const { threadId, idempotencyKey } = options;
    if (!threadId || !idempotencyKey) return null;
    const graph = this.#graph();
    // Not "not found" (which would start the event again under a new key): asked again later, once it can be looked up.
    if (graph === undefined) return { status: "running" };
    const state = await stateReader(graph).getState({ configurable: { thread_id: threadId } });
    const marker = messagesOf(state.values)
      .map((m) => notificationMarkerOf(m))
      .find((m) => m?.idempotency_key === idempotencyKey);
    if (!marker || marker.user_id !== userId) return null;
    return this.#landed(graph, threadId, idempotencyKey, state);
  }

  async idle(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  async close(): Promise<void> {
    this.#close.abort(new Error("The graph notifier is closed"));
    await this.idle();
  }

  #remember(key: string, run: GraphRun): string {
    const runId = randomUUID();
    this.#runs.set(runId, run);
    this.#byKey.set(key, runId);
    if (this.#runs.size > MAX_REMEMBERED_RUNS) {
      for (const [id, old] of this.#runs) {
        if (this.#runs.size <= MAX_REMEMBERED_RUNS) break;
        if (old.status === "running") continue;
        this.#runs.delete(id);
      }
      for (const [k, id] of this.#byKey) {
        if (this.#byKey.size <= MAX_REMEMBERED_RUNS) break;
        if (!this.#runs.has(id)) this.#byKey.delete(k);
      }
    }
    return runId;
  }
}

/** The in-process notifier: task events become runs of `graph` on the task's thread. */
export function createGraphNotifier(options: GraphNotifierOptions): GraphNotifier {
  return new InProcessGraphNotifier(options);
}
