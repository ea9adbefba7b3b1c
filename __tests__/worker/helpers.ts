/** Worker test helpers: a job-server config, a runtime on a fresh database, submits, a manual clock, an evented notifier. */
import { EventEmitter, once } from "node:events";
import * as path from "node:path";
import { silentLogger } from "../../lib";
import {
  createTaskRuntime,
  MemoryTaskNotifier,
  ORDINARY_MCP_TASK_DRIVER,
  TaskSubmitRequest,
  type TaskDelivery,
  type TaskRecord,
  type TaskRuntime,
} from "../../lib/tasks";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { ManualClock as Clock } from "../fixtures/clock";
import { JOB_TOOLSET } from "../fixtures/task-tools";

export { Clock };


/** A MemoryTaskNotifier that emits "delivery" after every launched run: tests wait on it, not on time. */
export class EventedNotifier extends MemoryTaskNotifier {
  readonly events = new EventEmitter();
  override async deliver(delivery: TaskDelivery, key: string): Promise<{ runId: string }> {
    const before = this.deliveries.length;
    const answer = await super.deliver(delivery, key);
    if (this.deliveries.length > before) this.events.emit("delivery", delivery);
    return answer;
  }
  /** Resolves once `count` deliveries have been launched. */
  async waitFor(count: number): Promise<void> {
    while (this.deliveries.length < count) await once(this.events, "delivery");
  }
}

export function jobsConfig(url: string, tasks: Record<string, unknown> = {}) {
  return {
    mcpTasks: { enabled: true, poll_interval_seconds: 5, ...tasks },
    mcpServers: { jobs: { type: "http", url, task_toolsets: [{ name: "build", ...JOB_TOOLSET }] } },
  };
}

export interface RuntimeSetup {
  dir: string;
  configPath: string;
  databaseUrl: string;
  runtime: TaskRuntime;
}

export async function setupRuntime(opts: {
  url: string;
  tasks?: Record<string, unknown>;
  clock?: () => Date;
  databaseUrl?: string;
  leaseOwner?: string;
}): Promise<RuntimeSetup> {
  const dir = await makeTempDir("task-worker-");
  const configPath = await writeConfig(dir, jobsConfig(opts.url, opts.tasks));
  const databaseUrl = opts.databaseUrl ?? `sqlite:${path.join(dir, "tasks.sqlite")}`;
  const runtime = await createTaskRuntime({
    configPath,
    databaseUrl,
    clock: opts.clock,
    leaseOwner: opts.leaseOwner,
    logger: silentLogger,
    toolkitOptions: { dataDir: dir },
  });
  return { dir, configPath, databaseUrl, runtime };
}

/** Submits one job through the service, as the submit wrapper does. */
export function submitJob(runtime: TaskRuntime, args: Record<string, unknown>, scope: { user?: string; thread?: string } = {}): Promise<TaskRecord> {
  return runtime.service.submit(
    ORDINARY_MCP_TASK_DRIVER,
    new TaskSubmitRequest({
      userId: scope.user ?? "ann",
      threadId: scope.thread ?? "th-1",
      serverName: "jobs",
      taskName: "build",
      arguments: args,
      driverData: { ...JOB_TOOLSET },
    }),
  );
}
