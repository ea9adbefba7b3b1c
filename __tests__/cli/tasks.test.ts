/**
 * `mcp-harness tasks list|show|cancel` on a real SQLite store: scoped by --user/--thread, a table or --json,
 * never the remote id or driver data, and a cancel that only persists the fence (no server is even running).
 */
import { beforeEach, describe, expect, test } from "@jest/globals";
import { readdir, readFile, writeFile } from "node:fs/promises";
import sqlite3 from "sqlite3";
import * as path from "node:path";
import { runCli, type CliIo } from "../../lib/cli";
import { openTaskStore, TaskSnapshot, type TaskStore } from "../../lib/tasks";
import { migrate, openTaskDatabase, TASK_STORE_MIGRATIONS } from "../../lib/tasks/store";
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

describe("server-controlled text in the human views", () => {
  const HOSTILE_ERROR = "boom\n\u001b[2J\u001b]0;owned\u0007line2\r\nt-fake  build  completed\u009b31m\u202eevil\u2028next\u2066x\u007f";
  const ESCAPED_ERROR = "boom\\n\\x1b[2J\\x1b]0;owned\\x07line2\\r\\nt-fake  build  completed\\x9b31m\\u202eevil\\u2028next\\u2066x\\x7f";

  beforeEach(async () => {
    await withStore((store) =>
      store.create({
        id: "t-evil",
        userId: "ann",
        threadId: "th-3",
        serverName: "jobs",
        driverName: "ordinary-tools",
        remoteTaskId: `${REMOTE}-evil`,
        taskName: "build\u001b[31m\nt-forged",
        snapshot: new TaskSnapshot({ status: "failed", error: HOSTILE_ERROR, result_preview: `a\nb${"x".repeat(3000)}` }),
        nextPollAt: null,
      }),
    );
  });

  test("show and list escape control, separator and bidi characters, so rows cannot be forged or the terminal driven", async () => {
    const show = io(env);
    expect(await runCli(["tasks", "show", "t-evil", "--user", "ann"], show)).toBe(0);
    const text = show.stdout.join("\n");
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
    expect(text.split("\n")).toHaveLength(2 + 15);
    const errorLine = text.split("\n").find((l) => l.startsWith("error "))!;
    expect(errorLine.replace(/^error\s+/, "")).toBe(ESCAPED_ERROR);
    expect(text).toMatch(/^task_name\s+build\\x1b\[31m\\nt-forged$/m);

    const list = io(env);
    expect(await runCli(["tasks", "list", "--user", "ann", "--thread", "th-3"], list)).toBe(0);
    const lines = list.stdout.join("\n").split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatch(/^t-evil\s+build\\x1b\[31m\\nt-forged\s+failed\s/);

    const cancel = io(env);
    expect(await runCli(["tasks", "cancel", "t-evil", "--user", "ann", "--thread", "th-3"], cancel)).toBe(0);
    expect(cancel.stdout).toEqual(["t-evil (build\\x1b[31m\\nt-forged) is already failed; nothing to cancel"]);
  });

  test("a long cell is bounded in the table; --json keeps the value exact", async () => {
    const show = io(env);
    expect(await runCli(["tasks", "show", "t-evil", "--user", "ann"], show)).toBe(0);
    const preview = show.stdout.join("\n").split("\n").find((l) => l.startsWith("result_preview"))!;
    expect(preview).toMatch(/^result_preview\s+a\\nbx+… \[truncated \d+ characters\]$/);
    expect(preview.length).toBeLessThan(300);

    const json = io(env);
    expect(await runCli(["tasks", "show", "t-evil", "--user", "ann", "--json"], json)).toBe(0);
    expect(JSON.parse(json.stdout.join(""))).toMatchObject({ error: HOSTILE_ERROR, result_preview: `a\nb${"x".repeat(3000)}`, task_name: "build\u001b[31m\nt-forged" });
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

  test("a task that finished after an earlier request is already <status>: nothing is requested, --json says so", async () => {
    await withStore(async (store) => {
      expect(await store.requestCancel("t-run", "ann", "th-1")).not.toBeNull();
      const [claimed] = await store.claimCancels({ leaseOwner: "w-1", leaseSeconds: 60, limit: 1, now: new Date(Date.now() + 1000) });
      const applied = await store.applyCancelSnapshot({
        taskId: "t-run",
        leaseOwner: "w-1",
        leaseExpiresAt: claimed!.lease_expires_at,
        snapshot: new TaskSnapshot({ status: "cancelled" }),
        trackingDegradedAfterErrors: 3,
      });
      expect(applied).toBe(true);
    });
    const before = await withStore((s) => s.get("t-run", "ann"));
    expect(before).toMatchObject({ status: "cancelled" });
    expect(before!.cancel_requested_at).toBeInstanceOf(Date);

    const out = io(env);
    expect(await runCli(["tasks", "cancel", "t-run", "--user", "ann", "--thread", "th-1"], out)).toBe(0);
    expect(out.stdout.join("")).toBe("t-run (build) is already cancelled; nothing to cancel");
    const json = io(env);
    expect(await runCli(["tasks", "cancel", "t-run", "--user", "ann", "--thread", "th-1", "--json"], json)).toBe(0);
    // The task keeps the fence of the earlier request; this call requested nothing.
    expect(JSON.parse(json.stdout.join(""))).toMatchObject({ ok: true, cancel_requested: false, task: { task_id: "t-run", status: "cancelled", cancel_requested: true } });
    expect((await withStore((s) => s.get("t-run", "ann")))!.updated_at).toEqual(before!.updated_at);
  });

  test("no store where the URL points: one line and exit 1, and no empty store is created there", async () => {
    const dir = await makeTempDir("cli-tasks-none-");
    for (const variables of [{ MCP_HARNESS_DATABASE_URL: `sqlite:${path.join(dir, "tasks.sqlite")}` }, { MCP_HARNESS_DATA_DIR: dir }]) {
      const out = { ...io(variables), cwd: dir };
      expect(await runCli(["tasks", "list", "--user", "ann", "--thread", "th-1"], out)).toBe(1);
      expect(out.stdout).toEqual([]);
      expect(out.stderr).toEqual([expect.stringMatching(/^mcp-harness tasks: .*there is no task store at .*tasks\.sqlite/)]);
    }
    expect(await readdir(dir)).toEqual([]);
  });

  test("another application's SQLite file, or an empty one, is refused and left exactly as it was", async () => {
    const dir = await makeTempDir("cli-tasks-foreign-");
    const foreign = path.join(dir, "app.sqlite");
    await new Promise<void>((resolve, reject) => {
      const db = new sqlite3.Database(foreign, (err) => {
        if (err) return reject(err);
        db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep me');", (e) =>
          db.close(() => (e ? reject(e) : resolve())),
        );
      });
    });
    const empty = path.join(dir, "empty.sqlite");
    await writeFile(empty, "");
    for (const file of [foreign, empty]) {
      const before = await readFile(file);
      const out = io({ MCP_HARNESS_DATABASE_URL: `sqlite:${file}` });
      expect(await runCli(["tasks", "list", "--user", "ann", "--thread", "th-1"], out)).toBe(1);
      expect(out.stderr).toEqual([expect.stringMatching(/^mcp-harness tasks: .*is not a task store \(it has no mcp_tasks table\)$/)]);
      expect((await readFile(file)).equals(before)).toBe(true);
    }
    expect((await readdir(dir)).sort()).toEqual(["app.sqlite", "empty.sqlite"]);
  });

  test("a store of an older schema is refused, not upgraded, by a tool that only reads", async () => {
    const file = path.join(await makeTempDir("cli-tasks-old-"), "tasks.sqlite");
    const { db } = await openTaskDatabase({ url: `sqlite:${file}` });
    await migrate(db, { to: TASK_STORE_MIGRATIONS[0].name });
    await db.close();
    const out = io({ MCP_HARNESS_DATABASE_URL: `sqlite:${file}` });
    expect(await runCli(["tasks", "list", "--user", "ann", "--thread", "th-1"], out)).toBe(1);
    expect(out.stderr).toEqual([expect.stringMatching(/^mcp-harness tasks: the task store's schema is older than this version \(missing .*\); start a worker/)]);
  });

  test("listing does not wait for another process's write transaction", async () => {
    // A writer (a worker mid-transaction, a backup, a sqlite3 shell) holds the write lock while the list runs.
    const file = url.slice("sqlite:".length);
    const holder = new sqlite3.Database(file);
    await new Promise<void>((resolve, reject) => holder.exec("BEGIN IMMEDIATE", (err) => (err ? reject(err) : resolve())));
    try {
      const out = io(env);
      expect(await runCli(["tasks", "list", "--user", "ann", "--thread", "th-1", "--json"], out)).toBe(0);
      expect(JSON.parse(out.stdout.join("")).count).toBe(2);
    } finally {
      await new Promise<void>((resolve) => holder.exec("ROLLBACK", () => holder.close(() => resolve())));
    }
  });

  test("a bad database URL is one line and exit 1", async () => {
    const out = io({ MCP_HARNESS_DATABASE_URL: "mysql://nope" });
    expect(await runCli(["tasks", "cancel", "t-run", "--user", "ann", "--thread", "th-1"], out)).toBe(1);
    expect(out.stderr).toHaveLength(1);
    expect(out.stderr[0]).toMatch(/^mcp-harness tasks: /);
  });
});
