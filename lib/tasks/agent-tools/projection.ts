/**
 * The optional `background_tasks` projection (SPEC §7, inventory §O 138): before each agent run, up to 20 of
 * the thread's tasks are written into graph state as `{task_id, task_name, status, updated_at}` (names
 * neutralised). A failure to read them only logs a warning: the run goes on with the previous rows.
 */
import { Annotation } from "@langchain/langgraph";
import { createMiddleware } from "langchain";
import { z } from "zod";
import { runThreadId, runUserId, unusableRunId } from "../../shared/identity";
import { silentLogger, type Logger } from "../../shared/logger";
import type { ToolRuntime } from "@langchain/core/tools";
import { neutralizeUntrustedTags } from "../untrusted";
import type { BackgroundTaskService } from "./tools";

export const BACKGROUND_TASKS_KEY = "background_tasks";
export const BACKGROUND_TASKS_LIMIT = 20;

export interface BackgroundTaskRow {
  task_id: string;
  task_name: string;
  status: string;
  updated_at: string;
}

/**
 * A middleware sees only the context keys it declares: these are the ones the run's identity is read from. Any type:
 * the identity resolver reads numbers as ids and ignores the rest; a stricter schema would fail the whole run.
 */
const identityContextSchema = z.object({ user_id: z.unknown().optional(), thread_id: z.unknown().optional() });

const rowSchema = z.object({ task_id: z.string(), task_name: z.string(), status: z.string(), updated_at: z.string() });

/** The state field, for `createAgent` middleware (`stateSchema`). */
export const backgroundTasksStateSchema = z.object({ [BACKGROUND_TASKS_KEY]: z.array(rowSchema).default([]) });

/** The state field, for a `StateGraph` of your own (each projection replaces the rows). */
export const BackgroundTasksAnnotation = Annotation.Root({
  [BACKGROUND_TASKS_KEY]: Annotation<BackgroundTaskRow[]>({ reducer: (_old, next) => next, default: () => [] }),
});

/** The thread's latest tasks as state rows (at most 20). */
export async function projectBackgroundTasks(
  service: Pick<BackgroundTaskService, "listTasks">,
  threadId: string,
  userId: string,
): Promise<BackgroundTaskRow[]> {
  const rows = await service.listTasks(threadId, userId, { limit: BACKGROUND_TASKS_LIMIT });
  return rows.slice(0, BACKGROUND_TASKS_LIMIT).map((row) => ({
    task_id: row.id,
    task_name: neutralizeUntrustedTags(row.task_name),
    status: row.status,
    updated_at: row.updated_at.toISOString(),
  }));
}

export interface BackgroundTasksMiddlewareOptions {
  logger?: Logger;
}

/**
 * A `createAgent` middleware that adds `background_tasks` to the agent's state and refreshes it before each
 * run, for the run's user and thread (`context.user_id`, `configurable.thread_id`, as the task tools read them).
 */
export function createBackgroundTasksMiddleware(runtime: { service: Pick<BackgroundTaskService, "listTasks"> }, options: BackgroundTasksMiddlewareOptions = {}) {
  // Read once, as createBackgroundTaskTools does: a runtime with tasks disabled refuses here, not with a warning every
  // run.
  const { service } = runtime;
  const logger = options.logger ?? silentLogger;
  return createMiddleware({
    name: "BackgroundTasksProjection",
    stateSchema: backgroundTasksStateSchema,
    contextSchema: identityContextSchema,
    beforeAgent: async (_state, run) => {
      // The middleware runtime carries `context` and `configurable` as a tool's runtime does.
      const asTool = run as unknown as ToolRuntime;
      const threadId = runThreadId(asTool);
      // A run whose user or thread cannot be told is not shown the "default" ones' tasks.
      if (threadId === undefined || unusableRunId(asTool) !== undefined) return undefined;
      try {
        return { [BACKGROUND_TASKS_KEY]: await projectBackgroundTasks(service, threadId, runUserId(asTool) ?? "default") };
      } catch (err) {
        logger.warn(`Could not project background tasks into the thread state: ${err instanceof Error ? err.name : typeof err}`);
        return undefined;
      }
    },
  });
}
