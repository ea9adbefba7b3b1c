/**
 * How drivers reach task tools: raw MCP calls outside the tool node (inventory §L, better than the original).
 * stdio calls run in the task's own (user, thread) session — the same child and workspace as the agent's calls;
 * HTTP/SSE calls reuse the pooled sessions. A submit inside an agent run carries every credential layer; status
 * and cancel calls run outside any run with server-level credentials only (static headers + OAuth).
 */
import type { ToolRuntime } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import { isCommand } from "@langchain/langgraph";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { McpToolkit } from "../mcp";
import type { McpSession } from "../sessions";
import type { McpCallOutcome } from "../shared/interceptor";
import { answeringSession } from "../mcp/call";
import { scrubOther } from "../mcp/scrub-outcome";
import { Redactor } from "../shared/redact";
import { McpTaskAnswerUnsettledError, McpTaskIdReissuedError } from "./model";
import { cutCodePoints } from "./payload";
import { SubmitSecretsMemory } from "./submit-secrets";

export interface TaskToolCall {
  serverName: string;
  /** The raw MCP tool name. */
  toolName: string;
  arguments: Record<string, unknown>;
  userId: string;
  threadId: string;
  /** The agent run's ToolRuntime (a submit): every credential layer. Absent: server-level credentials only. */
  runtime?: unknown;
  signal?: AbortSignal;
  /**
   * A submit: the stdio child it is sent on is held from before it is sent (see `McpSession.holdSubmit`) until the
   * answer's `endSubmitHold`, or until the call fails, so no reload or bound closes it before its task is held.
   */
  submit?: boolean;
  /**
   * A status or cancel call: the task it asks about. It is not sent on, nor its answer read from, a stdio child that
   * handed that id out itself (see `handedOutBy`): `McpTaskIdReissuedError`, or `McpTaskAnswerUnsettledError` while that
   * child's submit is unanswered.
   */
  task?: AskedTask;
}

/** The remote task a status or cancel call asks about, and the stdio child that issued its id (`remoteScope`). */
export interface AskedTask {
  remoteTaskId: string;
  remoteScope?: string;
}

/** A status or cancel call refused (see `handedOutBy`) fails as the refusal says. */
function throwIfRefused(refused: "task" | "submit" | undefined): void {
  if (refused) throw refused === "task" ? new McpTaskIdReissuedError() : new McpTaskAnswerUnsettledError();
}

/**
 * Whether `child`, another stdio child than the one that issued the task's id, handed that id out itself (see
 * `McpSession.handedOut`): a server numbering its jobs per process answers about its own job of that id then. Another
 * child alone says nothing: a server keeping its jobs across processes answers about the task's job.
 */
function handedOutBy(child: McpSession, task: AskedTask): "task" | "submit" | undefined {
  if (!task.remoteScope || child.incarnation === undefined || child.incarnation === task.remoteScope) return undefined;
  return child.handedOut?.(task.remoteTaskId);
}

/**
 * A task tool's answer. Protocol fields (the task's id, its status, a poll hint) are read from `result` exactly as
 * the server sent them: scrubbing first would turn an id containing a short header value into one no server knows.
 * Whatever is kept or shown (a result, an error, a question for the user) goes through `scrub` first.
 */
export interface TaskToolAnswer {
  /** The server's answer as it came. */
  readonly result: CallToolResult;
  /** `value` with every secret known for the call replaced, at any depth. */
  scrub<T>(value: T): T;
  /**
   * Whether `text` (a remote task id) holds one of the call's secrets of at least `REMOTE_ID_SECRET_MIN_CHARS`
   * characters, in any form the redactor knows.
   */
  holdsSecret(text: string): boolean;
  /**
   * stdio: tells the child's pool whether it holds the pending task `remoteId` (see `McpSession.holdTask`); told on a
   * submit's answer, the child issued that id, and each submit holds it once (see there). Whether this call took a hold.
   */
  holdTask?(remoteId: string, pending: boolean): boolean;
  /** stdio: the child process that answered (see `McpSession.incarnation`). */
  readonly incarnation?: string;
  /** A submit (`TaskToolCall.submit`): ends its hold of the child, once its task is held through `holdTask` or is none. */
  endSubmitHold?(): void;
}

/**
 * An opaque remote id must be stored as issued, so it is checked only for secrets this long: a short header value
 * (`2`, `prod`) inside an id is a coincidence, not an echo (`2` alone is in most UUIDs); a token is not.
 */
export const REMOTE_ID_SECRET_MIN_CHARS = 8;

/** What the task protocol reads from `structuredContent` as the server sent it: never path-translated. */
const TASK_PROTOCOL_FIELDS = ["task_id", "status", "error_code", "poll_after_seconds"] as const;

export interface TaskToolCaller {
  /** The server's answer; a failed call throws a safe-to-show error. */
  callTool(call: TaskToolCall): Promise<TaskToolAnswer>;
}

/** An interceptor answered for the server (a ToolMessage or a Command): the task protocol has nothing to parse. */
export class TaskCallShortCircuitError extends Error {
  constructor(toolName: string, detail: string) {
    super(`MCP task tool '${toolName}' was answered by an interceptor instead of the server${detail ? `: ${detail}` : ""}`);
    this.name = "TaskCallShortCircuitError";
  }
}

/**
 * The task caller over a toolkit's pools and interceptor chains. A submit's secrets are remembered in `memory` for
 * its (server, user, thread), and scrubbed from the answers of that scope's status and cancel calls.
 */
export function toolkitTaskCaller(toolkit: McpToolkit, memory: SubmitSecretsMemory = new SubmitSecretsMemory()): TaskToolCaller {
  return {
    async callTool(call) {
      const runtime = call.runtime as ToolRuntime | undefined;
      const key = SubmitSecretsMemory.key(call.serverName, call.userId, call.threadId);
      const serverKey = SubmitSecretsMemory.serverKey(call.serverName);
      let secrets: readonly string[] = [];
      let session: McpSession | undefined;
      // A submit's holds of the children it was sent on (an interceptor may send it more than once).
      const holds: (() => void)[] = [];
      let holdsEnded = false;
      let refused: "task" | "submit" | undefined;
      const endSubmitHold = (): void => {
        holdsEnded = true;
        for (const end of holds.splice(0)) end();
      };
      let outcome: McpCallOutcome;
      try {
        outcome = await toolkit.callTool({
          server: call.serverName,
          tool: call.toolName,
          args: call.arguments,
          runtime,
          requestScopedHeaders: runtime !== undefined,
          scope: { userId: call.userId, threadId: call.threadId },
          signal: call.signal,
          onUnscrubbed: (values) => (secrets = values),
          protocolFields: TASK_PROTOCOL_FIELDS,
          onSession: (used) => {
            session = used;
            if (call.task && (refused = handedOutBy(used, call.task))) return false;
            // Told after the call ended (an attempt an interceptor left running): the caller has let go already.
            if (call.submit && !holdsEnded && used.holdSubmit) holds.push(used.holdSubmit());
          },
          // A status or cancel call's server-level credentials are remembered for the server's later answers too: an
          // OAuth token rotated since may come back in one (a job noting who last polled it).
          ...(runtime !== undefined
            ? { onCarriedSecrets: (values: readonly string[]) => memory.remember(key, values) }
            : {
                rememberedSecrets: [...memory.recall(key), ...memory.recall(serverKey)],
                onCarriedSecrets: (values: readonly string[]) => memory.remember(serverKey, values),
              }),
        });
      } catch (err) {
        endSubmitHold();
        throwIfRefused(refused);
        throw err;
      }
      if (ToolMessage.isInstance(outcome) || isCommand(outcome)) {
        endSubmitHold();
        // An interceptor answering the refusal itself (an error ToolMessage) does not make it a failed call.
        throwIfRefused(refused);
        const text = ToolMessage.isInstance(outcome) && typeof outcome.content === "string" ? outcome.content : "";
        throw new TaskCallShortCircuitError(call.toolName, cutCodePoints(Redactor.of(secrets).text(text), 500));
      }
      // An interceptor's attempts may have gone to different children: the answer's is the one it speaks for (the last
      // one told, when the interceptor returned an outcome of its own).
      session = answeringSession(outcome) ?? session;
      // The child may have handed the id out while the call was out (a submit sent on it meanwhile): the answer may be
      // about that job.
      if (call.task && session) throwIfRefused(handedOutBy(session, call.task));
      const known = Redactor.of(secrets);
      const long = Redactor.of(secrets.filter((value) => value.length >= REMOTE_ID_SECRET_MIN_CHARS));
      const hold = session?.holdTask;
      return {
        result: outcome,
        // An array of the interceptor's own class is stored as its JSON form says (a `toJSON`): that form is scrubbed.
        // Other instances are not JSON, and the payload bounds refuse them.
        scrub: (value) => known.deep(value, (instance) => (Array.isArray(instance) ? scrubOther(instance, known) : instance)),
        holdsSecret: (text) => long.text(text) !== text,
        ...(hold ? { holdTask: (remoteId: string, pending: boolean) => hold(remoteId, pending, call.submit === true) } : {}),
        ...(session?.incarnation !== undefined ? { incarnation: session.incarnation } : {}),
        ...(call.submit ? { endSubmitHold } : {}),
      };
    },
  };
}
