import { ConfigFileNotFoundError, ConfigReadError, ConfigValidationError, loadExtensionsConfig, McpTaskConfigurationError } from "../config";
import type { Logger } from "../shared/logger";
import { createTaskRuntimeFromConfig, TaskStoreConfigError, type TaskRuntime } from "../tasks";
import { startTaskWorker, TICK_COUNTERS, tickChangedSomething, type TaskWorkerTickReport } from "../worker";
import { parseArgs, UsageError } from "./args";
import type { CliIo } from "./io";
import { chooseWorkerNotifier, WORKER_NOTIFIER_OPTIONS, type WorkerNotifierChoice } from "./worker-notifier";

const MAX_INTERVAL_SECONDS = 3600;
const TASKS_DISABLED = "mcp-harness worker: mcpTasks.enabled is false in the config: there is no task runtime to run";

/** Log lines go to stderr: stdout carries only the tick lines. */
function stderrLogger(io: CliIo): Logger {
  return {
    debug: (m) => {
      if (io.env.MCP_HARNESS_DEBUG) io.err(`debug: ${m}`);
    },
    info: (m) => io.err(`info: ${m}`),
    warn: (m) => io.err(`warning: ${m}`),
    error: (m) => io.err(`error: ${m}`),
  };
}

function parseInterval(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const seconds = Number(text);
  if (text.trim() === "" || !Number.isFinite(seconds) || seconds <= 0 || seconds > MAX_INTERVAL_SECONDS) {
    throw new UsageError(`--interval must be a number of seconds above 0 and at most ${MAX_INTERVAL_SECONDS}`);
  }
  return seconds;
}

/** `2026-… claimed 3, applied 3, notified 1`: the counters that are not zero. */
export function tickLine(report: TaskWorkerTickReport): string {
  const parts = TICK_COUNTERS.filter((name) => report[name] > 0).map((name) => `${name} ${report[name]}`);
  return `${report.tickAt}  ${parts.join(", ")}`;
}

/** Resolves on SIGTERM/SIGINT (or the io's stop signal); the handlers are removed afterwards. */
function stopRequested(io: CliIo): { promise: Promise<string>; dispose(): void } {
  let dispose = () => undefined as void;
  const promise = new Promise<string>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => resolve(signal);
    const onAbort = () => resolve("stop");
    process.once("SIGTERM", onSignal);
    process.once("SIGINT", onSignal);
    io.stopSignal?.addEventListener("abort", onAbort, { once: true });
    if (io.stopSignal?.aborted) resolve("stop");
    dispose = () => {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
      io.stopSignal?.removeEventListener("abort", onAbort);
    };
  });
  return { promise, dispose: () => dispose() };
}

/**
 * `worker [config] [--interval <seconds>] [--json] [--notifier none|langgraph [--api-url <url>] [--assistant <id>]]`:
 * runs the background task graph against the configured store until SIGTERM/SIGINT, one line per tick that changed
 * something; then drains and exits 0.
 */
export async function workerCommand(args: readonly string[], io: CliIo): Promise<number> {
  const { positional, flags, values } = parseArgs(args, ["json"], 1, ["interval", "notifier", ...Object.values(WORKER_NOTIFIER_OPTIONS).flat()]);
  const json = flags.has("json");
  const interval = parseInterval(values.get("interval"));
  const stop = stopRequested(io);
  const logger = stderrLogger(io);
  let runtime: TaskRuntime;
  let description: string;
  try {
    const buildNotifier = chooseWorkerNotifier({ values, io });
    try {
      const where = { configPath: positional[0], env: io.env, cwd: io.cwd, logger };
      const { config } = await loadExtensionsConfig(where);
      // With tasks disabled nothing is delivered: what the notifier needs (an API URL) is not asked for then.
      let chosen: WorkerNotifierChoice = { notifier: undefined, description: "none" };
      if (config.mcpTasks.enabled) chosen = await buildNotifier();
      description = chosen.description;
      // With tasks disabled the runtime opens no store, so the refusal below leaves nothing behind.
      runtime = await createTaskRuntimeFromConfig(config, { ...where, notifier: chosen.notifier });
    } catch (err) {
      const known = [ConfigFileNotFoundError, ConfigReadError, ConfigValidationError, McpTaskConfigurationError, TaskStoreConfigError];
      if (known.some((kind) => err instanceof kind)) {
        io.err(`mcp-harness worker: ${(err as Error).message}`);
        return 1;
      }
      throw err;
    }
    if (!runtime.enabled) {
      await runtime.stop();
      io.err(TASKS_DISABLED);
      return 1;
    }
    const seconds = interval ?? runtime.settings.poll_interval_seconds;
    io.err(
      `mcp-harness worker: ticking every ${seconds}s as ${runtime.service.leaseOwner} on ${runtime.store.dialect}; ` +
        `task servers: ${runtime.taskServers.join(", ") || "none"}; notifier: ${description}`,
    );
    for (const name of runtime.stdioTaskServers) {
      logger.warn(
        `MCP task server '${name}' runs over stdio: this worker polls its tasks in children of its own, which know only ` +
          "the jobs a server keeps outside its process; for a server that keeps them in its process, poll in the agent's " +
          "process (startTaskWorker)",
      );
    }
    const worker = startTaskWorker({
      runtime,
      intervalMs: seconds * 1000,
      logger,
      onTick: (report) => {
        if (!tickChangedSomething(report)) return;
        io.out(json ? JSON.stringify(report) : tickLine(report));
      },
    });
    const signal = await stop.promise;
    io.err(`mcp-harness worker: ${signal === "stop" ? "stopping" : `${signal} received`}, draining`);
    await worker.stop();
    await runtime.stop();
    io.err(`mcp-harness worker: stopped after ${worker.ticks} ticks`);
    return 0;
  } finally {
    stop.dispose();
  }
}
