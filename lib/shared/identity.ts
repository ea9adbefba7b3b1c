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

/**
 * The user a run acts for (SPEC §5.1): the LangGraph server's authenticated user, then
 * `configurable.langgraph_auth_user_id` (which that server stamps), then `context.user_id`.
 * `undefined` when the run names no user. Run context is read from the runtime, never from a copied config.
 */
export function runUserId(runtime: ToolRuntime | undefined): string | undefined {
  if (!runtime) return undefined;
  return (
    idOf((runtime as RuntimeWithServerInfo).serverInfo?.user?.identity) ??
    idOf(runtime.configurable?.langgraph_auth_user_id) ??
    idOf(contextRecord(runtime)?.user_id)
  );
}

/** The thread a run belongs to (SPEC §5.1): `context.thread_id`, then `configurable.thread_id`; `undefined` when neither is set. */
export function runThreadId(runtime: ToolRuntime | undefined): string | undefined {
  if (!runtime) return undefined;
  return idOf(contextRecord(runtime)?.thread_id) ?? idOf(runtime.configurable?.thread_id);
}

/** The run's per-request secrets: `runtime.context.secrets`, when it is an object. */
export function runSecrets(runtime: ToolRuntime | undefined): Readonly<Record<string, unknown>> | undefined {
  const secrets = contextRecord(runtime)?.secrets;
  return typeof secrets === "object" && secrets !== null && !Array.isArray(secrets)
    ? (secrets as Record<string, unknown>)
    : undefined;
}
