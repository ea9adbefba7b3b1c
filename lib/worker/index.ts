/** The background task worker (SPEC §7): the tick graph, the in-process loop, and a file notifier for tests. */
export {
  createTaskWorkerGraph,
  TICK_COUNTERS,
  tickChangedSomething,
  tickReport,
  TaskWorkerState,
  type TaskPollSummary,
  type TaskWorkerGraph,
  type TaskWorkerGraphOptions,
  type TaskWorkerTickReport,
  type TickCounter,
} from "./graph";
export { startTaskWorker, type TaskWorker, type TaskWorkerOptions } from "./loop";
export { FileTaskNotifier, TEST_NOTIFY_FILE_VARIABLE, type FileNotifierLine } from "./file-notifier";
