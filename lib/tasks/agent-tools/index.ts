/** The agent-facing task tools and the `background_tasks` state projection (SPEC §7). */
export {
  backgroundTaskView,
  CANCEL_BACKGROUND_TASK_TOOL,
  createBackgroundTaskTools,
  LIST_BACKGROUND_TASKS_LIMIT,
  LIST_BACKGROUND_TASKS_TOOL,
  type BackgroundTaskService,
  type BackgroundTaskView,
} from "./tools";
export {
  BACKGROUND_TASKS_KEY,
  BACKGROUND_TASKS_LIMIT,
  BackgroundTasksAnnotation,
  backgroundTasksStateSchema,
  createBackgroundTasksMiddleware,
  projectBackgroundTasks,
  type BackgroundTaskRow,
  type BackgroundTasksMiddlewareOptions,
} from "./projection";
