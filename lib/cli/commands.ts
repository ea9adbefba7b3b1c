export { checkCommand } from "./check";
export { toolsCommand } from "./tools";
export type { CliIo } from "./io";
export { tasksCommand } from "./tasks";
export { workerCommand } from "./worker";
