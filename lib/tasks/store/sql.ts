/**
 * Every statement the store runs against `mcp_tasks` (the schema itself is in `migrations/`). Placeholders are
 * `$1…$n`; parameters that need a type on PostgreSQL are cast through the dialect's helpers. Timestamps are
 * always parameters from the store's clock, never the database's `now()`.
 */
import { CLAIMABLE_NOTIFICATION_STATUSES, IN_FLIGHT_NOTIFICATION_STATUSES } from "../events";
import { POLLABLE_TASK_STATUSES, TERMINAL_TASK_STATUSES } from "../model";
import type { Dialect } from "./connection";
import { TASK_COLUMNS } from "./records";

const list = (values: Iterable<string>) => `(${[...values].map((v) => `'${v}'`).join(", ")})`;
const POLLABLE = list(POLLABLE_TASK_STATUSES);
const TERMINAL = list(TERMINAL_TASK_STATUSES);
const IN_FLIGHT = list(IN_FLIGHT_NOTIFICATION_STATUSES);
const CLAIMABLE_NOTIFICATIONS = list(CLAIMABLE_NOTIFICATION_STATUSES);
/**
 * The columns a row is read with, named: never `*`. PostgreSQL keeps a named prepared statement per connection, and
 * one that returns `*` fails with "cached plan must not change result type" (0A000) once a column is added to the
 * table, as a newer version's migration does while this one still runs (a rolling upgrade).
 */
const COLUMNS = TASK_COLUMNS.join(", ");

/** Parameter casts: PostgreSQL needs a type where a parameter meets `IS NULL`, `CASE` or `VALUES`. */
export interface Casts {
  ts(n: number): string;
  json(n: number): string;
  bool(n: number): string;
  text(n: number): string;
  int(n: number): string;
}

export function castsFor(dialect: Dialect): Casts {
  if (dialect === "postgres") {
    return {
      ts: (n) => `$${n}::timestamptz`,
      json: (n) => `$${n}::json`,
      bool: (n) => `$${n}::boolean`,
      text: (n) => `$${n}::text`,
      int: (n) => `$${n}::integer`,
    };
  }
  const plain = (n: number) => `$${n}`;
  return { ts: plain, json: plain, bool: plain, text: plain, int: plain };
}

/**
 * The claim fence beyond the owner: when the writer names the lease expiry its claim wrote (`expiry`, a cast
 * parameter, null when not given), the row must still hold exactly that lease. Two claims of one row under the
 * same owner (two ticks of one process) then fence each other out: a re-claim always writes a later expiry.
 */
const sameClaim = (column: string, expiry: string) => `(${expiry} IS NULL OR ${column} = ${expiry})`;

/** Where the new event fingerprint `fp` differs from the stored one. */
const eventChanged = (fp: string) => `(${fp} IS NOT NULL AND (event_fingerprint IS NULL OR event_fingerprint <> ${fp}))`;

/**
 * The one implementation of "record the event if it changed" (inventory §N 122): a new fingerprint bumps
 * `event_version`; unless a delivery is in flight, the row becomes `pending` now with a fresh budget. A result with
 * no event (`fp` null: the task is working again) forgets the stored fingerprint without a new version, so the same
 * event coming back later (the same question asked again, a second spell of degraded tracking) is a change again;
 * the Python original kept it, and that event was never delivered.
 */
export function recordEventSet(fp: string, now: string): string {
  const changed = eventChanged(fp);
  const reset = `(${changed} AND notification_status NOT IN ${IN_FLIGHT})`;
  return [
    `event_version = CASE WHEN ${changed} THEN event_version + 1 ELSE event_version END`,
    `event_fingerprint = CASE WHEN ${fp} IS NULL THEN NULL WHEN ${changed} THEN ${fp} ELSE event_fingerprint END`,
    `notification_status = CASE WHEN ${reset} THEN 'pending' ELSE notification_status END`,
    `next_notification_at = CASE WHEN ${reset} THEN ${now} ELSE next_notification_at END`,
    `notification_error = CASE WHEN ${reset} THEN NULL ELSE notification_error END`,
    `notification_attempt_count = CASE WHEN ${reset} THEN 0 ELSE notification_attempt_count END`,
    `dispatch_version = CASE WHEN ${reset} THEN NULL ELSE dispatch_version END`,
    `dispatch_attempt = CASE WHEN ${reset} THEN 0 ELSE dispatch_attempt END`,
    `dispatch_event = CASE WHEN ${reset} THEN NULL ELSE dispatch_event END`,
    `notification_run_id = CASE WHEN ${reset} THEN NULL ELSE notification_run_id END`,
  ].join(",\n    ");
}

/** The statements of one dialect. */
export class TaskSql {
  readonly c: Casts;
  readonly skipLocked: string;

  constructor(readonly dialect: Dialect) {
    this.c = castsFor(dialect);
    this.skipLocked = dialect === "postgres" ? "FOR UPDATE SKIP LOCKED" : "";
  }

  get forUpdate(): string {
    return this.dialect === "postgres" ? "FOR UPDATE" : "";
  }

  /** $1…$44 in `TASK_COLUMNS` order. */
  insert(): string {
    const { c } = this;
    const json = new Set(["result", "input_required", "driver_data", "result_artifact", "dispatch_event"]);
    const values = TASK_COLUMNS.map((col, i) =>
      col.endsWith("_at") ? c.ts(i + 1) : json.has(col) ? c.json(i + 1) : col === "result_truncated" ? c.bool(i + 1) : `$${i + 1}`,
    );
    return `INSERT INTO mcp_tasks (${COLUMNS}) VALUES (${values.join(", ")}) RETURNING ${COLUMNS}`;
  }

  /**
   * $1 user_id, $2 server_name, $3 thread_id, $4 remote_task_id, $5 remote scope: the unfinished tasks of the same
   * (user, server, thread) holding that remote id from another process of the server (see `TaskStore.create`).
   */
  reissuedRemoteTasks(): string {
    return `SELECT id, task_name FROM mcp_tasks
      WHERE user_id = $1 AND server_name = $2 AND thread_id = $3 AND remote_task_id = $4
        AND remote_scope <> '' AND remote_scope <> $5 AND status NOT IN ${TERMINAL} ${this.forUpdate}`;
  }

  /**
   * $1 id, $2…$8 the terminal snapshot (status … input_required), $9 now, $10 event fingerprint: ends an unfinished task,
   * clearing its poll and cancel state as a terminal answer does (its event was made with no poll errors).
   */
  endUnfinished(): string {
    const { c } = this;
    return `UPDATE mcp_tasks SET status = $2, result = ${c.json(3)}, result_preview = $4, result_truncated = ${c.bool(5)},
        result_artifact = ${c.json(6)}, error = $7, input_required = ${c.json(8)}, next_poll_at = NULL, next_cancel_at = NULL,
        last_cancel_error = NULL, last_poll_error = NULL, consecutive_poll_error_count = 0, poll_deferred_at = NULL,
        lease_owner = NULL, lease_expires_at = NULL, completed_at = ${c.ts(9)}, updated_at = ${c.ts(9)},
        ${recordEventSet(c.text(10), c.ts(9))}
      WHERE id = $1 AND status NOT IN ${TERMINAL}
      RETURNING id`;
  }

  /** $1 id, $2 user_id. */
  get(): string {
    return `SELECT ${COLUMNS} FROM mcp_tasks WHERE id = $1 AND user_id = $2`;
  }

  /** $1 thread_id, $2 user_id, $3 limit. */
  listByThread(activeOnly: boolean): string {
    return `SELECT ${COLUMNS} FROM mcp_tasks WHERE thread_id = $1 AND user_id = $2${activeOnly ? ` AND status IN ${POLLABLE}` : ""}
      ORDER BY created_at DESC, id DESC LIMIT ${this.c.int(3)}`;
  }

  /**
   * $1 lease owner, $2 lease expiry, $3 now, $4 limit. One statement: PostgreSQL skips rows other workers
   * hold; SQLite runs it under the single write lock. The candidates are a materialized CTE: as a plain
   * `IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` PostgreSQL may rescan the subquery and claim more than n.
   * The rows it returns are locked and were re-checked against the conditions when locked (PostgreSQL) or
   * read under the write lock (SQLite), so the update needs no second check.
   */
  claimDuePolls(): string {
    const { c } = this;
    const due = `status IN ${POLLABLE} AND cancel_requested_at IS NULL AND next_poll_at IS NOT NULL
        AND next_poll_at <= ${c.ts(3)} AND (lease_expires_at IS NULL OR lease_expires_at < ${c.ts(3)})`;
    return `WITH due AS MATERIALIZED (
        SELECT id AS due_id FROM mcp_tasks WHERE ${due} ORDER BY next_poll_at, id LIMIT ${c.int(4)} ${this.skipLocked})
      UPDATE mcp_tasks SET lease_owner = $1, lease_expires_at = ${c.ts(2)}, updated_at = ${c.ts(3)},
        poll_attempt_count = poll_attempt_count + 1
      FROM due WHERE mcp_tasks.id = due.due_id
      RETURNING ${COLUMNS}`;
  }

  /** Columns of one row of a batched snapshot apply, in parameter order. */
  static readonly APPLY_FIELDS = [
    "id",
    "task_name",
    "lease_owner",
    "status",
    "result",
    "result_preview",
    "result_truncated",
    "result_artifact",
    "error",
    "input_required",
    "next_poll_at",
    "polled_at",
    "completed",
    "fp",
    "lease_expires_at",
  ] as const;

  /**
   * Applies many poll results in one statement, each row fenced on its own: lease owner, lease not expired at
   * `$1` (now), the claim's own lease expiry (when given), not terminal, no cancel request. Returns the ids written.
   */
  applySnapshots(rows: number): string {
    const { c } = this;
    const width = TaskSql.APPLY_FIELDS.length;
    const tuple = (r: number) => {
      const p = (k: number) => 2 + r * width + k;
      return `(${[
        c.text(p(0)),
        c.text(p(1)),
        c.text(p(2)),
        c.text(p(3)),
        c.json(p(4)),
        c.text(p(5)),
        c.bool(p(6)),
        c.json(p(7)),
        c.text(p(8)),
        c.json(p(9)),
        c.ts(p(10)),
        c.ts(p(11)),
        c.bool(p(12)),
        c.text(p(13)),
        c.ts(p(14)),
      ].join(", ")})`;
    };
    const values = Array.from({ length: rows }, (_, r) => tuple(r)).join(",\n      ");
    const columns = TaskSql.APPLY_FIELDS.map((f) => `v_${f}`).join(", ");
    const now = c.ts(1);
    return `WITH v(${columns}) AS (VALUES ${values})
      UPDATE mcp_tasks SET
        status = v.v_status, result = v.v_result, result_preview = v.v_result_preview,
        result_truncated = v.v_result_truncated, result_artifact = v.v_result_artifact, error = v.v_error,
        input_required = v.v_input_required, next_poll_at = v.v_next_poll_at, last_polled_at = v.v_polled_at,
        last_poll_error = NULL, consecutive_poll_error_count = 0, lease_owner = NULL, lease_expires_at = NULL,
        poll_deferred_at = NULL, completed_at = CASE WHEN v.v_completed THEN ${now} ELSE completed_at END, updated_at = ${now},
        ${recordEventSet("v.v_fp", now)}
      FROM v
      WHERE mcp_tasks.id = v.v_id AND mcp_tasks.task_name = v.v_task_name AND mcp_tasks.lease_owner = v.v_lease_owner
        AND mcp_tasks.lease_expires_at >= ${now} AND ${sameClaim("mcp_tasks.lease_expires_at", "v.v_lease_expires_at")}
        AND mcp_tasks.status IN ${POLLABLE}
        AND mcp_tasks.cancel_requested_at IS NULL
      RETURNING mcp_tasks.id`;
  }

  /** $1 id, $2 owner: the row under this owner's lease, locked for the rest of the transaction. */
  leasedRow(): string {
    return `SELECT ${COLUMNS} FROM mcp_tasks WHERE id = $1 AND lease_owner = $2 ${this.forUpdate}`;
  }

  /**
   * $1 id, $2 owner, $3 now, $4 next poll, $5 error, $6 fingerprint, $7 the claim's lease expiry (or null), $8 for a
   * deferral counted as this error, when the deferrals began (null for any other error).
   * Fenced like an apply: owner, lease expiry, claim, pollable and no cancel request. A failure that comes back
   * after the lease expired, after a newer claim or after a cancel request counts no error and records no event;
   * a cancel claim of the same owner can hold the very lease expiry the poll's claim wrote (a clock that did not
   * move), so the cancel request is checked on its own.
   */
  releaseClaim(): string {
    const { c } = this;
    return `UPDATE mcp_tasks SET next_poll_at = ${c.ts(4)}, last_poll_error = ${c.text(5)},
        consecutive_poll_error_count = consecutive_poll_error_count + 1, lease_owner = NULL, lease_expires_at = NULL,
        poll_deferred_at = ${c.ts(8)}, updated_at = ${c.ts(3)},
        ${recordEventSet(c.text(6), c.ts(3))}
      WHERE id = $1 AND lease_owner = $2 AND lease_expires_at >= ${c.ts(3)} AND ${sameClaim("lease_expires_at", c.ts(7))}
        AND status IN ${POLLABLE} AND cancel_requested_at IS NULL
      RETURNING id`;
  }

  /**
   * $1 id, $2 owner, $3 now, $4 next poll, $5 the claim's lease expiry (or null), $6 when the deferrals began (kept if an
   * earlier deferral set it). Fenced as `releaseClaim`.
   */
  deferPoll(): string {
    const { c } = this;
    return `UPDATE mcp_tasks SET next_poll_at = ${c.ts(4)}, lease_owner = NULL, lease_expires_at = NULL,
        poll_deferred_at = COALESCE(poll_deferred_at, ${c.ts(6)})
      WHERE id = $1 AND lease_owner = $2 AND lease_expires_at >= ${c.ts(3)} AND ${sameClaim("lease_expires_at", c.ts(5))}
        AND status IN ${POLLABLE} AND cancel_requested_at IS NULL
      RETURNING id`;
  }

  /** $1 id, $2 user, $3 thread, $4 now. Only the first request of a live task writes anything. */
  requestCancel(): string {
    const { c } = this;
    return `UPDATE mcp_tasks SET cancel_requested_at = ${c.ts(4)}, next_cancel_at = COALESCE(next_cancel_at, ${c.ts(4)}),
        lease_owner = NULL, lease_expires_at = NULL, updated_at = ${c.ts(4)}
      WHERE id = $1 AND user_id = $2 AND thread_id = $3 AND cancel_requested_at IS NULL AND status NOT IN ${TERMINAL}
      RETURNING ${COLUMNS}`;
  }

  /** $1 id, $2 user, $3 thread. */
  getScoped(): string {
    return `SELECT ${COLUMNS} FROM mcp_tasks WHERE id = $1 AND user_id = $2 AND thread_id = $3`;
  }

  /** $1 owner, $2 lease expiry, $3 now, $4 limit, $5 task id or null. */
  claimCancels(): string {
    const { c } = this;
    const due = `cancel_requested_at IS NOT NULL AND status NOT IN ${TERMINAL} AND next_cancel_at IS NOT NULL
        AND next_cancel_at <= ${c.ts(3)} AND (lease_expires_at IS NULL OR lease_expires_at < ${c.ts(3)})
        AND (${c.text(5)} IS NULL OR id = ${c.text(5)})`;
    return `WITH due AS MATERIALIZED (
        SELECT id AS due_id FROM mcp_tasks WHERE ${due} ORDER BY next_cancel_at, id LIMIT ${c.int(4)} ${this.skipLocked})
      UPDATE mcp_tasks SET lease_owner = $1, lease_expires_at = ${c.ts(2)}, updated_at = ${c.ts(3)},
        cancel_attempt_count = cancel_attempt_count + 1
      FROM due WHERE mcp_tasks.id = due.due_id
      RETURNING ${COLUMNS}`;
  }

  /**
   * $1 id, $2 owner, $3 now, $4 status, $5 result, $6 preview, $7 truncated, $8 artifact, $9 error,
   * $10 input_required, $11 fingerprint, $12 the claim's lease expiry (or null). Fenced on owner, lease expiry,
   * claim and non-terminal.
   */
  applyCancelSnapshot(): string {
    const { c } = this;
    return `UPDATE mcp_tasks SET status = ${c.text(4)}, result = ${c.json(5)}, result_preview = ${c.text(6)},
        result_truncated = ${c.bool(7)}, result_artifact = ${c.json(8)}, error = ${c.text(9)},
        input_required = ${c.json(10)}, next_poll_at = NULL, next_cancel_at = NULL, last_cancel_error = NULL,
        last_poll_error = NULL, consecutive_poll_error_count = 0, poll_deferred_at = NULL,
        lease_owner = NULL, lease_expires_at = NULL, completed_at = ${c.ts(3)}, updated_at = ${c.ts(3)},
        ${recordEventSet(c.text(11), c.ts(3))}
      WHERE id = $1 AND lease_owner = $2 AND lease_expires_at >= ${c.ts(3)} AND ${sameClaim("lease_expires_at", c.ts(12))}
        AND status NOT IN ${TERMINAL}
      RETURNING id`;
  }

  /**
   * $1 id, $2 owner, $3 now, $4 next cancel, $5 error, $6 the claim's lease expiry (or null), $7 for a deferred
   * cancel, when the deferrals began (null otherwise). Fenced on owner, lease expiry and claim.
   */
  releaseCancelClaim(): string {
    const { c } = this;
    return `UPDATE mcp_tasks SET next_cancel_at = ${c.ts(4)}, last_cancel_error = ${c.text(5)}, lease_owner = NULL,
        lease_expires_at = NULL, poll_deferred_at = ${c.ts(7)}, updated_at = ${c.ts(3)}
      WHERE id = $1 AND lease_owner = $2 AND lease_expires_at >= ${c.ts(3)} AND ${sameClaim("lease_expires_at", c.ts(6))}
      RETURNING id`;
  }

  /** $1 now, $2 limit: rows with an undelivered event, due, and not leased by a live notifier. */
  dueNotifications(): string {
    const { c } = this;
    return `SELECT ${COLUMNS} FROM mcp_tasks
      WHERE event_version > notified_version AND notification_status IN ${CLAIMABLE_NOTIFICATIONS}
        AND (next_notification_at IS NULL OR next_notification_at <= ${c.ts(1)})
        AND (notification_lease_expires_at IS NULL OR notification_lease_expires_at < ${c.ts(1)})
      ORDER BY next_notification_at, id LIMIT ${c.int(2)} ${this.skipLocked}`;
  }

  /**
   * $1 id, $2 owner, $3 lease expiry, $4 now, $5 rebuild (bool), $6 dispatch event (json), $7 version changed
   * (bool). A rebuild freezes the current event as this delivery's snapshot; a new version gets a fresh budget.
   */
  claimNotification(): string {
    const { c } = this;
    const rebuild = c.bool(5);
    const fresh = `(${rebuild} AND ${c.bool(7)})`;
    return `UPDATE mcp_tasks SET notification_lease_owner = $2, notification_lease_expires_at = ${c.ts(3)}, updated_at = ${c.ts(4)},
        dispatch_attempt = CASE WHEN ${fresh} THEN 0 ELSE dispatch_attempt END,
        notification_attempt_count = CASE WHEN ${fresh} THEN 0 ELSE notification_attempt_count END,
        dispatch_version = CASE WHEN ${rebuild} THEN event_version ELSE dispatch_version END,
        dispatch_event = CASE WHEN ${rebuild} THEN ${c.json(6)} ELSE dispatch_event END,
        notification_run_id = CASE WHEN ${rebuild} THEN NULL ELSE notification_run_id END,
        notification_status = CASE WHEN ${rebuild} THEN 'claimed' ELSE notification_status END
      WHERE id = $1
      RETURNING ${COLUMNS}`;
  }

  /** The fence of a notifier's step on a frozen delivery: its lease is live and the version is the one it froze. */
  #notificationFence(statuses: string): string {
    const { c } = this;
    return `id = $1 AND notification_lease_owner = $2 AND notification_lease_expires_at >= ${c.ts(3)}
        AND dispatch_version = ${c.int(4)} AND notification_status IN ${statuses}`;
  }

  /** $1 id, $2 owner, $3 now, $4 dispatch version, $5 run id. */
  markNotificationDispatched(): string {
    const { c } = this;
    return `UPDATE mcp_tasks SET notification_status = 'dispatched', notification_run_id = ${c.text(5)},
        notification_error = NULL, next_notification_at = ${c.ts(3)}, notification_lease_owner = NULL,
        notification_lease_expires_at = NULL, updated_at = ${c.ts(3)}
      WHERE ${this.#notificationFence("('claimed', 'retry')")}
      RETURNING id`;
  }

  /** $1 id, $2 owner, $3 now, $4 next, $5 error, $6 replace with latest (bool), $7 count failure (bool). */
  releaseNotificationClaim(): string {
    const { c } = this;
    const replace = c.bool(6);
    return `UPDATE mcp_tasks SET
        notification_status = CASE WHEN ${replace} THEN 'pending' ELSE 'retry' END,
        dispatch_event = CASE WHEN ${replace} THEN NULL ELSE dispatch_event END,
        notification_run_id = CASE WHEN ${replace} THEN NULL ELSE notification_run_id END,
        notification_attempt_count = notification_attempt_count + CASE WHEN ${c.bool(7)} THEN 1 ELSE 0 END,
        notification_error = ${c.text(5)}, next_notification_at = ${c.ts(4)}, notification_lease_owner = NULL,
        notification_lease_expires_at = NULL, updated_at = ${c.ts(3)}
      WHERE id = $1 AND notification_lease_owner = $2
      RETURNING id`;
  }

  /** $1 id, $2 owner, $3 now, $4 dispatch version. The run succeeded: this version is delivered. */
  finishNotificationDelivered(): string {
    const { c } = this;
    const newer = "event_version > dispatch_version";
    return `UPDATE mcp_tasks SET notified_version = dispatch_version,
        notification_status = CASE WHEN ${newer} THEN 'pending' ELSE 'delivered' END,
        next_notification_at = CASE WHEN ${newer} THEN ${c.ts(3)} ELSE NULL END,
        dispatch_version = NULL, dispatch_attempt = 0, dispatch_event = NULL, notification_run_id = NULL,
        notification_error = NULL, notification_attempt_count = 0, notification_lease_owner = NULL,
        notification_lease_expires_at = NULL, updated_at = ${c.ts(3)}
      WHERE ${this.#notificationFence("('dispatched')")}
      RETURNING id`;
  }

  /** $1 id, $2 owner, $3 now, $4 dispatch version, $5 next, $6 error. The run failed: retry with a new key. */
  finishNotificationFailed(): string {
    const { c } = this;
    return `UPDATE mcp_tasks SET notification_status = 'retry', dispatch_attempt = dispatch_attempt + 1,
        notification_attempt_count = notification_attempt_count + 1, notification_run_id = NULL,
        notification_error = ${c.text(6)}, next_notification_at = ${c.ts(5)}, notification_lease_owner = NULL,
        notification_lease_expires_at = NULL, updated_at = ${c.ts(3)}
      WHERE ${this.#notificationFence("('dispatched')")}
      RETURNING id`;
  }

  /** $1 id, $2 owner, $3 now, $4 next, $5 error, $6 count failure (bool). Keeps the phase. */
  releaseNotificationLease(): string {
    const { c } = this;
    return `UPDATE mcp_tasks SET notification_error = ${c.text(5)}, next_notification_at = ${c.ts(4)},
        notification_attempt_count = notification_attempt_count + CASE WHEN ${c.bool(6)} THEN 1 ELSE 0 END,
        notification_lease_owner = NULL, notification_lease_expires_at = NULL, updated_at = ${c.ts(3)}
      WHERE id = $1 AND notification_lease_owner = $2
      RETURNING id`;
  }

  /**
   * $1 id, $2 owner, $3 now, $4 dispatch version, $5 error, $6 count failure (bool). Dead letter, unless a newer
   * event arrived meanwhile: then the row goes back to pending with a fresh budget.
   */
  deadLetterNotification(): string {
    const { c } = this;
    const newer = "event_version > dispatch_version";
    return `UPDATE mcp_tasks SET
        notification_status = CASE WHEN ${newer} THEN 'pending' ELSE 'dead_letter' END,
        next_notification_at = CASE WHEN ${newer} THEN ${c.ts(3)} ELSE NULL END,
        notification_attempt_count = CASE WHEN ${newer} THEN 0
          ELSE notification_attempt_count + CASE WHEN ${c.bool(6)} THEN 1 ELSE 0 END END,
        dispatch_version = NULL, dispatch_attempt = 0, dispatch_event = NULL, notification_run_id = NULL,
        notification_error = ${c.text(5)}, notification_lease_owner = NULL, notification_lease_expires_at = NULL,
        updated_at = ${c.ts(3)}
      WHERE ${this.#notificationFence("('claimed', 'retry', 'dispatched')")}
      RETURNING id`;
  }

  /** $1 id, $2 owner, $3 now, $4 dispatch version, $5 next. The run is still going: look again later. */
  deferDispatchedNotification(): string {
    const { c } = this;
    return `UPDATE mcp_tasks SET next_notification_at = ${c.ts(5)}, notification_lease_owner = NULL,
        notification_lease_expires_at = NULL, updated_at = ${c.ts(3)}
      WHERE ${this.#notificationFence("('dispatched')")}
      RETURNING id`;
  }
}
