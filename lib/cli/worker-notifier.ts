/**
 * Which notifier `mcp-harness worker` delivers through (`--notifier <name>`). Each entry builds one from the
 * command's options and environment; add a delivery target here (e.g. a LangGraph server) and it becomes a
 * `--notifier` value. `MCP_HARNESS_TEST_NOTIFY_FILE` (tests) appends deliveries to that file instead.
 */
import type { TaskNotifier } from "../tasks";
import { FileTaskNotifier, TEST_NOTIFY_FILE_VARIABLE } from "../worker";
import { UsageError } from "./args";
import type { CliIo } from "./io";

export interface WorkerNotifierInput {
  /** Every `--option value` of the command line. */
  values: ReadonlyMap<string, string>;
  io: CliIo;
}

export interface WorkerNotifierChoice {
  notifier: TaskNotifier | undefined;
  /** For the start line: where events go. */
  description: string;
}

type NotifierFactory = (input: WorkerNotifierInput) => WorkerNotifierChoice | Promise<WorkerNotifierChoice>;

export const WORKER_NOTIFIERS: Readonly<Record<string, NotifierFactory>> = {
  none: () => ({ notifier: undefined, description: "none (events stay pending)" }),
};

export const DEFAULT_WORKER_NOTIFIER = "none";

export async function resolveWorkerNotifier(input: WorkerNotifierInput): Promise<WorkerNotifierChoice> {
  const name = input.values.get("notifier");
  const file = input.io.env[TEST_NOTIFY_FILE_VARIABLE]?.trim();
  if (file && name === undefined) return { notifier: new FileTaskNotifier(file), description: `file (${TEST_NOTIFY_FILE_VARIABLE})` };
  const chosen = name ?? DEFAULT_WORKER_NOTIFIER;
  const factory = Object.hasOwn(WORKER_NOTIFIERS, chosen) ? WORKER_NOTIFIERS[chosen] : undefined;
  if (!factory) throw new UsageError(`unknown notifier '${chosen}' (known: ${Object.keys(WORKER_NOTIFIERS).join(", ")})`);
  return factory(input);
}
