import type { ToolRuntime } from "@langchain/core/tools";
import { McpToolCallError, ownText } from "../shared/errors";
import { runThreadId, runUserId, unusableRunId } from "../shared/identity";

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
}

export const DEFAULT_SCOPE_ID = "default";

export function sessionScope(userId: string, threadId: string, temporary = false): SessionScope {
  return temporary ? { userId, threadId, key: JSON.stringify([userId, threadId]), temporary } : { userId, threadId, key: JSON.stringify([userId, threadId]) };
}

interface RuntimeWithServerInfo {
  serverInfo?: unknown;
}

/**
 * Whether the run is on a thread the LangGraph server deletes once the run ends. The server gives every run of a
 * graph its checkpointer, which Pregel hands each task as `configurable.__pregel_checkpointer`, except a stateless run
 * (no thread, `on_completion` "delete", the default): it runs without one on a thread it creates for the run and
 * deletes after it, and nothing else in the run's config tells it apart. `serverInfo` (an assistant or graph id in the
 * run's config) marks a run of the server: an in-process graph without a checkpointer keeps its threads' sessions.
 * A hint only (a subgraph compiled with `checkpointer: false` looks the same): it orders eviction, never removes files.
 */
export function onTemporaryThread(runtime: ToolRuntime | undefined): boolean {
  if (runtime === undefined || (runtime as RuntimeWithServerInfo).serverInfo === undefined) return false;
  return runtime.configurable?.__pregel_checkpointer === undefined;
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
