/**
 * A stdio child holding a pending durable task across hot reloads of the config (adversarial cases of the adoption by
 * the next generation's pool): a call in flight on it, a failed reload, a load discarded because the file changed while
 * it discovered, the bound of the adopting pool. Real stdio job servers, a real SQLite task store, real graphs.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { mkdir, writeFile } from "node:fs/promises";
import { realpathSync } from "node:fs";
import * as path from "node:path";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { ScriptedChatModel } from "../../lib/agent";
import { threadPaths } from "../../lib/sessions/workspace";
import { JOB_TOOLSET, makeTempDir, startHttpFixture, stdioFixture, writeConfig } from "../fixtures";
import { agentTurn, runningCall, toolNodeGraph } from "../fixtures/graph";
import { alive, waitUntil } from "../fixtures/processes";
import { closeTaskHarnesses, pidCall, startTaskHarness, submitWithPid, type TaskHarness } from "../fixtures/task-harness";

const SECRET = "adopt-secret-7f3c9e21d4";
process.env.ADOPT_TEST_SECRET = SECRET;
const launch = stdioFixture({ name: "local", toolNames: ["pid", "await_file", "leak"], tasks: true });

const closers: (() => Promise<void>)[] = [];

afterEach(async () => {
  await closeTaskHarnesses();
  for (const close of closers.splice(0)) await close();
});

type Setup = TaskHarness;

function config(extra: Record<string, unknown> = {}, description = "jobs") {
  return {
    mcpTasks: { enabled: true, poll_interval_seconds: 5 },
    mcpServers: {
      local: {
        type: "stdio",
        description,
        ...launch,
        env: { ...launch.env, LEAK_ME: "$ADOPT_TEST_SECRET" },
        tool_call_timeout: null,
        task_toolsets: [{ name: "compile", ...JOB_TOOLSET }],
      },
      ...extra,
    },
  };
}

async function setup(maxStdioSessions?: number): Promise<Setup> {
  const dir = await makeTempDir("task-adopt-");
  const configPath = await writeConfig(dir, config());
  return startTaskHarness(dir, configPath, maxStdioSessions ? { maxStdioSessions } : {});
}

async function pidOf(tools: DynamicStructuredTool[], user: string, thread: string): Promise<number> {
  const [message] = await agentTurn(tools, user, thread, [pidCall("pid-x")]);
  return Number(message!.content);
}

async function pollTwice(s: Setup): Promise<void> {
  await s.runtime.runOnce(s.clock.advance(5));
  await s.runtime.runOnce(s.clock.advance(5));
}

/** bob's task on th-a completes in the holder's process, the scope's next call runs there too, and close() ends it. */
async function expectCompletedInHolder(s: Setup, tools: DynamicStructuredTool[], taskId: string, holder: number): Promise<void> {
  await pollTwice(s);
  const row = await s.runtime.service.getTask(taskId, "bob");
  expect([row?.status, row?.error]).toEqual(["completed", null]);
  expect(row?.result).toMatchObject({ pid: holder });
  expect(await pidOf(tools, "bob", "th-a")).toBe(holder);
  await s.toolkit.close();
  expect(alive(holder)).toBe(false);
}

describe("adoption of a task holder across reloads", () => {
  test("a call in flight on the holder during the reload ends well; the holder serves on, keeps its task and closes with close()", async () => {
    const s = await setup();
    const { pid: holder, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "a", steps: 2 });
    const gate = path.join(threadPaths(realpathSync(s.dir), "th-a").tmp, "gate", "open");
    await mkdir(path.dirname(gate));
    const graph = toolNodeGraph(s.tools);
    const { done } = await runningCall(graph, "local_await_file", { path: ".mcp/tmp/gate/open" }, { configurable: { thread_id: "th-a", langgraph_auth_user_id: "bob" } });
    await writeConfig(s.dir, config({}, "jobs, edited"));
    const tools = await s.toolkit.getTools();
    await writeFile(gate, "");
    expect((await done).status).toBe("success");
    expect(alive(holder)).toBe(true);
    await expectCompletedInHolder(s, tools, taskId, holder);
    expect(s.logger.messages("warn")).toEqual([]);
  });

  test("a reload that fails (invalid file) keeps the holder; the next good one adopts it", async () => {
    const s = await setup();
    const { pid: holder, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "b", steps: 2 });
    await writeFile(path.join(s.dir, "extensions_config.json"), "{ not json");
    await expect(s.toolkit.getTools()).rejects.toThrow();
    expect(alive(holder)).toBe(true);
    await writeConfig(s.dir, config({}, "jobs, fixed"));
    const tools = await s.toolkit.getTools();
    await expectCompletedInHolder(s, tools, taskId, holder);
  });

  test("reset() twice and a reload: the holder is adopted once, completes, and no child is left after close()", async () => {
    const s = await setup();
    const { pid: holder, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "c", steps: 2 });
    await s.toolkit.reset();
    await s.toolkit.reset();
    await writeConfig(s.dir, config({}, "jobs, again"));
    await s.toolkit.getTools();
    await pollTwice(s);
    expect((await s.runtime.service.getTask(taskId, "bob"))?.result).toMatchObject({ pid: holder });
    await s.toolkit.close();
    expect(alive(holder)).toBe(false);
  });

  test("a load discarded because the file changed while it discovered: the holder it adopted goes on to the next load, its task completes there", async () => {
    const s = await setup();
    const { pid: holder, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "d", steps: 2 });
    let openGate!: () => void;
    const initGate = new Promise<void>((resolve) => (openGate = resolve));
    const http = await startHttpFixture({ name: "late", toolNames: ["echo"], initGate });
    closers.push(() => http.close());
    const late = { late: { type: "http", url: http.url } };
    await writeConfig(s.dir, config(late, "jobs, 1"));
    const loading = s.toolkit.getTools();
    await http.waitForRequest((r) => r.rpcMethods?.includes("initialize") === true);
    await writeConfig(s.dir, config(late, "jobs, 2"));
    openGate();
    const tools = await loading;
    expect(s.logger.messages("info")).toContainEqual(expect.stringContaining("discarding that load"));
    expect(alive(holder)).toBe(true);
    await expectCompletedInHolder(s, tools, taskId, holder);
  });

  test("bound 2, two holders adopted: both kept, the discovery child goes; exactly the holders live after the reload", async () => {
    const s = await setup(2);
    const a = await submitWithPid(s.tools, "bob", "th-a", { label: "a", mode: "held" });
    const b = await submitWithPid(s.tools, "cy", "th-b", { label: "b", mode: "held" });
    await writeConfig(s.dir, config({}, "jobs, edited"));
    const tools = await s.toolkit.getTools();
    expect([alive(a.pid), alive(b.pid)]).toEqual([true, true]);
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(a.taskId, "bob"))?.status).toBe("working");
    expect((await s.runtime.service.getTask(b.taskId, "cy"))?.status).toBe("working");
    // A third scope: the bound closes neither holder while an ordinary child can go.
    const third = await pidOf(tools, "dan", "th-c");
    expect(await waitUntil(() => [a.pid, b.pid, third].filter(alive).length === 2)).toBe(true);
    expect([alive(a.pid), alive(b.pid)]).toEqual([true, true]);
    expect(s.logger.messages("warn")).toEqual([]);
    await s.toolkit.close();
    expect([a.pid, b.pid, third].filter(alive)).toEqual([]);
  });

  test("a task failed for good by a protocol error (a status answer naming another task) no longer holds its child: a reload closes it", async () => {
    const s = await setup();
    const { pid: child, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "m", mode: "mismatch" });
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(taskId, "bob"))?.status).toBe("failed");
    await writeConfig(s.dir, config({}, "jobs, edited"));
    await s.toolkit.getTools();
    expect(await waitUntil(() => !alive(child))).toBe(true);
  });

  test("a task failed for good by the payload bounds (an input_required over 64 KiB, the status answer itself well-formed) no longer holds its child: a reload closes it", async () => {
    const s = await setup();
    const { pid: child, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "q", mode: "big_input", size: 70_000 });
    await s.runtime.runOnce(s.clock.advance(5));
    const row = await s.runtime.service.getTask(taskId, "bob");
    expect([row?.status, row?.error]).toEqual(["failed", expect.stringContaining("input_required payload exceeds the 65536-byte limit")]);
    await writeConfig(s.dir, config({}, "jobs, edited"));
    await s.toolkit.getTools();
    expect(await waitUntil(() => !alive(child))).toBe(true);
  });

  test("a cancel answered cancelled with a result_artifact over 64 KiB fails the task for good (not retried for ever) and no longer holds its child", async () => {
    const s = await setup();
    const { pid: child, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "c", mode: "bad_cancel" });
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(taskId, "bob"))?.status).toBe("working");
    await s.runtime.service.cancelTask(taskId, "th-a", "bob");
    await s.runtime.runOnce(s.clock.advance(1));
    const row = await s.runtime.service.getTask(taskId, "bob");
    expect([row?.status, row?.error, row?.result_artifact, row?.next_cancel_at]).toEqual([
      "failed",
      "MCP task result_artifact payload exceeds the 65536-byte limit",
      null,
      null,
    ]);
    // Nothing is asked again: the row is not claimed any more.
    await s.runtime.runOnce(s.clock.advance(600));
    expect((await s.runtime.service.getTask(taskId, "bob"))?.cancel_attempt_count).toBe(1);
    await writeConfig(s.dir, config({}, "jobs, edited"));
    await s.toolkit.getTools();
    expect(await waitUntil(() => !alive(child))).toBe(true);
  });

  test("the adopted child's echo of its env secret is scrubbed from its result and from its stderr lines", async () => {
    const s = await setup();
    const { pid: holder } = await submitWithPid(s.tools, "bob", "th-a", { label: "s", mode: "held" });
    await writeConfig(s.dir, config({}, "jobs, edited"));
    const tools = await s.toolkit.getTools();
    const [pid, leaked] = await agentTurn(tools, "bob", "th-a", [pidCall("pid-s"), ScriptedChatModel.toolCall("local_leak", { env: ["LEAK_ME"] }, "leak-1")]);
    expect(Number(pid!.content)).toBe(holder);
    expect(leaked!.status).toBe("success");
    const seen = JSON.stringify({ content: leaked!.content, artifact: leaked!.artifact ?? null });
    expect(seen).toContain("[redacted]");
    expect(seen).not.toContain(SECRET);
    expect(seen).not.toContain(Buffer.from(SECRET).toString("base64"));
    // The child's stderr line of the echo reaches the log through the redactor of the pool that owns it now.
    expect(await waitUntil(() => s.logger.lines.some((l) => l.message.includes("leak: rejected")))).toBe(true);
    for (const level of ["debug", "info", "warn", "error"] as const) expect(s.logger.messages(level).join("\n")).not.toContain(SECRET);
  });

  test("close() while the load that adopted the holder still discovers: the holder is closed with that load's pool, before close() resolves", async () => {
    const s = await setup();
    const { pid: holder } = await submitWithPid(s.tools, "bob", "th-a", { label: "z", mode: "held" });
    let openGate!: () => void;
    const initGate = new Promise<void>((resolve) => (openGate = resolve));
    const http = await startHttpFixture({ name: "late", toolNames: ["echo"], initGate });
    closers.push(() => http.close());
    await writeConfig(s.dir, config({ late: { type: "http", url: http.url } }, "jobs, 1"));
    const loading = s.toolkit.getTools();
    await http.waitForRequest((r) => r.rpcMethods?.includes("initialize") === true);
    const closing = s.toolkit.close();
    openGate();
    await closing;
    await expect(loading).rejects.toThrow();
    expect(alive(holder)).toBe(false);
  });

  test("bound 1: a child whose task failed for good by a protocol error is an ordinary idle one again and goes before a new scope's", async () => {
    const s = await setup(1);
    const { pid: first, taskId } = await submitWithPid(s.tools, "bob", "th-a", { label: "m", mode: "malformed" });
    await s.runtime.runOnce(s.clock.advance(5));
    expect((await s.runtime.service.getTask(taskId, "bob"))?.status).toBe("failed");
    const second = await pidOf(s.tools, "bob", "th-b");
    // The bound closed the idle child of the first scope as the second came up: that scope's next call starts a new one.
    expect(await pidOf(s.tools, "bob", "th-b")).toBe(second);
    expect(await waitUntil(() => !alive(first))).toBe(true);
  });
});
