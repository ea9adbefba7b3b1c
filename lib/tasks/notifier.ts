/**
 * The seam through which the task service delivers an event into the task's thread (SPEC §6.5): launch an
 * idempotent run on the thread, and look up how that run ended. The real notifiers (in-process graph,
 * LangGraph server) implement it in SPEC §7; `MemoryTaskNotifier` records deliveries for tests.
 */
import type { TaskEvent } from "./events";

/** One delivery attempt of one event version. */
export interface TaskDelivery {
  taskId: string;
  /** The task's owner: the run is started on their behalf. */
  userId: string;
  threadId: string;
  /** The run that submitted the task, when known. */
  runId: string | null;
  dispatchVersion: number;
  dispatchAttempt: number;
  event: TaskEvent;
}

export type NotificationRunStatus = "success" | "error" | "timeout" | "interrupted" | "pending" | "running";

export interface NotificationRun {
  status: NotificationRunStatus;
  error?: string;
}

export interface NotifierCallOptions {
  /** Aborted when the service stops. */
  signal?: AbortSignal;
}

/** What the service knows about a run it looks up: notifiers that cannot find a run by its id alone use it. */
export interface RunLookupOptions extends NotifierCallOptions {
  /** The thread the run was started on. */
  threadId?: string;
  /** The idempotency key the run was started with (the one `deliver` was given). */
  idempotencyKey?: string;
}

export interface TaskNotifier {
  /**
   * Starts a run on the thread that hands it the event. The same `idempotencyKey` must never start a second
   * run: it returns the first run's id. Throws `BusyThreadError` or `ThreadGoneError` as described there.
   */
  deliver(delivery: TaskDelivery, idempotencyKey: string, options?: NotifierCallOptions): Promise<{ runId: string }>;
  /** The run's outcome so far, or null when it does not exist (or is not this user's). */
  getRun(runId: string, userId: string, options?: RunLookupOptions): Promise<NotificationRun | null>;
}

/** The thread is running something else: try again later; this is not a failed delivery. */
export class BusyThreadError extends Error {
  constructor(message = "The thread is busy") {
    super(message);
    this.name = "BusyThreadError";
  }
}

/** The thread was deleted or belongs to someone else: the delivery can never succeed (dead letter at once). */
export class ThreadGoneError extends Error {
  constructor(message = "The thread no longer exists") {
    super(message);
    this.name = "ThreadGoneError";
  }
}

export interface RecordedDelivery {
  delivery: TaskDelivery;
  idempotencyKey: string;
  runId: string;
}

interface MemoryRun extends NotificationRun {
  userId: string;
}

/**
 * A notifier that records deliveries. Idempotent per key; threads can be marked busy, gone, or failing; every
 * run succeeds unless the test sets its status (`setRunStatus`) or the status new runs get (`setNewRunStatus`).
 */
export class MemoryTaskNotifier implements TaskNotifier {
  readonly deliveries: RecordedDelivery[] = [];
  readonly #byKey = new Map<string, string>();
  readonly #runs = new Map<string, MemoryRun>();
  readonly #busy = new Set<string>();
  readonly #gone = new Set<string>();
  readonly #failing = new Map<string, string>();
  #newRun: NotificationRun = { status: "success" };
  #counter = 0;

  async deliver(delivery: TaskDelivery, idempotencyKey: string): Promise<{ runId: string }> {
    const existing = this.#byKey.get(idempotencyKey);
    if (existing !== undefined) return { runId: existing };
    if (this.#gone.has(delivery.threadId)) throw new ThreadGoneError(`Thread '${delivery.threadId}' was not found`);
    if (this.#busy.has(delivery.threadId)) throw new BusyThreadError(`Thread '${delivery.threadId}' is busy`);
    const failure = this.#failing.get(delivery.threadId);
    if (failure !== undefined) throw new Error(failure);
    this.#counter += 1;
    const runId = `run-${this.#counter}`;
    this.#byKey.set(idempotencyKey, runId);
    this.#runs.set(runId, { ...this.#newRun, userId: delivery.userId });
    this.deliveries.push({ delivery: structuredClone(delivery), idempotencyKey, runId });
    return { runId };
  }

  async getRun(runId: string, userId: string): Promise<NotificationRun | null> {
    const run = this.#runs.get(runId);
    if (!run || run.userId !== userId) return null;
    return run.error === undefined ? { status: run.status } : { status: run.status, error: run.error };
  }

  /** Deliveries of one task, oldest first. */
  deliveriesOf(taskId: string): RecordedDelivery[] {
    return this.deliveries.filter((d) => d.delivery.taskId === taskId);
  }

  markBusy(threadId: string, busy = true): void {
    if (busy) this.#busy.add(threadId);
    else this.#busy.delete(threadId);
  }

  markGone(threadId: string, gone = true): void {
    if (gone) this.#gone.add(threadId);
    else this.#gone.delete(threadId);
  }

  /** Every launch on the thread fails with `message` (an ordinary, counted failure); null stops that. */
  failDeliveries(threadId: string, message: string | null): void {
    if (message === null) this.#failing.delete(threadId);
    else this.#failing.set(threadId, message);
  }

  /** The status of runs launched from now on (default: success). */
  setNewRunStatus(status: NotificationRunStatus, error?: string): void {
    this.#newRun = error === undefined ? { status } : { status, error };
  }

  setRunStatus(runId: string, status: NotificationRunStatus, error?: string): void {
    const run = this.#runs.get(runId);
    if (!run) throw new RangeError(`unknown run '${runId}'`);
    this.#runs.set(runId, error === undefined ? { status, userId: run.userId } : { status, error, userId: run.userId });
  }

  /** Forgets a run, as if it had been deleted (getRun answers null). */
  forgetRun(runId: string): void {
    this.#runs.delete(runId);
  }
}
