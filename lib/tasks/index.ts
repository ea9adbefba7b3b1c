/** Durable tasks (SPEC §6): the model, payload bounds, events and the store. */
export * from "./model";
export { cutCodePoints, encodeStrictJson, normalizeSnapshot, type PayloadBounds } from "./payload";
export { canonicalJson } from "../shared/canonical-json";
export {
  CLAIMABLE_NOTIFICATION_STATUSES,
  eventFingerprint,
  IN_FLIGHT_NOTIFICATION_STATUSES,
  NotificationStatus,
  notificationEvent,
  notificationIdempotencyKey,
  type EventSource,
  type TaskEvent,
} from "./events";
export * from "./store";
export { REMOTE_ID_SECRET_MIN_CHARS, TaskCallShortCircuitError, toolkitTaskCaller, type TaskToolAnswer, type TaskToolCall, type TaskToolCaller } from "./caller";
export { McpTaskToolError, ORDINARY_MCP_TASK_DRIVER, OrdinaryToolsDriver, TOOL_ERROR_DETAIL_MAX_CHARS, type OrdinaryTaskRole } from "./drivers/ordinary";
export { submitContract, TaskToolWrapper, type SubmittedTask, type TaskSubmitter } from "./task-tools";
export {
  BusyThreadError,
  MemoryTaskNotifier,
  ThreadGoneError,
  type NotificationRun,
  type NotificationRunStatus,
  type NotifierCallOptions,
  type RecordedDelivery,
  type RunLookupOptions,
  type TaskDelivery,
  type TaskNotifier,
} from "./notifier";
export {
  AmbiguousMcpTaskError,
  defaultLeaseOwner,
  McpTaskLookupError,
  McpTaskService,
  McpTaskServiceStoppedError,
  submitLeftRemoteTaskRunning,
  type CancellationReport,
  type McpTaskServiceOptions,
  type NotificationReport,
  type PollOutcome,
  type PollReport,
  type SubmitOptions,
  type TickReport,
} from "./service";
export { createTaskRuntime, createTaskRuntimeFromConfig, McpTasksDisabledError, TaskRuntime, type TaskRuntimeOptions } from "./runtime";
export * from "./notifiers";
export * from "./agent-tools";
export { frameUntrustedText, neutralizeUntrustedTags, UNTRUSTED_BEGIN, UNTRUSTED_END } from "./untrusted";
