/**
 * `mcp-harness tasks list|show|cancel` on a real SQLite store: scoped by --user/--thread, a table or --json,
 * never the remote id or driver data, and a cancel that only persists the fence (no server is even running).
 */
import { beforeEach, describe, expect, test } from "@jest/globals";
import * as path from "node:path";
import { runCli, type CliIo } from "../../lib/cli";
import { openTaskStore, TaskSnapshot, type TaskStore } from "../../lib/tasks";
import { makeTempDir } from "../fixtures/config";

const REMOTE = "remote-id-7c1e";

type TestIo = CliIo & { stdout: string[]; stderr: string[] };

function io(env: NodeJS.ProcessEnv): TestIo {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, out: (t) => stdout.push(t), err: (t) => stderr.push(t), env, cwd: process.cwd() };
}

let url: string;
let env: NodeJS.ProcessEnv;

async function withStore<T>(work: (store: TaskStore) => Promise<T>): Promise<T> {
  const store = await openTaskStore({ url });
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

beforeEach(async () => {
  url = `sqlite:${path.join(await makeTempDir("cli-tasks-"), "tasks.sqlite")}`;
  env = { MCP_HARNESS_DATABASE_URL: url };
  await withStore(async (store) => {
    const create = (id: string, user: string, thread: string, snapshot: TaskSnapshot, name = "build") =>
      store.create({
        id,
        userId: user,
        threadId: thread,
        serverName: "jobs",
        driverName: "ordinary-tools",
        remoteTaskId: `${REMOTE}-${id}`,
        taskName: name,
        snapshot,
        driverData: { status_tool: "job_status" },
        nextPollAt: snapshot.isPollable ? new Date() : null,
      });
    await create("t-run", "ann", "th-1", new TaskSnapshot({ status: "working" }));
    await create("t-done", "ann", "th-1", new TaskSnapshot({ status: "completed", result: { answer: 42 } }), "report");
    await create("t-other-thread", "ann", "th-2", new TaskSnapshot({ status: "working" }));
    await create("t-bob", "bob", "th-1", new TaskSnapshot({ status: "working" }));
  });
});

describe("tasks list", () => {
  test("a table of the thread's tasks for the user; --active keeps the live ones", async () => {
    const out = io(env);
    expect(await runCli(["tasks", "list", "--user", "ann", "--thread", "th-1"], out)).toBe(0);
    const text = out.stdout.join("\n");
    const lines = text.split("\n");
    expect(lines[0]).toMatch(/^task id\s+name\s+status\s+updated\s+cancel\s+notification$/);
    expect(lines.slice(2).map((l) => l.split(/\s+/).slice(0, 3).join(" ")).sort()).toEqual(["t-done report completed", "t-run build working"]);
    expect(text).not.toContain(REMOTE);

    const active = io(env);
    expect(await runCli(["tasks", "list", "--user=ann", "--thread=th-1", "--active", "--json"], active)).toBe(0);
    const parsed = JSON.parse(active.stdout.join("\n")) as { tasks: { task_id: string }[]; count: number };
    expect(parsed).toMatchObject({ count: 1, tasks: [{ task_id: "t-run", status: "working", user_id: "ann", thread_id: "th-1", cancel_requested: false }] });
    expect(JSON.stringify(parsed)).not.toMatch(/remote|driver_data|job_status|server_name/);
  });

  test("another user's thread lists nothing; missing scope is a usage error (exit 2)", async () => {
    const out = io(env);
    expect(await runCli(["tasks", "list", "--user", "carol", "--thread", "th-1", "--json"], out)).toBe(0);
    expect(JSON.parse(out.stdout.join(""))).toEqual({ tasks: [], count: 0 });
    const usage = io(env);
    expect(await runCli(["tasks", "list", "--thread", "th-1"], usage)).toBe(2);
    expect(usage.stderr.join("\n")).toContain("tasks list needs --user <id>");
    expect(await runCli(["tasks", "list", "--user", "ann", "--thread", "th-1", "--limit", "0"], io(env))).toBe(2);
    expect(await runCli(["tasks", "purge"], io(env))).toBe(2);
  });
});

describe("tasks show", () => {
  test("one task's fields, as a table or JSON; another user's task is not found (exit 1)", async () => {
    const out = io(env);
    expect(await runCli(["tasks", "show", "t-done", "--user", "ann"], out)).toBe(0);
    const text = out.stdout.join("\n");
    expect(text).toMatch(/^task_id\s+t-done$/m);
    expect(text).toMatch(/^result\s+\{"answer":42\}$/m);
    expect(text).not.toContain(REMOTE);
    const json = io(env);
    expect(await runCli(["tasks", "show", "t-done", "--user", "ann", "--json"], json)).toBe(0);
    expect(JSON.parse(json.stdout.join(""))).toMatchObject({ task_id: "t-done", status: "completed", result: { answer: 42 }, notification_status: "pending" });
    const hidden = io(env);
    expect(await runCli(["tasks", "show", "t-bob", "--user", "ann"], hidden)).toBe(1);
    expect(hidden.stderr.join("")).toContain("no task 't-bob' for user 'ann'");
    expect(await runCli(["tasks", "show", "t-run", "--user", "ann", "--thread", "th-2"], io(env))).toBe(1);
  });
});

describe("tasks cancel", () => {
  test("persists the fence only, once; a finished task is left alone; another thread's task is not found", async () => {
    const out = io(env);
    expect(await runCli(["tasks", "cancel", "t-run", "--user", "ann", "--thread", "th-1"], out)).toBe(0);
    expect(out.stdout.join("")).toBe("cancellation of t-run (build, working) requested; a running worker cancels it remotely");
    const first = await withStore((s) => s.get("t-run", "ann"));
    expect(first).toMatchObject({ status: "working", lease_owner: null });
    expect(first!.cancel_requested_at).toBeInstanceOf(Date);

    const again = io(env);
    expect(await runCli(["tasks", "cancel", "t-run", "--user", "ann", "--thread", "th-1", "--json"], again)).toBe(0);
    expect(JSON.parse(again.stdout.join(""))).toMatchObject({ ok: true, cancel_requested: true, task: { task_id: "t-run", status: "working" } });
    expect((await withStore((s) => s.get("t-run", "ann")))!.updated_at).toEqual(first!.updated_at);

    const done = io(env);
    expect(await runCli(["tasks", "cancel", "t-done", "--user", "ann", "--thread", "th-1"], done)).toBe(0);
    expect(done.stdout.join("")).toBe("t-done (report) is already completed; nothing to cancel");

    const elsewhere = io(env);
    expect(await runCli(["tasks", "cancel", "t-other-thread", "--user", "ann", "--thread", "th-1", "--json"], elsewhere)).toBe(1);
    expect(JSON.parse(elsewhere.stdout.join(""))).toEqual({ ok: false, error: "no task 't-other-thread' for user 'ann' on thread 'th-1'" });
    expect((await withStore((s) => s.get("t-other-thread", "ann")))!.cancel_requested_at).toBeNull();
  });

  test("a bad database URL is one line and exit 1", async () => {
    const out = io({ MCP_HARNESS_DATABASE_URL: "mysql://nope" });
    expect(await runCli(["tasks", "cancel", "t-run", "--user", "ann", "--thread", "th-1"], out)).toBe(1);
    expect(out.stderr).toHaveLength(1);
    expect(out.stderr[0]).toMatch(/^mcp-harness tasks: /);
  });
});
