import type { ToolRuntime } from "@langchain/core/tools";

interface RuntimeWithServerInfo {
  serverInfo?: { user?: { identity?: unknown } };
}

/**
 * An id as the run gave it: a non-empty string, or a number (a finite one) or bigint as its decimal text, so that
 * `thread_id: 1` and `thread_id: 2` stay two threads instead of both falling back to the default scope.
 */
function idOf(value: unknown): string | undefined {
  if (typeof value === "string") return value === "" ? undefined : value;
  if ((typeof value === "number" && Number.isFinite(value)) || typeof value === "bigint") return String(value);
  return undefined;
}

function contextRecord(runtime: ToolRuntime | undefined): Record<string, unknown> | undefined {
  const context = runtime?.context;
  return typeof context === "object" && context !== null ? (context as Record<string, unknown>) : undefined;
}

/** An id field of the run that is set (not `undefined`, `null` or ""). */
function isSet(value: unknown): boolean {
  return value !== undefined && value !== null && value !== "";
}

/** An identity the LangGraph server's authenticated user carries (not `undefined` or `null`; "" included). */
function isStamped(value: unknown): boolean {
  return value !== undefined && value !== null;
}

/** Which field of the run gave an id, and its value. */
type IdField = readonly [field: string, value: unknown];
const UNSET: IdField = ["", undefined];

/** The identity of the user the LangGraph server authenticated for this run, when it did. */
function authenticatedUserField(runtime: ToolRuntime): IdField | undefined {
  const identity = (runtime as RuntimeWithServerInfo).serverInfo?.user?.identity;
  if (isStamped(identity)) return ["serverInfo.user.identity", identity];
  // Pregel derives `serverInfo.user` from this stamp; a tool invoked outside a graph with the server's config has only the stamp.
  const authUser = runtime.configurable?.langgraph_auth_user;
  if (typeof authUser === "object" && authUser !== null && "identity" in authUser && isStamped(authUser.identity)) {
    return ["configurable.langgraph_auth_user.identity", authUser.identity];
  }
  return undefined;
}

/**
 * The first of the run's user fields that is set, in precedence order (SPEC §5.1). The server's authenticated user
 * (`serverInfo.user`, or the `configurable.langgraph_auth_user` LangGraph builds it from) decides even when its
 * identity is "" (an auth handler admitting anonymous callers): such a run names no user, and the caller's own
 * `context.user_id` never stands in for it. A `langgraph_auth_user_id` of "" alone does not: LangGraph's
 * Python server stamps that (with no user) on every run when it has no auth configured.
 */
function userField(runtime: ToolRuntime): IdField {
  const authenticated = authenticatedUserField(runtime);
  if (authenticated !== undefined) return authenticated;
  const stamped = runtime.configurable?.langgraph_auth_user_id;
  if (isSet(stamped)) return ["configurable.langgraph_auth_user_id", stamped];
  const own = contextRecord(runtime)?.user_id;
  return isSet(own) ? ["context.user_id", own] : UNSET;
}

/**
 * The first of the run's thread fields that is set, in precedence order. A run of a server that authenticated its
 * user is on the thread the server gave it (`configurable.thread_id`, which the server's auth let that user use):
 * the caller's own `context.thread_id` would otherwise reach any thread's workspace and session, another user's too.
 */
function threadField(runtime: ToolRuntime): IdField {
  const configured = runtime.configurable?.thread_id;
  if (isSet(configured) && authenticatedUserField(runtime) !== undefined) return ["configurable.thread_id", configured];
  const own = contextRecord(runtime)?.thread_id;
  if (isSet(own)) return ["context.thread_id", own];
  return isSet(configured) ? ["configurable.thread_id", configured] : UNSET;
}

/**
 * The user a run acts for (SPEC §5.1): the LangGraph server's authenticated user, then
 * `configurable.langgraph_auth_user_id` (which that server stamps), then `context.user_id`; the first that is set
 * decides (one set to something no id is made of gives none: a client's `context.user_id` never stands in for it).
 * `undefined` when the run names no user. Run context is read from the runtime, never from a copied config.
 */
export function runUserId(runtime: ToolRuntime | undefined): string | undefined {
  return runtime ? idOf(userField(runtime)[1]) : undefined;
}

/**
 * The thread a run belongs to (SPEC §5.1): `context.thread_id`, then `configurable.thread_id`, except that a run whose
 * user the server authenticated is on the server's `configurable.thread_id`; `undefined` when neither is set.
 */
export function runThreadId(runtime: ToolRuntime | undefined): string | undefined {
  return runtime ? idOf(threadField(runtime)[1]) : undefined;
}

/**
 * Why the run names no usable user or thread, when the field deciding one is set to something no id is made of (an
 * object, a boolean, NaN): one line naming the field, never its value; `undefined` otherwise. Such a run is refused
 * where an unset id would be served as the "default" user or thread, whose session, workspace and tasks every run
 * without one shares.
 */
export function unusableRunId(runtime: ToolRuntime | undefined): string | undefined {
  return runtime ? (unusableText(userField(runtime)) ?? unusableText(threadField(runtime))) : undefined;
}

/** `unusableRunId` for the user alone (the `user_auth` layer has no use for the thread). */
export function unusableRunUserId(runtime: ToolRuntime | undefined): string | undefined {
  return runtime ? unusableText(userField(runtime)) : undefined;
}

function unusableText([field, value]: IdField): string | undefined {
  return isSet(value) && idOf(value) === undefined ? `the run's ${field} is neither a string nor a number, so it names no user or thread` : undefined;
}

/** The run's per-request secrets: `runtime.context.secrets`, when it is an object. */
export function runSecrets(runtime: ToolRuntime | undefined): Readonly<Record<string, unknown>> | undefined {
  const secrets = contextRecord(runtime)?.secrets;
  return typeof secrets === "object" && secrets !== null && !Array.isArray(secrets)
    ? (secrets as Record<string, unknown>)
    : undefined;
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
