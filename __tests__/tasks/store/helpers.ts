/** Store test helpers: one SQLite file per test, one PostgreSQL schema per test file, a manual clock. */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import * as path from "node:path";
import { createInterface } from "node:readline";
import { Client } from "pg";
import { openTaskStore, TaskSnapshot, type OpenTaskStoreOptions, type TaskStore } from "../../../lib/tasks";
import { ManualClock as FixtureClock } from "../../fixtures/clock";
import { makeTempDir } from "../../fixtures/config";
import { TSX_CJS_REGISTER } from "../../fixtures/stdio";

export const PG_URL = process.env.MCP_HARNESS_TEST_POSTGRES_URL;
if (!PG_URL) console.log("PostgreSQL store tests skipped: MCP_HARNESS_TEST_POSTGRES_URL not set");

export const T0 = new Date("2026-03-01T12:00:00.000Z");

/** The shared manual clock, starting at T0 here. */
export class ManualClock extends FixtureClock {
  constructor(current = T0) {
    super(current);
  }
}

export interface Target {
  name: "sqlite" | "postgres";
  /** A URL for a fresh, empty database (a new SQLite file, or a new schema of the test database). */
  fresh(): Promise<string>;
  cleanup(): Promise<void>;
}

const sqliteTarget = (): Target => ({
  name: "sqlite",
  async fresh() {
    const dir = await makeTempDir("mcp-tasks-");
    return `sqlite:${path.join(dir, "tasks.sqlite")}`;
  },
  async cleanup() {},
});

const postgresTarget = (base: string): Target => {
  const schemas: string[] = [];
  return {
    name: "postgres",
    async fresh() {
      const schema = `mcp_test_${randomBytes(6).toString("hex")}`;
      schemas.push(schema);
      return `${base}${base.includes("?") ? "&" : "?"}schema=${schema}`;
    },
    async cleanup() {
      if (schemas.length === 0) return;
      const client = new Client({ connectionString: base });
      await client.connect();
      for (const schema of schemas.splice(0)) await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    },
  };
};

/** SQLite always; PostgreSQL when `MCP_HARNESS_TEST_POSTGRES_URL` is set. */
export function targets(): Target[] {
  return PG_URL ? [sqliteTarget(), postgresTarget(PG_URL)] : [sqliteTarget()];
}

export function openStore(url: string, clock: ManualClock, extra: OpenTaskStoreOptions = {}): Promise<TaskStore> {
  return openTaskStore({ url, clock: clock.now, ...extra });
}

let counter = 0;
/** A pollable task, due now. */
export async function seedTask(
  store: TaskStore,
  overrides: { id?: string; userId?: string; threadId?: string; status?: string; taskName?: string; nextPollAt?: Date | null; snapshot?: TaskSnapshot } = {},
) {
  counter += 1;
  const id = overrides.id ?? `mcp-task-${counter}-${randomBytes(3).toString("hex")}`;
  return store.create({
    id,
    userId: overrides.userId ?? "alice",
    threadId: overrides.threadId ?? "thread-1",
    serverName: "jobs",
    driverName: "ordinary-tools",
    remoteTaskId: `remote-${id}`,
    taskName: overrides.taskName ?? "report",
    snapshot: overrides.snapshot ?? new TaskSnapshot({ status: overrides.status ?? "working" }),
    nextPollAt: overrides.nextPollAt === undefined ? store.now() : overrides.nextPollAt,
  });
}

export const completed = (result: unknown = { ok: true }) => new TaskSnapshot({ status: "completed", result });

export const CHILD_PATH = path.join(__dirname, "child.ts");

export interface Child {
  lines: AsyncIterator<string>;
  next(): Promise<string>;
  exit: Promise<number | null>;
  kill(signal: NodeJS.Signals): void;
  send(line: string): void;
  pid: number;
}

const running = new Set<ChildProcess>();

/** Kills every child still running (a failed test must not leave workers waiting on their stdin). */
export function killChildren(): void {
  for (const proc of running) proc.kill("SIGKILL");
  running.clear();
}

/** Runs `child.ts <command> <json args>` in its own node process. */
export function startChild(command: string, args: object): Child {
  const proc = spawn(process.execPath, ["--require", TSX_CJS_REGISTER, CHILD_PATH, command, JSON.stringify(args)], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  running.add(proc);
  proc.once("exit", () => running.delete(proc));
  let stderr = "";
  proc.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const lines = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  const exit = once(proc, "exit").then(([code]) => {
    if (code !== 0 && code !== null) throw new Error(`child ${command} exited ${code}: ${stderr}`);
    return code as number | null;
  });
  exit.catch(() => undefined);
  return {
    lines,
    pid: proc.pid!,
    async next() {
      const r = await lines.next();
      if (r.done) {
        await exit;
        throw new Error(`child ${command} ended early: ${stderr}`);
      }
      return r.value;
    },
    exit,
    kill: (signal) => proc.kill(signal),
    send: (line) => proc.stdin!.write(`${line}\n`),
  };
}
