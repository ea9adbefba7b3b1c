/**
 * The durable task model (SPEC §6.1): statuses and their sets, the snapshot a driver reports, the handle the
 * service keeps, the submit request, the bounds, and the driver protocol with its registry.
 */
import { MCP_TASK_NAME_MAX_LENGTH, MCP_TASK_SERVER_NAME_MAX_LENGTH } from "../config";

export { MCP_TASK_NAME_MAX_LENGTH, MCP_TASK_SERVER_NAME_MAX_LENGTH };
export const MCP_TASK_REMOTE_ID_MAX_LENGTH = 255;
export const MCP_TASK_ERROR_MAX_CHARS = 4_000;
export const MCP_TASK_INPUT_REQUIRED_MAX_BYTES = 65_536;
export const MCP_TASK_RESULT_ARTIFACT_MAX_BYTES = 65_536;
export const MCP_TASK_POLL_AFTER_MAX_SECONDS = 86_400;
/**
 * The shortest poll a server's hint can ask for. A worker starts its next tick at once after a full batch, so tasks
 * answering `poll_after_seconds: 0.001` would be polled back to back without a pause (the Python loop's tick interval
 * bounded them).
 */
export const MCP_TASK_POLL_AFTER_MIN_SECONDS = 1;
export const MCP_TASK_MAX_NOTIFICATION_ATTEMPTS = 5;
/** Column widths of `mcp_tasks` that the model does not bound elsewhere. */
export const MCP_TASK_ID_MAX_LENGTH = 64;
export const MCP_TASK_TOOL_CALL_ID_MAX_LENGTH = 128;
export const MCP_TASK_LEASE_OWNER_MAX_LENGTH = 128;
/** A thread's task list as the HTTP API and the CLI page it: default and largest `limit`. */
export const TASK_LIST_DEFAULT_LIMIT = 50;
export const TASK_LIST_MAX_LIMIT = 100;

export const TaskStatus = {
  SUBMITTED: "submitted",
  WORKING: "working",
  INPUT_REQUIRED: "input_required",
  COMPLETED: "completed",
  FAILED: "failed",
  CANCELLED: "cancelled",
} as const;
export type TaskStatus = (typeof TaskStatus)[keyof typeof TaskStatus];

export const TASK_STATUSES: readonly TaskStatus[] = Object.values(TaskStatus);
export const POLLABLE_TASK_STATUSES: ReadonlySet<TaskStatus> = new Set([TaskStatus.SUBMITTED, TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED]);
export const TERMINAL_TASK_STATUSES: ReadonlySet<TaskStatus> = new Set([TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED]);
export const ATTENTION_TASK_STATUSES: ReadonlySet<TaskStatus> = new Set([TaskStatus.INPUT_REQUIRED, ...TERMINAL_TASK_STATUSES]);

export function isTaskStatus(value: unknown): value is TaskStatus {
  return typeof value === "string" && (TASK_STATUSES as readonly string[]).includes(value);
}

export function parseTaskStatus(value: unknown): TaskStatus {
  if (!isTaskStatus(value)) throw new RangeError(`invalid task status; expected one of ${TASK_STATUSES.join(", ")}`);
  return value;
}

/** A JSON value as stored in the JSON columns. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export interface TaskSnapshotInit {
  status: TaskStatus | string;
  result?: unknown;
  result_preview?: string | null;
  result_truncated?: boolean;
  result_artifact?: Record<string, string> | null;
  error?: string | null;
  input_required?: Record<string, unknown> | null;
  poll_after_seconds?: number | null;
}

/** What a driver reports about a remote task at one moment. Immutable; invariants hold from construction. */
export class TaskSnapshot {
  readonly status: TaskStatus;
  readonly result: unknown;
  readonly result_preview: string | null;
  readonly result_truncated: boolean;
  readonly result_artifact: Record<string, string> | null;
  readonly error: string | null;
  readonly input_required: Record<string, unknown> | null;
  readonly poll_after_seconds: number | null;

  constructor(init: TaskSnapshotInit) {
    this.status = parseTaskStatus(init.status);
    this.result = init.result ?? null;
    this.result_preview = init.result_preview ?? null;
    this.result_truncated = init.result_truncated ?? false;
    this.result_artifact = init.result_artifact ?? null;
    this.error = init.error ?? null;
    this.input_required = init.input_required ?? null;
    this.poll_after_seconds = init.poll_after_seconds ?? null;
    const hint = this.poll_after_seconds;
    if (hint !== null && !(typeof hint === "number" && Number.isFinite(hint) && hint > 0)) {
      throw new RangeError("poll_after_seconds must be a finite positive number");
    }
    if (this.status === TaskStatus.INPUT_REQUIRED && this.input_required === null) {
      throw new RangeError("input_required status requires an input_required payload");
    }
    Object.freeze(this);
  }

  get isPollable(): boolean {
    return POLLABLE_TASK_STATUSES.has(this.status);
  }

  get isTerminal(): boolean {
    return TERMINAL_TASK_STATUSES.has(this.status);
  }

  get needsAttention(): boolean {
    return ATTENTION_TASK_STATUSES.has(this.status);
  }

  with(changes: Partial<TaskSnapshotInit>): TaskSnapshot {
    return new TaskSnapshot({ ...this, ...changes });
  }
}

/** The handle a driver needs to reach a remote task again. */
export interface TaskReference {
  localTaskId: string;
  userId: string;
  threadId: string;
  serverName: string;
  remoteTaskId: string;
  driverData: Record<string, unknown>;
  /** The stdio child that issued `remoteTaskId` (see `TaskSubmission.remoteScope`); absent: the server's own ids. */
  remoteScope?: string;
}

export function taskReferenceFromRecord(record: {
  id: string;
  user_id: string;
  thread_id: string;
  server_name: string;
  remote_task_id: string;
  driver_data: Record<string, unknown>;
  remote_scope?: string;
}): TaskReference {
  return {
    localTaskId: record.id,
    userId: record.user_id,
    threadId: record.thread_id,
    serverName: record.server_name,
    remoteTaskId: record.remote_task_id,
    driverData: { ...record.driver_data },
    ...(record.remote_scope ? { remoteScope: record.remote_scope } : {}),
  };
}

export interface TaskSubmitRequestInit {
  userId: string;
  threadId: string;
  runId?: string | null;
  toolCallId?: string | null;
  serverName: string;
  taskName: string;
  arguments: Record<string, unknown>;
  driverData?: Record<string, unknown>;
  localTaskId?: string | null;
}

/** A request to start a remote task. Server and task names are checked at construction. */
export class TaskSubmitRequest {
  readonly userId: string;
  readonly threadId: string;
  readonly runId: string | null;
  readonly toolCallId: string | null;
  readonly serverName: string;
  readonly taskName: string;
  readonly arguments: Record<string, unknown>;
  readonly driverData: Record<string, unknown>;
  readonly localTaskId: string | null;

  constructor(init: TaskSubmitRequestInit) {
    requireBoundedName("server_name", init.serverName, MCP_TASK_SERVER_NAME_MAX_LENGTH);
    requireBoundedName("task_name", init.taskName, MCP_TASK_NAME_MAX_LENGTH);
    // The task row's column widths, checked before the remote submit runs (PostgreSQL would refuse the row only after).
    requireFits("user_id", init.userId, MCP_TASK_ID_MAX_LENGTH);
    requireFits("thread_id", init.threadId, MCP_TASK_ID_MAX_LENGTH);
    requireFits("run_id", init.runId, MCP_TASK_ID_MAX_LENGTH);
    // Ids the store would keep as other ids (a lone surrogate becomes U+FFFD): the task's polls would run in another
    // scope's stdio session, and its events would go to another thread.
    requireStorable("user_id", init.userId);
    requireStorable("thread_id", init.threadId);
    requireFits("tool_call_id", init.toolCallId, MCP_TASK_TOOL_CALL_ID_MAX_LENGTH);
    this.userId = init.userId;
    this.threadId = init.threadId;
    this.runId = init.runId ?? null;
    this.toolCallId = init.toolCallId ?? null;
    this.serverName = init.serverName;
    this.taskName = init.taskName;
    this.arguments = init.arguments;
    this.driverData = { ...(init.driverData ?? {}) };
    this.localTaskId = init.localTaskId ?? null;
    Object.freeze(this);
  }

  withLocalTaskId(localTaskId: string): TaskSubmitRequest {
    return new TaskSubmitRequest({ ...this, localTaskId });
  }
}

function requireBoundedName(field: string, value: string, max: number): void {
  if (typeof value !== "string" || value.trim() === "") throw new RangeError(`${field} must not be empty`);
  requireFits(field, value, max);
}

function requireFits(field: string, value: string | null | undefined, max: number): void {
  if (typeof value === "string" && value.length > max) throw new RangeError(`${field} must not exceed ${max} characters`);
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function requireStorable(field: string, value: string): void {
  if (LONE_SURROGATE.test(value)) throw new RangeError(`${field} must not hold a lone surrogate (the task store cannot keep it)`);
}

/** What a driver's submit returns. */
export interface TaskSubmission {
  /** As the server sent it: status and cancel calls must name it exactly. */
  remoteTaskId: string;
  snapshot: TaskSnapshot;
  driverData?: Record<string, unknown>;
  /** The id holds a value the call carried as a credential: it is never stored, and the remote task is cancelled. */
  remoteIdHoldsSecret?: boolean;
  /**
   * The id with every credential the call carried blanked, however short (one too short to refuse the id is still a
   * credential): what a log line may show of it. Without one, a log line shows none of the id.
   */
  remoteIdShown?: string;
  /** Where the remote id is unique when not per user and server: a stdio task's child process (see `TaskRecord.remote_scope`). */
  remoteScope?: string;
  /**
   * Called when no row tracks the task (it was refused, or another row already owns its id): what the driver keeps
   * for a task nobody will poll is let go of (a stdio child's hold, see `McpSession.holdTask`).
   */
  untracked?(): void;
}

export interface DriverCallOptions {
  /** Aborted when the service shuts down (or a submit's caller gives up), so a hung server cannot hold the process. */
  signal?: AbortSignal;
  /** Submit only: the agent run's runtime, for the driver to take the run's credentials from. */
  runtime?: unknown;
}

/** The driver protocol (SPEC §6.2 implements it twice: ordinary tools and native MCP Tasks). */
export interface McpTaskDriver {
  submit(request: TaskSubmitRequest, options?: DriverCallOptions): Promise<TaskSubmission>;
  getStatus(ref: TaskReference, options?: DriverCallOptions): Promise<TaskSnapshot>;
  cancel(ref: TaskReference, options?: DriverCallOptions): Promise<TaskSnapshot>;
}

/** Drivers by name. */
export class McpTaskDriverRegistry {
  readonly #drivers = new Map<string, McpTaskDriver>();

  register(name: string, driver: McpTaskDriver): void {
    const key = name.trim();
    if (key === "") throw new RangeError("driver name must not be empty");
    if (this.#drivers.has(key)) throw new Error(`MCP task driver '${key}' is already registered`);
    this.#drivers.set(key, driver);
  }

  get(name: string): McpTaskDriver | undefined {
    return this.#drivers.get(name.trim());
  }

  names(): string[] {
    return [...this.#drivers.keys()].sort();
  }
}

/** A remote answer that breaks the task protocol: a permanent failure of the task, never retried. */
export class McpTaskProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "McpTaskProtocolError";
  }
}

/** The error of a task whose remote id another process of its stdio server issued again: it never learns its outcome. */
export const REISSUED_REMOTE_TASK_ERROR =
  "the MCP server process that ran this task ended, and its job id now names another job: the task's outcome is unknown";

/**
 * A status or cancel call for a stdio task whose id the child its scope reaches now handed out itself, answering a
 * submit (see `McpSession.handedOut`): it is not sent there, and the task's job is gone.
 */
export class McpTaskIdReissuedError extends Error {
  constructor() {
    super(REISSUED_REMOTE_TASK_ERROR);
    this.name = "McpTaskIdReissuedError";
  }
}

/**
 * A status or cancel answer that may be about another job of the same id: the stdio child answering is not the one
 * that issued the task's id, and a submit sent on it has not told yet which id it got. The task is left as it was
 * and asked again later.
 */
export class McpTaskAnswerUnsettledError extends Error {
  constructor() {
    super("the MCP server process answering may have issued this task's job id to another job; asked again later");
    this.name = "McpTaskAnswerUnsettledError";
  }
}
