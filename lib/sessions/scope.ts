import type { ToolRuntime } from "@langchain/core/tools";
import { McpToolCallError, ownText } from "../shared/errors";
import { onTemporaryThread, runThreadId, runUserId, unusableRunId } from "../shared/identity";

/** Whose stdio session a call uses: one child process per (server, user, thread). */
export interface SessionScope {
  readonly userId: string;
  readonly threadId: string;
  /** `["<userId>","<threadId>"]` as JSON: no two scopes share a key (ids may hold ':' or lone surrogates). */
  readonly key: string;
  /**
   * The call comes from a run the LangGraph server runs without a checkpointer: a stateless run (`POST /runs/wait`
   * and the like without a thread), whose temporary thread the server deletes when the run ends (see
   * `onTemporaryThread`). Not part of the key.
   */
  readonly temporary?: boolean;
  /**
   * The call runs outside any run (a durable task's status or cancel call, made by the task worker): it leaves the
   * child of a temporary thread temporary. A child it starts is an ordinary one. Not part of the key.
   */
  readonly background?: boolean;
}

export const DEFAULT_SCOPE_ID = "default";

export function sessionScope(userId: string, threadId: string, temporary = false): SessionScope {
  return temporary ? { userId, threadId, key: JSON.stringify([userId, threadId]), temporary } : { userId, threadId, key: JSON.stringify([userId, threadId]) };
}

/**
 * The scope of a call (SPEC §5.1): user = server auth user → `configurable.langgraph_auth_user_id` →
 * `context.user_id` (the same resolver the credential layers use); thread = `context.thread_id` →
 * `configurable.thread_id`; each falls back to "default" when unset. A field set to something no id is made of is
 * refused (`unusableRunId`).
 */
export function runScope(runtime: ToolRuntime | undefined): SessionScope {
  const userId = runUserId(runtime);
  const threadId = runThreadId(runtime);
  if (userId === undefined || threadId === undefined) {
    const unusable = unusableRunId(runtime);
    if (unusable !== undefined) throw ownText(new McpToolCallError(`MCP tool call refused: ${unusable}`));
  }
  return sessionScope(userId ?? DEFAULT_SCOPE_ID, threadId ?? DEFAULT_SCOPE_ID, threadId !== undefined && onTemporaryThread(runtime));
}

/** The scope of work outside any run (tool discovery). */
export const DEFAULT_SCOPE: SessionScope = sessionScope(DEFAULT_SCOPE_ID, DEFAULT_SCOPE_ID);
