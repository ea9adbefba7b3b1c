/**
 * `McpTaskService` (SPEC §6.4–§6.5, inventory §M 98–111): submits remote tasks and persists them (cancelling
 * the remote task when persistence fails), and runs the background phases — remote cancellations, claimed
 * polls, notifications. Each phase is public so a graph can run one node per phase and one `Send` per claimed
 * task; `runOnce` composes them. One task's failure never touches another's.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { McpTasksSettings } from "../config";
import { DeadlineExceededError, onAbort, withDeadline } from "../shared/deadline";
import { silentLogger, type Logger } from "../shared/logger";
import { notificationIdempotencyKey, type TaskEvent } from "./events";
import {
  MCP_TASK_ERROR_MAX_CHARS,
  MCP_TASK_LEASE_OWNER_MAX_LENGTH,
  MCP_TASK_MAX_NOTIFICATION_ATTEMPTS,
  MCP_TASK_POLL_AFTER_MAX_SECONDS,
  MCP_TASK_POLL_AFTER_MIN_SECONDS,
  MCP_TASK_REMOTE_ID_MAX_LENGTH,
  McpTaskAnswerUnsettledError,
  McpTaskProtocolError,
  TaskSnapshot,
  TaskStatus,
  taskReferenceFromRecord,
  type DriverCallOptions,
  type McpTaskDriver,
  type McpTaskDriverRegistry,
  type TaskReference,
  type TaskSubmission,
  type TaskSubmitRequest,
} from "./model";
import { BusyThreadError, ThreadGoneError, type TaskDelivery, type TaskNotifier } from "./notifier";
import { cutCodePoints, normalizeSnapshot, type PayloadBounds } from "./payload";
import { DuplicateMcpRemoteTaskError, type TaskStore } from "./store/task-store";
import type { TaskRecord } from "./store/records";
import { neutralizeUntrustedTags } from "./untrusted";

/** Exponents above this cannot change a capped backoff any more; it also keeps `2 ** n` finite. */
const MAX_BACKOFF_EXPONENT = 16;
/** A call under a lease stops this long before the lease ends (a tenth of it, at least a second). */
const LEASE_MARGIN_FRACTION = 0.1;
const MIN_LEASE_MARGIN_MS = 1_000;
/** How many active tasks `cancelMatchingTask` looks at, and how many names its ambiguity error lists. */
const MATCH_SCAN_LIMIT = 50;
const AMBIGUOUS_NAMES_SHOWN = 5;
/** Bound on an error text written to a log line. */
const LOGGED_ERROR_MAX_CHARS = 500;

export interface McpTaskServiceOptions {
  store: TaskStore;
  drivers: McpTaskDriverRegistry;
  settings: McpTasksSettings;
  /** Without one, the notification phase does nothing. */
  notifier?: TaskNotifier;
  /** Default: the store's clock. Remote-call completion times are read from it. */
  clock?: () => Date;
  /** Default `<hostname>:<random hex>`; at most 128 characters. */
  leaseOwner?: string;
  logger?: Logger;
}

export interface SubmitOptions {
  /** The caller's signal (the agent run's): aborting it stops the remote submit, or compensates a persist. */
  signal?: AbortSignal;
  /** Handed to the driver's submit (the agent run's runtime, for its credentials). */
  runtime?: unknown;
}

export type PollOutcome =
  | { outcome: "applied"; taskId: string; status: TaskStatus }
  | { outcome: "discarded-by-fence"; taskId: string }
  | { outcome: "retried"; taskId: string; error: string; nextPollAt: Date }
  /** The answer may have been about another job (see `McpTaskAnswerUnsettledError`): the task is polled again, unchanged. */
  | { outcome: "deferred"; taskId: string; nextPollAt: Date }
  | { outcome: "failed-protocol"; taskId: string; error: string }
  | { outcome: "driver-missing"; taskId: string; driverName: string; nextPollAt: Date };

export interface CancellationReport {
  /** Remote cancels whose terminal answer was applied. */
  cancelled: number;
  /** Remote cancels that failed and were released for a later attempt. */
  cancelRetried: number;
  /** Unexpected failures (the lease expires for recovery). */
  errors: number;
}

export interface NotificationReport {
  /** Runs launched on threads. */
  notified: number;
  /** Launched runs confirmed successful: the event is delivered. */
  delivered: number;
  /** Busy threads, failed launches, failed or missing runs: tried again later. */
  notificationRetried: number;
  /** Runs still going, looked at again later. */
  deferred: number;
  deadLettered: number;
  errors: number;
}

export interface PollReport {
  claimed: number;
  applied: number;
  discarded: number;
  retried: number;
  /** Protocol failures: the task is terminally failed. */
  failed: number;
  errors: number;
}

export interface TickReport extends CancellationReport, NotificationReport, Omit<PollReport, "errors"> {}

/** No registered driver, no matching task, or a task that vanished. */
export class McpTaskLookupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "McpTaskLookupError";
  }
}

/** More than one active task matches a cancel request. */
export class AmbiguousMcpTaskError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AmbiguousMcpTaskError";
  }
}

/** A poll deferred for longer than a lease (see `#pollClaimed`): one text, however long, as the degraded event holds it. */
const HELD_BACK_ERROR =
  "Tracking is held back: the task's status cannot be checked while a call to the same stdio MCP server process " +
  "has been unanswered for longer than lease_seconds";

/** A cancel deferred for longer than a lease (see `#cancelClaimed`): one text, however long, as for polls. */
const CANCEL_HELD_BACK_ERROR =
  "Cancellation is held back: the task cannot be cancelled while a call to the same stdio MCP server process " +
  "has been unanswered for longer than lease_seconds";

/** The service was stopped: in-flight remote calls were abandoned and no further work is accepted. */
export class McpTaskServiceStoppedError extends Error {
  constructor() {
    super("The MCP task service has been stopped");
    this.name = "McpTaskServiceStoppedError";
  }
}

const leftRunning = new WeakSet<object>();

/**
 * Whether a failed submit left a job running on the server: its row could not be stored and the compensating
 * cancel failed too, so nothing tracks that job. The error itself stays the one the store raised.
 */
export function submitLeftRemoteTaskRunning(err: unknown): boolean {
  return typeof err === "object" && err !== null && leftRunning.has(err);
}

export function defaultLeaseOwner(): string {
  const suffix = `:${randomUUID().replace(/-/g, "")}`;
  return `${hostname().slice(0, MCP_TASK_LEASE_OWNER_MAX_LENGTH - suffix.length)}${suffix}`;
}

/** An error's message (else its name); read by shape, since drivers' native errors may come from another realm. */
const errorText = (err: unknown): string => {
  if (typeof err === "string") return err || "Error";
  const { message, name } = (err ?? {}) as { message?: unknown; name?: unknown };
  if (typeof message === "string" && message !== "") return message;
  return typeof name === "string" && name !== "" ? name : "Error";
};
const boundedError = (err: unknown): string => cutCodePoints(errorText(err), MCP_TASK_ERROR_MAX_CHARS);
const loggedError = (err: unknown): string => cutCodePoints(errorText(err), LOGGED_ERROR_MAX_CHARS);
const addSeconds = (date: Date, seconds: number): Date => new Date(date.getTime() + seconds * 1000);

export class McpTaskService {
  readonly store: TaskStore;
  readonly drivers: McpTaskDriverRegistry;
  readonly settings: Readonly<McpTasksSettings>;
  readonly leaseOwner: string;
  #notifier: TaskNotifier | undefined;
  readonly #clock: () => Date;
  readonly #logger: Logger;
  readonly #bounds: PayloadBounds;
  readonly #stop = new AbortController();
  readonly #inFlight = new Set<Promise<unknown>>();
  #stopped: Promise<void> | undefined;

  constructor(opts: McpTaskServiceOptions) {
    this.store = opts.store;
    this.drivers = opts.drivers;
    this.settings = Object.freeze({ ...opts.settings });
    this.#notifier = opts.notifier;
    this.#clock = opts.clock ?? (() => opts.store.now());
    this.#logger = opts.logger ?? silentLogger;
    const owner = opts.leaseOwner ?? defaultLeaseOwner();
    if (owner.trim() === "" || owner.length > MCP_TASK_LEASE_OWNER_MAX_LENGTH) {
      throw new RangeError(`leaseOwner must contain 1 to ${MCP_TASK_LEASE_OWNER_MAX_LENGTH} characters`);
    }
    this.leaseOwner = owner;
    this.#bounds = { maxResultBytes: this.settings.max_result_bytes, resultPreviewMaxChars: this.settings.result_preview_max_chars };
  }

  get stopped(): boolean {
    return this.#stop.signal.aborted;
  }

  /** Where the notification phase delivers (none: that phase does nothing). */
  get notifier(): TaskNotifier | undefined {
    return this.#notifier;
  }

  /**
   * Installs the notifier when the service was built without one (a worker graph given its own). A second,
   * different notifier is refused: one service delivers through one notifier.
   */
  useNotifier(notifier: TaskNotifier): void {
    if (this.#notifier !== undefined && this.#notifier !== notifier) {
      throw new Error("this task service already delivers through another notifier");
    }
    this.#notifier = notifier;
  }

  // ---------------------------------------------------------------- submit

  /**
   * Starts the remote task and persists it. When persistence fails, or the caller aborts while it runs, the
   * remote task is cancelled (best effort) and the original error (or the abort) is thrown. A remote id that
   * another row already tracks is surfaced as `DuplicateMcpRemoteTaskError` and cancels nothing: that row owns it.
   */
  submit(driverName: string, request: TaskSubmitRequest, options: SubmitOptions = {}): Promise<TaskRecord> {
    return this.#track(() => this.#submit(driverName, request, options));
  }

  async #submit(driverName: string, request: TaskSubmitRequest, options: SubmitOptions): Promise<TaskRecord> {
    const driver = this.#driver(driverName);
    const localTaskId = request.localTaskId ?? `mcp-task-${randomUUID().replace(/-/g, "")}`;
    const req = request.withLocalTaskId(localTaskId);
    const caller = options.signal;
    caller?.throwIfAborted();
    let submitting: Promise<TaskSubmission> | undefined;
    const remote = this.#remote((o) => (submitting = driver.submit(req, { ...o, runtime: options.runtime })), caller);
    // stop() settles the submit at once: an answer that comes after that is no row's task, so nothing keeps a child for it.
    void remote.catch(() => submitting?.then((late) => late.untracked?.(), () => undefined));
    const submission = await remote;
    const ref: TaskReference = {
      localTaskId,
      userId: req.userId,
      threadId: req.threadId,
      serverName: req.serverName,
      remoteTaskId: submission.remoteTaskId,
      driverData: { ...req.driverData, ...(submission.driverData ?? {}) },
      ...(submission.remoteScope ? { remoteScope: submission.remoteScope } : {}),
    };
    let record: TaskRecord;
    try {
      if (submission.remoteTaskId.length > MCP_TASK_REMOTE_ID_MAX_LENGTH) {
        throw new McpTaskProtocolError(`MCP task remote_task_id must not exceed ${MCP_TASK_REMOTE_ID_MAX_LENGTH} characters`);
      }
      if (submission.remoteIdHoldsSecret) {
        throw new McpTaskProtocolError("MCP task remote_task_id holds a value the call carried as a credential, so it cannot be stored");
      }
      const snapshot = normalizeSnapshot(submission.snapshot, this.#bounds);
      const submittedAt = this.#clock();
      caller?.throwIfAborted();
      record = await this.store.create({
        id: localTaskId,
        userId: req.userId,
        threadId: req.threadId,
        runId: req.runId,
        toolCallId: req.toolCallId,
        serverName: req.serverName,
        driverName,
        remoteTaskId: submission.remoteTaskId,
        taskName: req.taskName,
        snapshot,
        driverData: ref.driverData,
        nextPollAt: this.nextPollAt(snapshot, submittedAt),
        ...(submission.remoteScope !== undefined ? { remoteScope: submission.remoteScope } : {}),
      });
    } catch (err) {
      try {
        const duplicate = err instanceof DuplicateMcpRemoteTaskError;
        if (!duplicate && !(await this.#cancelUntracked(driver, driverName, ref, submission))) {
          const marked = typeof err === "object" && err !== null ? err : new Error(String(err));
          leftRunning.add(marked);
          throw marked;
        }
        throw err;
      } finally {
        // No row tracks it: nobody polls it, so nothing keeps a child for it (after the cancel, sent on that child).
        submission.untracked?.();
      }
    }
    if (caller?.aborted) {
      // The row committed, but the caller will never learn its id: cancel through the fence, so the row and
      // the remote task end up agreeing.
      await this.#cancelTrackedNow(record);
      throw caller.reason;
    }
    return record;
  }

  /**
   * Whether the remote task was cancelled. An id that holds one of the submit's credentials is never logged; any other
   * is logged as the driver shows it, every credential blanked (none is logged when it shows none).
   */
  async #cancelUntracked(driver: McpTaskDriver, driverName: string, ref: TaskReference, submission: TaskSubmission): Promise<boolean> {
    try {
      await this.#remote((o) => driver.cancel(ref, o));
      return true;
    } catch (err) {
      const shown = submission.remoteIdShown;
      const remoteId =
        submission.remoteIdHoldsSecret === true
          ? "(withheld: it holds a credential)"
          : shown === undefined
            ? "(not shown)"
            : JSON.stringify(cutCodePoints(shown, MCP_TASK_REMOTE_ID_MAX_LENGTH));
      this.#logger.warn(
        `Failed to cancel untracked MCP task after persistence failure (task_id=${ref.localTaskId}, driver=${driverName}, ` +
          `server=${ref.serverName}, remote_task_id=${remoteId}): ${loggedError(err)}`,
      );
      return false;
    }
  }

  async #cancelTrackedNow(record: TaskRecord): Promise<void> {
    try {
      await this.store.requestCancel(record.id, record.user_id, record.thread_id);
      const [claimed] = await this.store.claimCancels({ ...this.#lease(1), taskId: record.id });
      if (claimed) await this.#cancelClaimed(claimed);
    } catch (err) {
      this.#logger.warn(`Failed to cancel MCP task after its submit was aborted (task_id=${record.id}): ${loggedError(err)}`);
    }
  }

  // ---------------------------------------------------------------- reads and cancel requests

  getTask(taskId: string, userId: string): Promise<TaskRecord | null> {
    return this.store.get(taskId, userId);
  }

  listTasks(threadId: string, userId: string, opts: { limit?: number; activeOnly?: boolean } = {}): Promise<TaskRecord[]> {
    return this.store.listByThread(threadId, userId, opts);
  }

  /**
   * Persists the cancel request (the fence for in-flight polls) and returns; no remote call is made here, the
   * cancellation phase owns it. Repeats change nothing. Null when the task is not this user's on this thread.
   */
  cancelTask(taskId: string, threadId: string, userId: string): Promise<TaskRecord | null> {
    return this.store.requestCancel(taskId, userId, threadId);
  }

  /** The agent's cancel: the one active task of the thread matching `task` (its id or name), or the only one. */
  async cancelMatchingTask(threadId: string, userId: string, task?: string): Promise<TaskRecord> {
    const active = await this.store.listByThread(threadId, userId, { limit: MATCH_SCAN_LIMIT, activeOnly: true });
    const wanted = task?.trim().toLowerCase();
    // By the name as stored, or as the list and the ambiguity error show it (`<`, `>` and frame markers neutralized).
    const named = (item: TaskRecord) =>
      item.task_name.toLowerCase() === wanted || neutralizeUntrustedTags(item.task_name).toLowerCase() === wanted;
    const matches = task === undefined ? active : active.filter((item) => item.id === task || named(item));
    if (matches.length === 0) throw new McpTaskLookupError("No active background task matches this request");
    if (matches.length > 1) {
      // Task names come from the tool call: shown as the task tools show them, they open or close no markup.
      const names = matches.slice(0, AMBIGUOUS_NAMES_SHOWN).map((m) => neutralizeUntrustedTags(m.task_name));
      throw new AmbiguousMcpTaskError(`More than one active background task matches; specify one task name: ${names.join(", ")}`);
    }
    const row = await this.store.requestCancel(matches[0].id, userId, threadId);
    if (!row) throw new McpTaskLookupError("The selected background task no longer exists");
    return row;
  }

  // ---------------------------------------------------------------- schedule

  /** When a task in this state is polled next (inventory §M 100): null once it no longer needs polling. */
  nextPollAt(snapshot: TaskSnapshot, base: Date): Date | null {
    if (!snapshot.isPollable) return null;
    const hint = snapshot.poll_after_seconds;
    let interval = hint == null ? this.settings.poll_interval_seconds : Math.max(hint, MCP_TASK_POLL_AFTER_MIN_SECONDS);
    if (snapshot.status === TaskStatus.INPUT_REQUIRED) interval = Math.max(interval, this.settings.input_required_poll_interval_seconds);
    return addSeconds(base, Math.min(interval, MCP_TASK_POLL_AFTER_MAX_SECONDS));
  }

  /** `min(interval · 2^n, max_poll_backoff)`, n = failures so far; no attempt cap. */
  backoffSeconds(failuresSoFar: number): number {
    const n = Math.min(Math.max(0, failuresSoFar), MAX_BACKOFF_EXPONENT);
    return Math.min(this.settings.poll_interval_seconds * 2 ** n, this.settings.max_poll_backoff_seconds);
  }

  // ---------------------------------------------------------------- the tick

  /** Cancellations, then claimed polls (concurrently), then notifications (with a fresh `now`). */
  runOnce(now: Date = this.#clock()): Promise<TickReport> {
    return this.#track(async () => {
      const cancels = await this.runCancellations(now);
      this.#assertRunning();
      const polls = await this.#pollDue(now);
      this.#assertRunning();
      const notes = await this.runNotifications(this.#clock());
      const { errors: pollErrors, ...pollCounts } = polls;
      return { ...cancels, ...pollCounts, ...notes, errors: cancels.errors + pollErrors + notes.errors };
    });
  }

  /** Claims and polls due tasks; an unexpected failure of one leaves its lease to expire. */
  async #pollDue(now: Date): Promise<PollReport> {
    const claimed = await this.claimDuePolls(now);
    const report: PollReport = { claimed: claimed.length, applied: 0, discarded: 0, retried: 0, failed: 0, errors: 0 };
    const results = await Promise.allSettled(claimed.map((record) => this.pollClaimed(record, now)));
    this.#assertRunning();
    results.forEach((result, i) => {
      if (result.status === "rejected") {
        report.errors += 1;
        this.#logger.error(`Unexpected MCP task poll failure (task_id=${claimed[i].id}); the lease will expire for recovery: ${loggedError(result.reason)}`);
        return;
      }
      const kind = result.value.outcome;
      if (kind === "applied") report.applied += 1;
      else if (kind === "discarded-by-fence") report.discarded += 1;
      else if (kind === "failed-protocol") report.failed += 1;
      else report.retried += 1;
    });
    return report;
  }

  /** Claims up to `max_concurrent_polls` due tasks under this service's lease. */
  claimDuePolls(now: Date = this.#clock()): Promise<TaskRecord[]> {
    return this.#track(async () => this.store.claimDuePolls({ ...this.#lease(this.settings.max_concurrent_polls), now }));
  }

  /**
   * Polls one claimed task and writes the answer (fenced), or gives the claim back with a backoff. `scanNow`
   * is the claim's time: a missing driver retries from it; everything else from the remote call's completion.
   */
  pollClaimed(record: TaskRecord, scanNow: Date = this.#clock()): Promise<PollOutcome> {
    return this.#track(() => this.#pollClaimed(record, scanNow));
  }

  async #pollClaimed(record: TaskRecord, scanNow: Date): Promise<PollOutcome> {
    const taskId = record.id;
    const driver = this.drivers.get(record.driver_name);
    if (!driver) {
      const nextPollAt = addSeconds(scanNow, this.backoffSeconds(record.consecutive_poll_error_count));
      const released = await this.#releaseClaim(record, `No MCP task driver registered as '${record.driver_name}'`, nextPollAt);
      return released ? { outcome: "driver-missing", taskId, driverName: record.driver_name, nextPollAt } : { outcome: "discarded-by-fence", taskId };
    }
    let snapshot: TaskSnapshot;
    let completedAt: Date;
    try {
      const answer = await this.#remote((o) => driver.getStatus(taskReferenceFromRecord(record), o), undefined, record.lease_expires_at);
      completedAt = this.#clock();
      snapshot = normalizeSnapshot(answer, this.#bounds);
    } catch (err) {
      this.#assertRunning();
      const failedAt = this.#clock();
      if (err instanceof McpTaskAnswerUnsettledError) {
        // Asked again one interval later, never backed off: the poll can go as soon as the submit answers. Deferred for
        // longer than a lease (a submit without a call timeout may never answer), each deferral counts as a poll error,
        // so the task shows `tracking_degraded` at the threshold; the first answer ends it.
        const nextPollAt = addSeconds(failedAt, this.settings.poll_interval_seconds);
        const { since, pastLease } = this.#deferral(record, failedAt);
        if (pastLease) {
          const released = await this.#releaseClaim(record, HELD_BACK_ERROR, nextPollAt, since);
          return released ? { outcome: "retried", taskId, error: HELD_BACK_ERROR, nextPollAt } : { outcome: "discarded-by-fence", taskId };
        }
        const deferred = await this.store.deferPoll({ taskId, leaseOwner: this.leaseOwner, leaseExpiresAt: record.lease_expires_at, nextPollAt, since });
        return deferred ? { outcome: "deferred", taskId, nextPollAt } : { outcome: "discarded-by-fence", taskId };
      }
      if (err instanceof McpTaskProtocolError) {
        const error = boundedError(err);
        const failed = new TaskSnapshot({ status: TaskStatus.FAILED, error });
        if (await this.#apply(record, failed, failedAt)) return { outcome: "failed-protocol", taskId, error };
        return { outcome: "discarded-by-fence", taskId };
      }
      const error = boundedError(err);
      const nextPollAt = addSeconds(failedAt, this.backoffSeconds(record.consecutive_poll_error_count));
      if (await this.#releaseClaim(record, error, nextPollAt)) return { outcome: "retried", taskId, error, nextPollAt };
      return { outcome: "discarded-by-fence", taskId };
    }
    if (await this.#apply(record, snapshot, completedAt)) return { outcome: "applied", taskId, status: snapshot.status };
    return { outcome: "discarded-by-fence", taskId };
  }

  async #apply(record: TaskRecord, snapshot: TaskSnapshot, polledAt: Date): Promise<boolean> {
    const applied = await this.store.applySnapshot({
      task: record,
      leaseOwner: this.leaseOwner,
      snapshot,
      nextPollAt: this.nextPollAt(snapshot, polledAt),
      polledAt,
    });
    if (!applied) this.#logger.info(`Discarded MCP task poll result after lease ownership changed or expired (task_id=${record.id})`);
    return applied;
  }

  /**
   * A deferral of `record`'s call at `at` (see `McpTaskAnswerUnsettledError`): since when its calls have been deferred
   * (this one starts the spell when none runs), and whether that has lasted longer than a lease.
   */
  #deferral(record: TaskRecord, at: Date): { since: Date; pastLease: boolean } {
    const since = record.poll_deferred_at ?? at;
    return { since, pastLease: Math.floor((at.getTime() - since.getTime()) / 1000) > this.settings.lease_seconds };
  }

  async #releaseClaim(record: TaskRecord, error: string, nextPollAt: Date, deferredSince?: Date): Promise<boolean> {
    const released = await this.store.releaseClaim({
      deferredSince,
      taskId: record.id,
      leaseOwner: this.leaseOwner,
      leaseExpiresAt: record.lease_expires_at,
      nextPollAt,
      error,
      trackingDegradedAfterErrors: this.settings.tracking_degraded_after_errors,
    });
    if (!released) this.#logger.info(`Discarded MCP task poll failure after lease ownership changed (task_id=${record.id})`);
    return released;
  }

  // ---------------------------------------------------------------- cancellations

  /** Performs due remote cancels (claimed under the lease), concurrently up to `max_concurrent_polls`. */
  runCancellations(now: Date = this.#clock()): Promise<CancellationReport> {
    return this.#track(async () => {
      const claimed = await this.store.claimCancels({ ...this.#lease(this.settings.max_concurrent_polls), now });
      const report: CancellationReport = { cancelled: 0, cancelRetried: 0, errors: 0 };
      const results = await Promise.allSettled(claimed.map((record) => this.#cancelClaimed(record)));
      this.#assertRunning();
      results.forEach((result, i) => {
        if (result.status === "fulfilled") report[result.value ? "cancelled" : "cancelRetried"] += 1;
        else {
          report.errors += 1;
          this.#logger.error(`Unexpected MCP task cancellation failure (task_id=${claimed[i].id}): ${loggedError(result.reason)}`);
        }
      });
      return report;
    });
  }

  /** True when the terminal answer was applied; false when the attempt failed and was released for a retry. */
  async #cancelClaimed(record: TaskRecord): Promise<boolean> {
    try {
      const driver = this.#driver(record.driver_name);
      const answer = await this.#remote((o) => driver.cancel(taskReferenceFromRecord(record), o), undefined, record.lease_expires_at);
      if (!answer.isTerminal) throw new McpTaskProtocolError("MCP task cancellation must return a terminal status");
      const snapshot = this.#cancelSnapshot(answer);
      const applied = await this.store.applyCancelSnapshot({
        taskId: record.id,
        leaseOwner: this.leaseOwner,
        leaseExpiresAt: record.lease_expires_at,
        snapshot,
        trackingDegradedAfterErrors: this.settings.tracking_degraded_after_errors,
      });
      if (!applied) this.#logger.info(`Discarded MCP task cancellation result after lease ownership changed or expired (task_id=${record.id})`);
      return applied;
    } catch (err) {
      this.#assertRunning();
      const failedAt = this.#clock();
      const release = { taskId: record.id, leaseOwner: this.leaseOwner, leaseExpiresAt: record.lease_expires_at };
      if (err instanceof McpTaskAnswerUnsettledError) {
        // An answer that may be about another job is no failed attempt: the cancel is asked again a poll interval later.
        // Deferred for longer than a lease (counted on from the polls' deferrals, if they ran into the cancel), it says
        // why it hangs, in a text that does not change while it does.
        const { since, pastLease } = this.#deferral(record, failedAt);
        await this.store.releaseCancelClaim({
          ...release,
          nextCancelAt: addSeconds(failedAt, this.settings.poll_interval_seconds),
          error: pastLease ? CANCEL_HELD_BACK_ERROR : record.last_cancel_error,
          deferredSince: since,
        });
        return false;
      }
      const attempts = Math.max(0, (record.cancel_attempt_count || 1) - 1);
      await this.store.releaseCancelClaim({
        ...release,
        nextCancelAt: addSeconds(failedAt, this.backoffSeconds(attempts)),
        error: boundedError(err),
      });
      return false;
    }
  }

  /**
   * A terminal cancel answer as stored. One that breaks the payload bounds fails the task with that protocol error, as a
   * poll's does: the job has ended, and asking again would only get the same answer, retried for ever.
   */
  #cancelSnapshot(answer: TaskSnapshot): TaskSnapshot {
    try {
      return normalizeSnapshot(answer, this.#bounds);
    } catch (err) {
      if (!(err instanceof McpTaskProtocolError)) throw err;
      return new TaskSnapshot({ status: TaskStatus.FAILED, error: boundedError(err) });
    }
  }

  // ---------------------------------------------------------------- notifications

  /** Launches deliveries of new events and settles dispatched ones through the notifier (if any). */
  runNotifications(now: Date = this.#clock()): Promise<NotificationReport> {
    return this.#track(async () => {
      const report: NotificationReport = { notified: 0, delivered: 0, notificationRetried: 0, deferred: 0, deadLettered: 0, errors: 0 };
      const notifier = this.#notifier;
      if (!notifier) return report;
      const claimed = await this.store.claimNotificationWork({
        ...this.#lease(this.settings.max_concurrent_polls),
        now,
        trackingDegradedAfterErrors: this.settings.tracking_degraded_after_errors,
      });
      const results = await Promise.allSettled(claimed.map((record) => this.#notifyOne(notifier, record, now)));
      this.#assertRunning();
      for (const [i, result] of results.entries()) {
        if (result.status === "fulfilled") {
          if (result.value) report[result.value] += 1;
          continue;
        }
        report.errors += 1;
        const record = claimed[i];
        this.#logger.error(`Unexpected MCP task notification failure (task_id=${record.id}): ${loggedError(result.reason)}`);
        try {
          await this.store.releaseNotificationLease({
            taskId: record.id,
            leaseOwner: this.leaseOwner,
            nextNotificationAt: addSeconds(now, this.backoffSeconds(record.notification_attempt_count)),
            error: boundedError(result.reason),
            countFailure: true,
          });
        } catch (err) {
          this.#logger.error(`Failed to release the MCP task notification lease (task_id=${record.id}): ${loggedError(err)}`);
        }
      }
      return report;
    });
  }

  async #notifyOne(
    notifier: TaskNotifier,
    record: TaskRecord,
    now: Date,
  ): Promise<Exclude<keyof NotificationReport, "errors"> | null> {
    const step = { taskId: record.id, leaseOwner: this.leaseOwner, dispatchVersion: record.dispatch_version ?? 0 };
    const retryAt = addSeconds(now, this.backoffSeconds(record.notification_attempt_count));
    // A launched run is looked up first, also past the budget: failed lookups must not dead-letter a run that succeeded.
    if (record.notification_status !== "dispatched" && record.notification_attempt_count >= MCP_TASK_MAX_NOTIFICATION_ATTEMPTS) {
      const error = `Notification delivery stopped after ${record.notification_attempt_count} failed attempts: ${record.notification_error || "delivery failed"}`;
      return (await this.store.deadLetterNotification({ ...step, error: cutCodePoints(error, MCP_TASK_ERROR_MAX_CHARS), countFailure: false }))
        ? "deadLettered"
        : null;
    }
    if (record.notification_status === "dispatched") {
      const runId = record.notification_run_id ?? "";
      const idempotencyKey = notificationIdempotencyKey(record.id, step.dispatchVersion, record.dispatch_attempt);
      const run = await this.#remote(
        (o) => notifier.getRun(runId, record.user_id, { signal: o.signal, threadId: record.thread_id, idempotencyKey }),
        undefined,
        record.notification_lease_expires_at,
      );
      this.#assertRunning();
      if (run?.status === "success") return (await this.store.finishNotificationRun({ ...step, delivered: true })) ? "delivered" : null;
      if (run === null || run.status === "error" || run.status === "timeout" || run.status === "interrupted") {
        const error = run === null ? `Notification run '${runId}' was not found` : run.error || `Notification run ended with ${run.status}`;
        const done = await this.store.finishNotificationRun({ ...step, delivered: false, nextNotificationAt: retryAt, error: cutCodePoints(error, MCP_TASK_ERROR_MAX_CHARS) });
        return done ? "notificationRetried" : null;
      }
      const later = addSeconds(now, this.settings.poll_interval_seconds);
      return (await this.store.deferDispatchedNotification({ ...step, nextNotificationAt: later })) ? "deferred" : null;
    }
    const delivery: TaskDelivery = {
      taskId: record.id,
      userId: record.user_id,
      threadId: record.thread_id,
      runId: record.run_id,
      dispatchVersion: step.dispatchVersion,
      dispatchAttempt: record.dispatch_attempt,
      event: record.dispatch_event as unknown as TaskEvent,
    };
    const key = notificationIdempotencyKey(record.id, step.dispatchVersion, record.dispatch_attempt);
    let runId: string;
    try {
      ({ runId } = await this.#remote((o) => notifier.deliver(delivery, key, { signal: o.signal }), undefined, record.notification_lease_expires_at));
    } catch (err) {
      this.#assertRunning();
      if (err instanceof ThreadGoneError) {
        const done = await this.store.deadLetterNotification({ ...step, error: boundedError(err), countFailure: true });
        return done ? "deadLettered" : null;
      }
      const busy = err instanceof BusyThreadError;
      const done = await this.store.releaseNotificationClaim({
        taskId: record.id,
        leaseOwner: this.leaseOwner,
        nextNotificationAt: busy ? addSeconds(now, this.settings.poll_interval_seconds) : retryAt,
        error: boundedError(err),
        replaceWithLatest: true,
        countFailure: !busy,
      });
      return done ? "notificationRetried" : null;
    }
    this.#assertRunning();
    return (await this.store.markNotificationDispatched({ ...step, runId })) ? "notified" : null;
  }

  // ---------------------------------------------------------------- lifecycle

  /**
   * Aborts every in-flight remote call (a hung server cannot block exit) and waits only for the database
   * statements already under way, so the store can be closed afterwards. Leases held stay until they expire.
   * Every later call is refused. Idempotent.
   */
  stop(): Promise<void> {
    if (!this.#stopped) {
      this.#stop.abort(new McpTaskServiceStoppedError());
      this.#stopped = this.settled();
    }
    return this.#stopped;
  }

  /** Settles once every operation running now has settled (operations begun later are not waited for). */
  settled(): Promise<void> {
    return Promise.allSettled([...this.#inFlight]).then(() => undefined);
  }

  #assertRunning(): void {
    if (this.#stop.signal.aborted) throw new McpTaskServiceStoppedError();
  }

  #lease(limit: number) {
    return { leaseOwner: this.leaseOwner, leaseSeconds: this.settings.lease_seconds, limit };
  }

  #driver(name: string): McpTaskDriver {
    const driver = this.drivers.get(name);
    if (!driver) throw new McpTaskLookupError(`No MCP task driver registered as '${name}'`);
    return driver;
  }

  /** Runs `work` unless stopped, and keeps it in the set `stop()` waits for. */
  #track<T>(work: () => Promise<T>): Promise<T> {
    try {
      this.#assertRunning();
    } catch (err) {
      return Promise.reject(err);
    }
    const promise = work();
    this.#inFlight.add(promise);
    const forget = () => this.#inFlight.delete(promise);
    promise.then(forget, forget);
    return promise;
  }

  /**
   * One remote call with a signal aborted by `stop()` and by `caller`. A stop settles it at once even if the
   * driver ignores its signal (rejecting with `McpTaskServiceStoppedError`); the caller's abort is only passed
   * on, so an answer that was already on its way (a submit's remote id) still comes back to be compensated.
   */
  async #remote<T>(call: (options: DriverCallOptions) => Promise<T>, caller?: AbortSignal, leaseExpiresAt?: Date | null): Promise<T> {
    this.#assertRunning();
    const timeoutMs = this.#beforeLeaseEnds(leaseExpiresAt);
    try {
      return await this.#remoteUntil(call, caller, timeoutMs);
    } catch (err) {
      if (!(err instanceof DeadlineExceededError) || timeoutMs === null) throw err;
      throw new Error(
        `the remote call was still running ${(timeoutMs / 1000).toFixed(1)}s later and was stopped before its lease ` +
          `(lease_seconds ${this.settings.lease_seconds}) ran out; it is retried`,
      );
    }
  }

  /**
   * How long a call made under a lease expiring at `leaseExpiresAt` may run: until a margin before the lease ends, so
   * that its answer, or its failure, is still written under the lease (a write after it is discarded by the fence,
   * and a call that always outlasts the lease would be retried forever without anyone hearing of it).
   */
  #beforeLeaseEnds(leaseExpiresAt: Date | null | undefined): number | null {
    if (!leaseExpiresAt) return null;
    const leaseMs = this.settings.lease_seconds * 1000;
    const margin = Math.max(MIN_LEASE_MARGIN_MS, leaseMs * LEASE_MARGIN_FRACTION);
    return Math.max(0, leaseExpiresAt.getTime() - this.#clock().getTime() - margin);
  }

  #remoteUntil<T>(call: (options: DriverCallOptions) => Promise<T>, caller: AbortSignal | undefined, timeoutMs: number | null): Promise<T> {
    return withDeadline(async (signal) => {
      if (!caller) return call({ signal });
      const either = new AbortController();
      const offs = [onAbort(signal, () => either.abort(signal.reason)), onAbort(caller, () => either.abort(caller.reason))];
      try {
        return await call({ signal: either.signal });
      } finally {
        for (const off of offs) off();
      }
    }, timeoutMs, this.#stop.signal);
  }
}
