export { runCli } from "./main";
export type { CliIo } from "./io";
