import type { ToolRuntime } from "@langchain/core/tools";

interface RuntimeWithServerInfo {
  serverInfo?: { user?: { identity?: unknown } };
}

function nonEmpty(value: unknown): value is string {
  return typeof value === "string" && value !== "";
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
  const serverUser = (runtime as RuntimeWithServerInfo).serverInfo?.user?.identity;
  if (nonEmpty(serverUser)) return serverUser;
  const authUser = runtime.configurable?.langgraph_auth_user_id;
  if (nonEmpty(authUser)) return authUser;
  const contextUser = contextRecord(runtime)?.user_id;
  return nonEmpty(contextUser) ? contextUser : undefined;
}

/** The thread a run belongs to (SPEC §5.1): `context.thread_id`, then `configurable.thread_id`; `undefined` when neither is set. */
export function runThreadId(runtime: ToolRuntime | undefined): string | undefined {
  if (!runtime) return undefined;
  const contextThread = contextRecord(runtime)?.thread_id;
  if (nonEmpty(contextThread)) return contextThread;
  const configured = runtime.configurable?.thread_id;
  return nonEmpty(configured) ? configured : undefined;
}

/** The run's per-request secrets: `runtime.context.secrets`, when it is an object. */
export function runSecrets(runtime: ToolRuntime | undefined): Readonly<Record<string, unknown>> | undefined {
  const secrets = contextRecord(runtime)?.secrets;
  return typeof secrets === "object" && secrets !== null && !Array.isArray(secrets)
    ? (secrets as Record<string, unknown>)
    : undefined;
}
