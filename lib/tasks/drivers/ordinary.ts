/**
 * The "ordinary tools" driver (SPEC §6.2, inventory §K): a long job exposed as three plain MCP tools. Only
 * `structuredContent` is parsed — text is never read as JSON — and every answer is checked against the exact
 * payload schemas; a broken answer is a permanent protocol failure, an `isError` status answer is retryable.
 */
import { z } from "zod";
import { checkPayloadBounds, cutCodePoints } from "../payload";
import {
  McpTaskIdReissuedError,
  McpTaskProtocolError,
  REISSUED_REMOTE_TASK_ERROR,
  TaskSnapshot,
  TaskStatus,
  type DriverCallOptions,
  type McpTaskDriver,
  type TaskReference,
  type TaskSubmission,
  type TaskSubmitRequest,
} from "../model";
import type { TaskToolAnswer, TaskToolCaller } from "../caller";

export const ORDINARY_MCP_TASK_DRIVER = "ordinary-tools";
export const TOOL_ERROR_DETAIL_MAX_CHARS = 500;

export type OrdinaryTaskRole = "submit_tool" | "status_tool" | "cancel_tool";

/** A task tool answered `isError`: retryable (unlike a protocol error); the text is the tool's own, scrubbed. */
export class McpTaskToolError extends Error {
  constructor(toolName: string, detail: string) {
    super(`MCP task tool '${toolName}' returned an error${detail ? `: ${detail}` : ""}`);
    this.name = "McpTaskToolError";
  }
}

const artifactSchema = z.object({ uri: z.string().min(1), mime_type: z.string().min(1) });
const positiveFinite = z.number().positive().refine(Number.isFinite, "must be finite");

const submitPayload = z.object({ task_id: z.string().min(1), status: z.literal("running") });
// Status and cancel answers name the task they are about: `checkTaskId` holds them to the persisted id, so no
// length cap of their own (the cancel that compensates a submit whose id was too long to store must be understood).
const statusPayload = z.object({
  task_id: z.string().min(1),
  status: z.enum(["running", "input_required", "completed", "failed", "cancelled"]),
  result: z.unknown().optional(),
  result_artifact: artifactSchema.nullish(),
  error: z.string().nullish(),
  error_code: z.string().nullish(),
  input_required: z.record(z.string(), z.unknown()).nullish(),
  poll_after_seconds: positiveFinite.nullish(),
});
const cancelPayload = z.object({
  task_id: z.string().min(1),
  status: z.enum(["cancelled", "completed", "failed"]),
  result: z.unknown().optional(),
  result_artifact: artifactSchema.nullish(),
  error: z.string().nullish(),
});

/** The tool a role names in `driver_data`; a missing one is a broken task row. */
function roleTool(driverData: Record<string, unknown>, role: OrdinaryTaskRole): string {
  const name = driverData[role];
  if (typeof name !== "string" || name === "") throw new McpTaskProtocolError(`Task driver_data is missing required '${role}'`);
  return name;
}

/** The first non-blank text block, scrubbed, then bounded: what a failing task tool said about itself. */
function errorDetail(answer: TaskToolAnswer): string {
  for (const block of answer.result.content ?? []) {
    if (block.type === "text" && block.text.trim() !== "") return cutCodePoints(answer.scrub(block.text.trim()), TOOL_ERROR_DETAIL_MAX_CHARS);
  }
  return "";
}

/** Field paths and messages of a schema failure — never the values the server sent. */
function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(root)"}: ${issue.message}`)
    .join("; ");
}

/** The answer's payload, checked as the server sent it (protocol fields are exact); nothing in it is scrubbed yet. */
function parsePayload<T>(schema: z.ZodType<T>, answer: TaskToolAnswer, toolName: string): T {
  const { result } = answer;
  if (result.isError) {
    throw new McpTaskToolError(toolName, errorDetail(answer));
  }
  if (result.structuredContent === undefined || result.structuredContent === null) {
    throw new McpTaskProtocolError(`MCP task tool '${toolName}' must return structuredContent; text content is not parsed`);
  }
  const parsed = schema.safeParse(result.structuredContent);
  if (!parsed.success) {
    throw new McpTaskProtocolError(`Invalid structuredContent from MCP task tool '${toolName}': ${describeIssues(parsed.error)}`);
  }
  return parsed.data;
}

/** Neither id is quoted: the error reaches the model, which never sees remote ids. */
function checkTaskId(ref: TaskReference, actual: string): void {
  if (actual !== ref.remoteTaskId) throw new McpTaskProtocolError("MCP task response task_id does not match the persisted remote task");
}

/** A task whose id the stdio child its scope reaches now handed out itself: its job is gone (see `handedOutBy`). */
const reissued = (): TaskSnapshot => new TaskSnapshot({ status: TaskStatus.FAILED, error: REISSUED_REMOTE_TASK_ERROR });

const REMOTE_STATUS: Record<z.output<typeof statusPayload>["status"], TaskStatus> = {
  running: TaskStatus.WORKING,
  input_required: TaskStatus.INPUT_REQUIRED,
  completed: TaskStatus.COMPLETED,
  failed: TaskStatus.FAILED,
  cancelled: TaskStatus.CANCELLED,
};

export class OrdinaryToolsDriver implements McpTaskDriver {
  constructor(private readonly caller: TaskToolCaller) {}

  async submit(request: TaskSubmitRequest, options: DriverCallOptions = {}): Promise<TaskSubmission> {
    const toolName = roleTool(request.driverData, "submit_tool");
    const answer = await this.caller.callTool({
      serverName: request.serverName,
      toolName,
      arguments: request.arguments,
      userId: request.userId,
      threadId: request.threadId,
      runtime: options.runtime,
      signal: options.signal,
      submit: true,
    });
    try {
      const payload = parsePayload(submitPayload, answer, toolName);
      // What this submit took is given back if no row tracks the task: the holds of others answered with the id stay.
      const took = answer.holdTask?.(payload.task_id, true) === true;
      return {
        remoteTaskId: payload.task_id,
        snapshot: new TaskSnapshot({ status: TaskStatus.SUBMITTED }),
        driverData: { ...request.driverData },
        remoteIdHoldsSecret: answer.holdsSecret(payload.task_id),
        remoteIdShown: answer.scrub(payload.task_id),
        ...(answer.incarnation !== undefined ? { remoteScope: answer.incarnation } : {}),
        ...(took ? { untracked: () => answer.holdTask?.(payload.task_id, false) } : {}),
      };
    } finally {
      // The child was held since before the submit was sent: its task is held now, or there is none.
      answer.endSubmitHold?.();
    }
  }

  async getStatus(ref: TaskReference, options: DriverCallOptions = {}): Promise<TaskSnapshot> {
    const toolName = roleTool(ref.driverData, "status_tool");
    const answer = await this.call(ref, toolName, options);
    // The child's hold of that id is its own task's: it is left alone.
    if (!answer) return reissued();
    let snapshot: TaskSnapshot;
    try {
      snapshot = this.statusSnapshot(ref, answer, toolName);
    } catch (err) {
      // A protocol error fails the task for good: nobody polls it again, so its child no longer holds it.
      if (err instanceof McpTaskProtocolError) answer.holdTask?.(ref.remoteTaskId, false);
      throw err;
    }
    answer.holdTask?.(ref.remoteTaskId, snapshot.isPollable);
    return snapshot;
  }

  private statusSnapshot(ref: TaskReference, answer: TaskToolAnswer, toolName: string): TaskSnapshot {
    const payload = parsePayload(statusPayload, answer, toolName);
    checkTaskId(ref, payload.task_id);
    if (payload.error_code === "task_not_found") {
      return new TaskSnapshot({ status: TaskStatus.FAILED, error: answer.scrub(payload.error || "Remote MCP task was not found") });
    }
    if (payload.status === "input_required" && !payload.input_required) {
      throw new McpTaskProtocolError("Invalid structuredContent: input_required status requires input_required");
    }
    const snapshot = new TaskSnapshot({
      status: REMOTE_STATUS[payload.status],
      result: answer.scrub(payload.result),
      result_artifact: answer.scrub(payload.result_artifact ?? null),
      error: answer.scrub(payload.error ?? null),
      input_required: answer.scrub(payload.input_required ?? null),
      poll_after_seconds: payload.poll_after_seconds ?? null,
    });
    // Checked here (the service checks them again before storing): failing them fails the task for good, so its child's
    // hold of it ends with the other protocol errors'.
    checkPayloadBounds(snapshot);
    return snapshot;
  }

  async cancel(ref: TaskReference, options: DriverCallOptions = {}): Promise<TaskSnapshot> {
    const toolName = roleTool(ref.driverData, "cancel_tool");
    const answer = await this.call(ref, toolName, options);
    if (!answer) return reissued();
    const payload = parsePayload(cancelPayload, answer, toolName);
    checkTaskId(ref, payload.task_id);
    const snapshot = new TaskSnapshot({
      status: REMOTE_STATUS[payload.status],
      result: answer.scrub(payload.result),
      result_artifact: answer.scrub(payload.result_artifact ?? null),
      error: answer.scrub(payload.error ?? null),
    });
    answer.holdTask?.(ref.remoteTaskId, snapshot.isPollable);
    return snapshot;
  }

  /**
   * Status and cancel run outside any agent run: the task's stdio scope, server-level credentials. Null when the stdio
   * child that scope reaches now (not the one that issued the task's id, which died) handed that id out itself: its
   * answer would be about its own job of that id (see `TaskToolCall.task`).
   */
  private async call(ref: TaskReference, toolName: string, options: DriverCallOptions): Promise<TaskToolAnswer | null> {
    try {
      return await this.caller.callTool({
        serverName: ref.serverName,
        toolName,
        arguments: { task_id: ref.remoteTaskId },
        userId: ref.userId,
        threadId: ref.threadId,
        signal: options.signal,
        task: { remoteTaskId: ref.remoteTaskId, ...(ref.remoteScope ? { remoteScope: ref.remoteScope } : {}) },
      });
    } catch (err) {
      if (err instanceof McpTaskIdReissuedError) return null;
      throw err;
    }
  }
}
