/**
 * The durable task store (SPEC §6.3, inventory §N 112–128). Every timestamp comes from the injected clock and
 * is stored in UTC. Writes that apply a worker's result are fenced on the lease owner and the lease expiry.
 */
import { eventFingerprint, notificationEvent, type EventSource, type TaskEvent } from "../events";
import { MCP_TASK_MAX_NOTIFICATION_ATTEMPTS, REISSUED_REMOTE_TASK_ERROR, TaskSnapshot, TaskStatus, TERMINAL_TASK_STATUSES } from "../model";
import type { Db, Queryable, Row } from "./connection";
import { dbJson, dbTime, storedText, storedValue, TASK_COLUMNS, toRecord, type TaskRecord } from "./records";
import { TaskSql } from "./sql";

export const UNIQUE_REMOTE_TASK_CONSTRAINT = "uq_mcp_tasks_user_server_remote";
const SQLITE_UNIQUE_REMOTE_TASK = "mcp_tasks.user_id, mcp_tasks.server_name, mcp_tasks.remote_scope, mcp_tasks.remote_task_id";
/** What a task ended by `create` (its remote id issued again by another process of its stdio server) reads. */
export { REISSUED_REMOTE_TASK_ERROR };
/** Rows per statement of a batched apply (well under SQLite's 32,766 parameters). */
const APPLY_CHUNK = 500;

/** The remote task already has a row for this user, server and remote scope: that row owns the handle. */
export class DuplicateMcpRemoteTaskError extends Error {
  constructor(
    readonly remoteTaskId: string,
    readonly serverName: string,
  ) {
    super(`Remote MCP task '${remoteTaskId}' is already tracked for server '${serverName}' by this user`);
    this.name = "DuplicateMcpRemoteTaskError";
  }
}

export function isRemoteTaskUniqueConflict(err: unknown): boolean {
  const e = err as { constraint?: unknown; message?: unknown } | null;
  if (e?.constraint === UNIQUE_REMOTE_TASK_CONSTRAINT) return true;
  const message = typeof e?.message === "string" ? e.message : "";
  return message.includes(UNIQUE_REMOTE_TASK_CONSTRAINT) || message.includes(SQLITE_UNIQUE_REMOTE_TASK);
}

export interface CreateTaskInput {
  id: string;
  userId: string;
  threadId: string;
  runId?: string | null;
  toolCallId?: string | null;
  serverName: string;
  driverName: string;
  remoteTaskId: string;
  taskName: string;
  /** Already normalised (payload bounds applied). */
  snapshot: TaskSnapshot;
  driverData?: Record<string, unknown>;
  nextPollAt: Date | null;
  /**
   * stdio: the child process (session) that accepted the task; its job ids are unique only within it (default '':
   * the server's own ids, unique per user and server).
   */
  remoteScope?: string;
}

export interface ClaimOptions {
  leaseOwner: string;
  leaseSeconds: number;
  limit: number;
  /**
   * The scan time: what is due by then (default: the store's clock). The lease runs `leaseSeconds` from the
   * claim itself (the store's clock when the claim is written, or the scan time if that is later), never from
   * an earlier tick start: a claim made after a slow phase is not born expired.
   */
  now?: Date;
}

export interface ApplySnapshotInput {
  /**
   * The claimed row (its id and task name; the task name is part of the fence and of the event). Its
   * `lease_expires_at`, when given, is the claim's own lease: the write is fenced on exactly that claim.
   */
  task: Pick<TaskRecord, "id" | "task_name"> & Partial<Pick<TaskRecord, "lease_expires_at">>;
  leaseOwner: string;
  /** Already normalised. */
  snapshot: TaskSnapshot;
  nextPollAt: Date | null;
  /** When the remote answer arrived (default: now). The fence is checked at the moment of the write. */
  polledAt?: Date;
}

export interface ReleaseClaimInput {
  taskId: string;
  leaseOwner: string;
  /** The lease expiry the claim wrote (the claimed record's `lease_expires_at`): fences the write on that claim. */
  leaseExpiresAt?: Date | null;
  nextPollAt: Date;
  error: string;
  trackingDegradedAfterErrors: number;
  /** For a deferral past its bound, counted as this error: when the first of the deferrals was (they go on). */
  deferredSince?: Date;
}

export interface DeferPollInput {
  taskId: string;
  leaseOwner: string;
  /** The lease expiry the claim wrote: fences the write on that claim. */
  leaseExpiresAt?: Date | null;
  nextPollAt: Date;
  /** When the polls were first deferred: kept as `poll_deferred_at` unless an earlier deferral already set it. */
  since: Date;
}

export interface ApplyCancelInput {
  taskId: string;
  leaseOwner: string;
  /** The lease expiry the claim wrote (the claimed record's `lease_expires_at`): fences the write on that claim. */
  leaseExpiresAt?: Date | null;
  /** Terminal, already normalised. */
  snapshot: TaskSnapshot;
  trackingDegradedAfterErrors: number;
}

export interface ReleaseCancelInput {
  taskId: string;
  leaseOwner: string;
  /** The lease expiry the claim wrote (the claimed record's `lease_expires_at`): fences the write on that claim. */
  leaseExpiresAt?: Date | null;
  nextCancelAt: Date;
  /** The attempt's error; null: none (the cancel is only put off). */
  error: string | null;
  /** For a deferred cancel, when the deferrals began (`poll_deferred_at`); any other outcome clears it. */
  deferredSince?: Date;
}

export interface NotificationStep {
  taskId: string;
  leaseOwner: string;
  dispatchVersion: number;
}

export interface TaskStoreOptions {
  clock?: () => Date;
  /** PostgreSQL schema in use (for the migration lock); informational otherwise. */
  schema?: string;
}

export class TaskStore {
  readonly dialect: Db["dialect"];
  readonly #db: Db;
  readonly #sql: TaskSql;
  readonly #clock: () => Date;
  readonly #applyStatements = new Map<number, string>();
  readonly #claimPolls: string;

  constructor(db: Db, opts: TaskStoreOptions = {}) {
    this.#db = storingText(db);
    this.dialect = db.dialect;
    this.#sql = new TaskSql(db.dialect);
    this.#claimPolls = this.#sql.claimDuePolls();
    this.#clock = opts.clock ?? (() => new Date());
  }

  now(): Date {
    return this.#clock();
  }

  #records(rows: Row[]): TaskRecord[] {
    return rows.map((row) => toRecord(row, this.dialect));
  }

  async create(input: CreateTaskInput): Promise<TaskRecord> {
    const now = this.#clock();
    const s = input.snapshot;
    const terminal = TERMINAL_TASK_STATUSES.has(s.status);
    const values: Record<(typeof TASK_COLUMNS)[number], unknown> = {
      id: input.id,
      user_id: input.userId,
      thread_id: input.threadId,
      run_id: input.runId ?? null,
      tool_call_id: input.toolCallId ?? null,
      server_name: input.serverName,
      driver_name: input.driverName,
      remote_task_id: input.remoteTaskId,
      task_name: input.taskName,
      status: s.status,
      result: dbJson(s.result),
      error: s.error,
      input_required: dbJson(s.input_required),
      driver_data: dbJson(input.driverData ?? {}),
      notification_status: "none",
      next_poll_at: input.nextPollAt ? dbTime(input.nextPollAt) : null,
      last_polled_at: null,
      last_poll_error: null,
      poll_attempt_count: 0,
      consecutive_poll_error_count: 0,
      lease_owner: null,
      lease_expires_at: null,
      cancel_requested_at: null,
      completed_at: terminal ? dbTime(now) : null,
      created_at: dbTime(now),
      updated_at: dbTime(now),
      result_preview: s.result_preview,
      result_truncated: s.result_truncated,
      result_artifact: dbJson(s.result_artifact),
      event_fingerprint: null,
      event_version: 0,
      notified_version: 0,
      dispatch_version: null,
      dispatch_attempt: 0,
      dispatch_event: null,
      notification_run_id: null,
      notification_error: null,
      notification_attempt_count: 0,
      next_notification_at: null,
      notification_lease_owner: null,
      notification_lease_expires_at: null,
      cancel_attempt_count: 0,
      next_cancel_at: null,
      last_cancel_error: null,
      remote_scope: input.remoteScope ?? "",
      poll_deferred_at: null,
    };
    // A row born in an attention status starts with its first event (version 1, pending).
    const event = notificationEvent(eventSourceOf(input.id, input.taskName, s, 0, null), Number.POSITIVE_INFINITY);
    if (event) {
      values.event_fingerprint = eventFingerprint(event);
      values.event_version = 1;
      values.notification_status = "pending";
      values.next_notification_at = dbTime(now);
    }
    const params = TASK_COLUMNS.map((col) => values[col]);
    try {
      if (!input.remoteScope) return this.#records(await this.#db.rows(this.#sql.insert(), params))[0];
      return await this.#db.transaction(async (tx) => {
        await this.#endReissued(tx, input, now);
        return this.#records(await tx.rows(this.#sql.insert(), params))[0];
      });
    } catch (err) {
      if (isRemoteTaskUniqueConflict(err)) throw new DuplicateMcpRemoteTaskError(input.remoteTaskId, input.serverName);
      throw err;
    }
  }

  /** The task, or null when it is missing or belongs to another user. */
  async get(taskId: string, userId: string): Promise<TaskRecord | null> {
    const rows = await this.#db.rows(this.#sql.get(), [taskId, userId]);
    return rows.length ? this.#records(rows)[0] : null;
  }

  /** Newest first. */
  async listByThread(threadId: string, userId: string, opts: { limit?: number; activeOnly?: boolean } = {}): Promise<TaskRecord[]> {
    const rows = await this.#db.rows(this.#sql.listByThread(opts.activeOnly ?? false), [threadId, userId, opts.limit ?? 50]);
    return this.#records(rows);
  }

  /** Claims up to `limit` due, unleased (or lease-expired), uncancelled pollable rows, oldest due first. */
  async claimDuePolls(opts: ClaimOptions): Promise<TaskRecord[]> {
    const now = opts.now ?? this.#clock();
    const rows = await this.#db.rows(
      this.#claimPolls,
      [opts.leaseOwner, dbTime(this.#leaseExpiry(now, opts.leaseSeconds)), dbTime(now), opts.limit],
      "mcp_tasks_claim_polls",
    );
    return sortBy(this.#records(rows), (r) => r.next_poll_at);
  }

  /** Applies one poll result; false when the fence rejected it (lease lost or expired, cancelled, terminal). */
  async applySnapshot(input: ApplySnapshotInput): Promise<boolean> {
    return (await this.applySnapshots([input]))[0];
  }

  /** Applies many poll results in one round trip; each row is fenced on its own. Results in input order. */
  async applySnapshots(inputs: readonly ApplySnapshotInput[]): Promise<boolean[]> {
    if (inputs.length === 0) return [];
    const ids = new Set<string>();
    for (const input of inputs) {
      if (ids.has(input.task.id)) throw new RangeError("a batch may apply one snapshot per task");
      ids.add(input.task.id);
    }
    const now = this.#clock();
    const applied = new Set<string>();
    for (let start = 0; start < inputs.length; start += APPLY_CHUNK) {
      const chunk = inputs.slice(start, start + APPLY_CHUNK);
      const params: unknown[] = [dbTime(now)];
      for (const { task, leaseOwner, snapshot: s, nextPollAt, polledAt } of chunk) {
        const event = notificationEvent(eventSourceOf(task.id, task.task_name, s, 0, null), Number.POSITIVE_INFINITY);
        params.push(
          task.id,
          task.task_name,
          leaseOwner,
          ...snapshotParams(s),
          nextPollAt && !TERMINAL_TASK_STATUSES.has(s.status) ? dbTime(nextPollAt) : null,
          dbTime(polledAt ?? now),
          TERMINAL_TASK_STATUSES.has(s.status),
          event ? eventFingerprint(event) : null,
          claimExpiry(task.lease_expires_at),
        );
      }
      let sql = this.#applyStatements.get(chunk.length);
      if (sql === undefined) {
        sql = this.#sql.applySnapshots(chunk.length);
        if (this.#applyStatements.size < 64) this.#applyStatements.set(chunk.length, sql);
      }
      for (const row of await this.#db.rows(sql, params, `mcp_tasks_apply_${chunk.length}`)) applied.add(String(row.id));
    }
    return inputs.map((input) => applied.has(input.task.id));
  }

  /**
   * Gives a claim back after a failed poll: the next poll time and the error are recorded, the consecutive error
   * count grows, and reaching `trackingDegradedAfterErrors` is an event. Fenced on the owner and the lease
   * expiry: a late failure (lease expired) is discarded.
   */
  async releaseClaim(input: ReleaseClaimInput): Promise<boolean> {
    return this.#db.transaction(async (tx) => {
      const row = await this.#leased(tx, input.taskId, input.leaseOwner);
      if (!row) return false;
      const now = this.#clock();
      const error = storedText(input.error);
      const after = { ...row, consecutive_poll_error_count: row.consecutive_poll_error_count + 1, last_poll_error: error };
      const fp = fingerprintOf(after, input.trackingDegradedAfterErrors);
      const done = await tx.rows(this.#sql.releaseClaim(), [
        input.taskId,
        input.leaseOwner,
        dbTime(now),
        dbTime(input.nextPollAt),
        input.error,
        fp,
        claimExpiry(input.leaseExpiresAt),
        input.deferredSince ? dbTime(input.deferredSince) : null,
      ]);
      return done.length === 1;
    });
  }

  /**
   * Gives a claimed poll back unchanged but for when it is due and since when it is deferred (`poll_deferred_at`): no
   * error is counted, no event recorded.
   */
  async deferPoll(input: DeferPollInput): Promise<boolean> {
    return this.#step(this.#sql.deferPoll(), [
      input.taskId,
      input.leaseOwner,
      dbTime(this.#clock()),
      dbTime(input.nextPollAt),
      claimExpiry(input.leaseExpiresAt),
      dbTime(input.since),
    ]);
  }

  /**
   * Persists a cancel request (the fence for in-flight polls: the poll lease is cleared). A repeat, or a request
   * on a finished task, changes nothing. Null when the task is not this user's on this thread.
   */
  async requestCancel(taskId: string, userId: string, threadId: string): Promise<TaskRecord | null> {
    const now = this.#clock();
    const updated = await this.#db.rows(this.#sql.requestCancel(), [taskId, userId, threadId, dbTime(now)]);
    if (updated.length) return this.#records(updated)[0];
    const rows = await this.#db.rows(this.#sql.getScoped(), [taskId, userId, threadId]);
    return rows.length ? this.#records(rows)[0] : null;
  }

  /** Claims due cancel requests of live tasks under the same lease columns as polls. */
  async claimCancels(opts: ClaimOptions & { taskId?: string }): Promise<TaskRecord[]> {
    const now = opts.now ?? this.#clock();
    const rows = await this.#db.rows(this.#sql.claimCancels(), [
      opts.leaseOwner,
      dbTime(this.#leaseExpiry(now, opts.leaseSeconds)),
      dbTime(now),
      opts.limit,
      opts.taskId ?? null,
    ]);
    return sortBy(this.#records(rows), (r) => r.next_cancel_at);
  }

  /** Writes the terminal answer of a remote cancel; fenced on owner, lease expiry and non-terminal. */
  async applyCancelSnapshot(input: ApplyCancelInput): Promise<boolean> {
    const s = input.snapshot;
    if (!TERMINAL_TASK_STATUSES.has(s.status)) throw new RangeError("A cancellation response must report a terminal task status");
    return this.#db.transaction(async (tx) => {
      const row = await this.#leased(tx, input.taskId, input.leaseOwner);
      if (!row) return false;
      const now = this.#clock();
      // Terminal, as a terminal poll result is: earlier poll errors no longer describe the task.
      const fp = fingerprintOf({ ...row, ...snapshotFields(s), consecutive_poll_error_count: 0, last_poll_error: null }, input.trackingDegradedAfterErrors);
      const done = await tx.rows(this.#sql.applyCancelSnapshot(), [
        input.taskId,
        input.leaseOwner,
        dbTime(now),
        ...snapshotParams(s),
        fp,
        claimExpiry(input.leaseExpiresAt),
      ]);
      return done.length === 1;
    });
  }

  async releaseCancelClaim(input: ReleaseCancelInput): Promise<boolean> {
    const now = this.#clock();
    const done = await this.#db.rows(this.#sql.releaseCancelClaim(), [
      input.taskId,
      input.leaseOwner,
      dbTime(now),
      dbTime(input.nextCancelAt),
      input.error,
      claimExpiry(input.leaseExpiresAt),
      input.deferredSince ? dbTime(input.deferredSince) : null,
    ]);
    return done.length === 1;
  }

  /**
   * Claims rows with an undelivered event under a notification lease. A row that is pending or claimed, or
   * waiting to retry an older version, gets the current event frozen as its delivery snapshot (a newer
   * version starts with a fresh budget); a dispatched row is returned as it is, to look up its run.
   */
  async claimNotificationWork(opts: ClaimOptions & { trackingDegradedAfterErrors: number }): Promise<TaskRecord[]> {
    return this.#db.transaction(async (tx) => {
      const now = opts.now ?? this.#clock();
      const due = this.#records(await tx.rows(this.#sql.dueNotifications(), [dbTime(now), opts.limit]));
      const claimed: TaskRecord[] = [];
      for (const row of due) {
        const versionChanged = row.dispatch_version !== row.event_version;
        const rebuild =
          row.notification_status === "pending" || row.notification_status === "claimed" || (row.notification_status === "retry" && versionChanged);
        const event = rebuild ? describeEvent(row, opts.trackingDegradedAfterErrors) : null;
        const rows = await tx.rows(this.#sql.claimNotification(), [
          row.id,
          opts.leaseOwner,
          // From the claim, as for polls: a tick whose time is behind the store's clock must not claim an expired lease.
          dbTime(this.#leaseExpiry(now, opts.leaseSeconds)),
          dbTime(now),
          rebuild,
          dbJson(event),
          versionChanged,
        ]);
        claimed.push(...this.#records(rows));
      }
      return claimed;
    });
  }

  async markNotificationDispatched(step: NotificationStep & { runId: string }): Promise<boolean> {
    return this.#step(this.#sql.markNotificationDispatched(), [step.taskId, step.leaseOwner, dbTime(this.#clock()), step.dispatchVersion, step.runId]);
  }

  /**
   * The launch did not happen: back to `pending` (rebuild from the latest event) or `retry`; the delivery
   * attempt, hence the idempotency key, is unchanged. Owner fence only.
   */
  async releaseNotificationClaim(input: {
    taskId: string;
    leaseOwner: string;
    nextNotificationAt: Date;
    error: string | null;
    replaceWithLatest: boolean;
    countFailure?: boolean;
  }): Promise<boolean> {
    return this.#step(this.#sql.releaseNotificationClaim(), [
      input.taskId,
      input.leaseOwner,
      dbTime(this.#clock()),
      dbTime(input.nextNotificationAt),
      input.error,
      input.replaceWithLatest,
      input.countFailure ?? false,
    ]);
  }

  /** The dispatched run ended: delivered (this version is done) or not (retry with the next attempt's key). */
  async finishNotificationRun(
    step: NotificationStep & { delivered: boolean; nextNotificationAt?: Date | null; error?: string | null },
  ): Promise<boolean> {
    const now = this.#clock();
    const base = [step.taskId, step.leaseOwner, dbTime(now), step.dispatchVersion];
    if (step.delivered) return this.#step(this.#sql.finishNotificationDelivered(), base);
    return this.#step(this.#sql.finishNotificationFailed(), [...base, dbTime(step.nextNotificationAt ?? now), step.error ?? null]);
  }

  /** An unexpected failure while holding the notification lease: record it, keep the phase. */
  async releaseNotificationLease(input: {
    taskId: string;
    leaseOwner: string;
    nextNotificationAt: Date;
    error: string | null;
    countFailure: boolean;
  }): Promise<boolean> {
    return this.#step(this.#sql.releaseNotificationLease(), [
      input.taskId,
      input.leaseOwner,
      dbTime(this.#clock()),
      dbTime(input.nextNotificationAt),
      input.error,
      input.countFailure,
    ]);
  }

  async deadLetterNotification(step: NotificationStep & { error: string; countFailure: boolean }): Promise<boolean> {
    return this.#step(this.#sql.deadLetterNotification(), [
      step.taskId,
      step.leaseOwner,
      dbTime(this.#clock()),
      step.dispatchVersion,
      step.error,
      step.countFailure,
    ]);
  }

  async deferDispatchedNotification(step: NotificationStep & { nextNotificationAt: Date }): Promise<boolean> {
    return this.#step(this.#sql.deferDispatchedNotification(), [
      step.taskId,
      step.leaseOwner,
      dbTime(this.#clock()),
      step.dispatchVersion,
      dbTime(step.nextNotificationAt),
    ]);
  }

  async close(): Promise<void> {
    await this.#db.close();
  }

  /** A claim's lease expiry: `leaseSeconds` from the claim (the clock now, or the scan time if later). */
  #leaseExpiry(scanNow: Date, leaseSeconds: number): Date {
    const clockNow = this.#clock();
    return addSeconds(clockNow > scanNow ? clockNow : scanNow, leaseSeconds);
  }

  /**
   * A process of a stdio server issued a remote id that an unfinished task of the same scope got from an earlier
   * process: that process is gone (a scope has one child at a time), so the id now names the new job, and polling the
   * old task would report the new job's outcome as its own. The old task ends as failed.
   */
  async #endReissued(tx: Queryable, input: CreateTaskInput, now: Date): Promise<void> {
    const holders = await tx.rows(this.#sql.reissuedRemoteTasks(), [input.userId, input.serverName, input.threadId, input.remoteTaskId, input.remoteScope]);
    const lost = new TaskSnapshot({ status: TaskStatus.FAILED, error: REISSUED_REMOTE_TASK_ERROR });
    for (const holder of holders) {
      const event = notificationEvent(eventSourceOf(String(holder.id), String(holder.task_name), lost, 0, null), Number.POSITIVE_INFINITY);
      await tx.rows(this.#sql.endUnfinished(), [holder.id, ...snapshotParams(lost), dbTime(now), event ? eventFingerprint(event) : null]);
    }
  }

  async #step(sql: string, params: unknown[]): Promise<boolean> {
    return (await this.#db.rows(sql, params)).length === 1;
  }

  async #leased(tx: Queryable, taskId: string, leaseOwner: string): Promise<TaskRecord | null> {
    const rows = await tx.rows(this.#sql.leasedRow(), [taskId, leaseOwner]);
    return rows.length ? this.#records(rows)[0] : null;
  }
}

/** After this many failed deliveries the service dead-letters the notification (inventory §M 109). */
export const MAX_NOTIFICATION_ATTEMPTS = MCP_TASK_MAX_NOTIFICATION_ATTEMPTS;

/**
 * The store's statements with every bound string passed through `storedText`: the one place U+0000 is replaced
 * before a value reaches either database (JSON text is built clean by `dbJson`).
 */
function storingText(db: Db): Db {
  const clean = (params: readonly unknown[] | undefined) => params?.map((v) => (typeof v === "string" ? storedText(v) : v));
  const on = (q: Queryable): Queryable => ({ rows: (sql, params, name) => q.rows(sql, clean(params), name) });
  return {
    dialect: db.dialect,
    rows: on(db).rows,
    transaction: (fn) => db.transaction((tx) => fn(on(tx))),
    close: () => db.close(),
  };
}

/** A claim's lease expiry as a fence parameter; null when the writer did not name its claim. */
function claimExpiry(leaseExpiresAt: Date | null | undefined): string | null {
  return leaseExpiresAt ? dbTime(leaseExpiresAt) : null;
}

function addSeconds(date: Date, seconds: number): Date {
  return new Date(date.getTime() + seconds * 1000);
}

function sortBy<T>(items: T[], key: (item: T) => Date | null): T[] {
  return items.sort((a, b) => (key(a)?.getTime() ?? 0) - (key(b)?.getTime() ?? 0) || String((a as { id?: string }).id).localeCompare(String((b as { id?: string }).id)));
}

/** The snapshot's stored fields, as the row will hold them (U+0000 replaced: see `storedText`). */
function snapshotFields(s: TaskSnapshot) {
  return storedValue({
    status: s.status,
    result: s.result,
    result_preview: s.result_preview,
    result_truncated: s.result_truncated,
    result_artifact: s.result_artifact,
    error: s.error,
    input_required: s.input_required,
  });
}

/** A snapshot's columns as bound values, in the order the apply statements list them (status … input_required). */
function snapshotParams(snapshot: TaskSnapshot): unknown[] {
  const s = snapshotFields(snapshot);
  return [s.status, dbJson(s.result), s.result_preview, s.result_truncated, dbJson(s.result_artifact), s.error, dbJson(s.input_required)];
}

function eventSourceOf(id: string, taskName: string, s: TaskSnapshot, errors: number, lastError: string | null): EventSource {
  return { id, task_name: taskName, ...snapshotFields(s), consecutive_poll_error_count: errors, last_poll_error: lastError };
}

function fingerprintOf(row: EventSource, threshold: number): string | null {
  const event = notificationEvent(row, threshold);
  return event ? eventFingerprint(event) : null;
}

/** The row's current event, even when nothing about it is attention-worthy any more. */
function describeEvent(row: TaskRecord, threshold: number): TaskEvent {
  return (
    notificationEvent(row, threshold) ?? {
      task_id: row.id,
      task_name: row.task_name,
      status: row.status as TaskStatus,
      result: row.result,
      result_preview: row.result_preview,
      result_truncated: row.result_truncated,
      result_artifact: row.result_artifact,
      error: row.error,
      input_required: row.input_required,
      tracking_degraded: false,
      last_poll_error: null,
    }
  );
}
