/**
 * `mcp-harness worker`: in process (stopped through the io's signal) and as a child process (the CLI through tsx,
 * stopped by SIGTERM), against a real SQLite file and the job fixture server; one line per tick that changed
 * something, `--json` for machines, deliveries through the test file notifier.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import { readdir, readFile } from "node:fs/promises";
import * as path from "node:path";
import { runCli, type CliIo } from "../../lib/cli";
import type { TaskRuntime } from "../../lib/tasks";
import type { FileNotifierLine, TaskWorkerTickReport } from "../../lib/worker";
import { JOB_TOOLSET, startHttpFixture, stdioFixture, TaskBoard } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { startWorkerChild, type WorkerChild } from "../worker/cli-child";
import { setupRuntime, submitJob } from "../worker/helpers";

let board: TaskBoard;
let http: StreamableHttpFixture;
const runtimes: TaskRuntime[] = [];
const children: WorkerChild[] = [];

beforeAll(async () => {
  board = new TaskBoard();
  http = await startHttpFixture({ name: "jobs", toolNames: [], taskBoard: board });
});
afterEach(async () => {
  for (const c of children.splice(0)) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill("SIGKILL");
  for (const runtime of runtimes.splice(0)) await runtime.stop();
});
afterAll(async () => {
  await http.close();
});

async function setup() {
  const s = await setupRuntime({ url: http.url, tasks: { poll_interval_seconds: 1 } });
  runtimes.push(s.runtime);
  return s;
}

describe("in process", () => {
  test("a human line per tick that changed something, none for idle ticks; exit 0 when stopped", async () => {
    const s = await setup();
    await submitJob(s.runtime, { label: "one" });
    const stop = new AbortController();
    const stdout: string[] = [];
    const stderr: string[] = [];
    let applied!: () => void;
    const sawApplied = new Promise<void>((resolve) => (applied = resolve));
    const io: CliIo = {
      out: (t) => {
        stdout.push(t);
        if (t.includes("applied 1")) applied();
      },
      err: (t) => stderr.push(t),
      env: { MCP_HARNESS_DATABASE_URL: s.databaseUrl, MCP_HARNESS_DATA_DIR: s.dir },
      cwd: s.dir,
      stopSignal: stop.signal,
    };
    const exit = runCli(["worker", s.configPath, "--interval", "0.02"], io);
    await sawApplied;
    stop.abort();
    expect(await exit).toBe(0);
    expect(stdout).toEqual([expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z {2}claimed 1, applied 1$/)]);
    expect(stderr[0]).toMatch(/^mcp-harness worker: ticking every 0\.02s as .+ on sqlite; task servers: jobs; notifier: none \(events stay pending\)$/);
    expect(stderr.at(-1)).toMatch(/^mcp-harness worker: stopped after \d+ ticks$/);
  });

  test("a stdio task server gets one warning at startup: this worker polls its tasks in children of its own", async () => {
    const s = await setup();
    const toolset = { name: "build", ...JOB_TOOLSET };
    const both = await writeConfig(
      s.dir,
      {
        mcpTasks: { enabled: true },
        mcpServers: {
          jobs: { type: "http", url: http.url, task_toolsets: [toolset] },
          local: { type: "stdio", ...stdioFixture({ name: "local", tasks: true }), task_toolsets: [toolset] },
        },
      },
      "both.json",
    );
    const stop = new AbortController();
    stop.abort();
    const stderr: string[] = [];
    const io: CliIo = { out: () => undefined, err: (t) => stderr.push(t), env: { MCP_HARNESS_DATABASE_URL: s.databaseUrl, MCP_HARNESS_DATA_DIR: s.dir }, cwd: s.dir, stopSignal: stop.signal };
    expect(await runCli(["worker", both], io)).toBe(0);
    expect(stderr.filter((line) => line.startsWith("warning: "))).toEqual([
      "warning: MCP task server 'local' runs over stdio: this worker polls its tasks in children of its own, which know only " +
        "the jobs a server keeps outside its process; for a server that keeps them in its process, poll in the agent's " +
        "process (startTaskWorker)",
    ]);
  });

  test("usage and config errors: a bad interval is exit 2; tasks disabled or an unknown notifier say so", async () => {
    const s = await setup();
    const quiet = (): CliIo & { errors: string[] } => {
      const errors: string[] = [];
      return { errors, out: () => undefined, err: (t) => errors.push(t), env: { MCP_HARNESS_DATABASE_URL: s.databaseUrl }, cwd: s.dir };
    };
    const bad = quiet();
    expect(await runCli(["worker", s.configPath, "--interval", "0"], bad)).toBe(2);
    expect(bad.errors[0]).toContain("--interval must be a number of seconds above 0");
    const unknown = quiet();
    expect(await runCli(["worker", s.configPath, "--notifier", "carrier-pigeon"], unknown)).toBe(2);
    expect(unknown.errors[0]).toContain("unknown notifier 'carrier-pigeon' (known: none, langgraph)");
    const disabled = quiet();
    const off = await writeConfig(s.dir, { mcpTasks: { enabled: false }, mcpServers: {} }, "off.json");
    expect(await runCli(["worker", off], disabled)).toBe(1);
    expect(disabled.errors).toEqual(["mcp-harness worker: mcpTasks.enabled is false in the config: there is no task runtime to run"]);
  });

  test("tasks disabled: refused before the task store is opened, so no database is created or migrated", async () => {
    const dir = await makeTempDir("cli-worker-off-");
    const off = await writeConfig(dir, { mcpTasks: { enabled: false }, mcpServers: {} }, "off.json");
    const dataDir = path.join(dir, "data");
    const errors: string[] = [];
    const io: CliIo = { out: () => undefined, err: (t) => errors.push(t), env: { MCP_HARNESS_DATA_DIR: dataDir }, cwd: dir };
    expect(await runCli(["worker", off], io)).toBe(1);
    expect(errors).toEqual(["mcp-harness worker: mcpTasks.enabled is false in the config: there is no task runtime to run"]);
    expect(await readdir(dir)).toEqual(["off.json"]);
  });

  test("--notifier langgraph without --api-url: tasks disabled says so (exit 1); tasks enabled is exit 2, no database made", async () => {
    const dir = await makeTempDir("cli-worker-notifier-");
    const off = await writeConfig(dir, { mcpTasks: { enabled: false }, mcpServers: {} }, "off.json");
    const on = await writeConfig(dir, { mcpTasks: { enabled: true }, mcpServers: {} }, "on.json");
    const errors: string[] = [];
    const io: CliIo = { out: () => undefined, err: (t) => errors.push(t), env: { MCP_HARNESS_DATA_DIR: path.join(dir, "data") }, cwd: dir };
    expect(await runCli(["worker", off, "--notifier", "langgraph"], io)).toBe(1);
    expect(errors).toEqual(["mcp-harness worker: mcpTasks.enabled is false in the config: there is no task runtime to run"]);
    errors.length = 0;
    expect(await runCli(["worker", on, "--notifier", "langgraph"], io)).toBe(2);
    expect(errors[0]).toContain("--notifier langgraph needs --api-url <url> (or MCP_HARNESS_LANGGRAPH_API_URL)");
    expect((await readdir(dir)).sort()).toEqual(["off.json", "on.json"]);
  });

  test("a malformed --api-url, API URL variable or --assistant is a usage error (exit 2) whatever the config says, before it is read", async () => {
    const dir = await makeTempDir("cli-worker-notifier-bad-");
    const off = await writeConfig(dir, { mcpTasks: { enabled: false }, mcpServers: {} }, "off.json");
    const missing = path.join(dir, "missing.json");
    const cases: [string[], Record<string, string>, string][] = [
      [["--api-url", "ftp://example.test"], {}, "--api-url must be an http(s) URL"],
      [["--api-url", "http://u:p@example.test"], {}, "--api-url must not carry credentials"],
      [[], { MCP_HARNESS_LANGGRAPH_API_URL: "not a url" }, "MCP_HARNESS_LANGGRAPH_API_URL must be an http(s) URL"],
      [["--api-url", "http://example.test", "--assistant", " "], {}, "--assistant must name an assistant or graph id"],
    ];
    for (const config of [off, missing]) {
      for (const [options, env, expected] of cases) {
        const errors: string[] = [];
        const io: CliIo = { out: () => undefined, err: (t) => errors.push(t), env: { MCP_HARNESS_DATA_DIR: path.join(dir, "data"), ...env }, cwd: dir };
        expect([await runCli(["worker", config, "--notifier", "langgraph", ...options], io), errors[0]?.split("\n")[0]]).toEqual([2, expect.stringContaining(expected)]);
      }
    }
    expect(await readdir(dir)).toEqual(["off.json"]);
  });

  test("a config path naming a folder is the worker's own one line (exit 1), as a missing file is", async () => {
    const dir = await makeTempDir("cli-worker-folder-");
    const errors: string[] = [];
    const io: CliIo = { out: () => undefined, err: (t) => errors.push(t), env: { MCP_HARNESS_DATA_DIR: path.join(dir, "data") }, cwd: dir };
    expect(await runCli(["worker", dir], io)).toBe(1);
    expect(errors).toEqual([`mcp-harness worker: Failed to read extensions config at ${dir}: EISDIR`]);
    expect(await readdir(dir)).toEqual([]);
  });

  test("the config is read once: a file that turns to disabled after that read changes nothing for this process", async () => {
    const dir = await makeTempDir("cli-worker-once-");
    const on = await writeConfig(dir, { mcpTasks: { enabled: true }, mcpServers: {} }, "on.json");
    const off = await writeConfig(dir, { mcpTasks: { enabled: false }, mcpServers: {} }, "off.json");
    let reads = 0;
    // MCP_HARNESS_CONFIG is looked up on every read of the config: the first read finds it enabled, any later one not.
    const env: NodeJS.ProcessEnv = { MCP_HARNESS_DATABASE_URL: `sqlite:${path.join(dir, "tasks.sqlite")}` };
    Object.defineProperty(env, "MCP_HARNESS_CONFIG", { enumerable: true, get: () => (reads++ === 0 ? on : off) });
    const stop = new AbortController();
    stop.abort();
    const stderr: string[] = [];
    expect(await runCli(["worker"], { out: () => undefined, err: (t) => stderr.push(t), env, cwd: dir, stopSignal: stop.signal })).toBe(0);
    expect(reads).toBe(1);
    expect(stderr[0]).toMatch(/^mcp-harness worker: ticking every 5s as .+ on sqlite; task servers: none; notifier: none/);
  });
});

describe("as a child process", () => {
  test("--json lines per tick, deliveries through the test notifier, SIGTERM drains and exits 0", async () => {
    const s = await setup();
    const tasks = [await submitJob(s.runtime, { label: "a" }, { thread: "th-a" }), await submitJob(s.runtime, { label: "b", steps: 2 }, { thread: "th-b" })];
    const notifyFile = path.join(s.dir, "notify.jsonl");
    const worker = startWorkerChild(
      [s.configPath, "--interval", "0.05", "--json"],
      { MCP_HARNESS_DATABASE_URL: s.databaseUrl, MCP_HARNESS_DATA_DIR: s.dir, MCP_HARNESS_TEST_NOTIFY_FILE: notifyFile },
      s.dir,
    );
    children.push(worker);
    let delivered = 0;
    await worker.nextLine((line) => (delivered += (JSON.parse(line) as TaskWorkerTickReport).delivered) >= 2);
    worker.child.kill("SIGTERM");
    expect(await worker.exited).toEqual({ code: 0, signal: null });
    expect(worker.stderr()).toContain("mcp-harness worker: SIGTERM received, draining");
    expect(worker.stderr()).toMatch(/notifier: file \(MCP_HARNESS_TEST_NOTIFY_FILE\)/);

    const reports = worker.stdout.map((line) => JSON.parse(line) as TaskWorkerTickReport);
    for (const report of reports) expect(Object.entries(report).some(([k, v]) => typeof v === "number" && v > 0 && k !== "tickAt")).toBe(true);
    expect(reports.reduce((n, r) => n + r.applied, 0)).toBe(3);
    const lines = (await readFile(notifyFile, "utf8")).trim().split("\n").map((l) => JSON.parse(l) as FileNotifierLine);
    expect(lines.map((l) => [l.taskId, l.threadId, l.status, l.dispatchVersion, l.redelivery]).sort()).toEqual(
      [[tasks[0]!.id, "th-a", "completed", 1, false], [tasks[1]!.id, "th-b", "completed", 1, false]].sort(),
    );
    for (const task of tasks) expect(await s.runtime.store.get(task.id, "ann")).toMatchObject({ status: "completed", notification_status: "delivered" });
  });
});
