/**
 * Threads that are gone (a LangGraph server's stateless run, whose temporary thread the server deletes after the run;
 * a thread deleted through the API) leave no idle child first in line and no empty folder: a stdio session of a
 * temporary thread is the first the bound closes, and a session that closes (evicted, crashed, its pool closed)
 * removes its thread's folder when that holds only the empty skeleton the harness created, never a file, never
 * through a link, never while another session of the thread uses it.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { lstat, mkdir, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { MemorySaver } from "@langchain/langgraph";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { removeThreadSkeleton } from "../../lib/sessions/thread-folders";
import { INTERNAL_GITIGNORE_TEXT, threadPaths } from "../../lib/sessions/workspace";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { alive, waitUntil } from "../fixtures/processes";
import { stdioFixture } from "../fixtures/stdio";

const toolkits: McpToolkit[] = [];
const pools: SessionPool[] = [];
afterEach(async () => {
  await Promise.all([...toolkits.splice(0).map((t) => t.close()), ...pools.splice(0).map((p) => p.close())]);
});

const SH_SERVER = path.join(__dirname, "..", "fixtures", "sh-server.sh");
const launch = stdioFixture({ name: "local", toolNames: ["pid", "where", "fs_ops"] });
// The fixture runs under tsx, which keeps a compile cache in its TMPDIR: in the host's, the thread's temp folder stays empty.
const server = McpServerSchema.parse({ type: "stdio", ...launch, env: { ...launch.env, TMPDIR: tmpdir() } });
const scoped = (user: string, thread: string, temporary = false) => ({ headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope(user, thread, temporary) });
const threadFolder = (dataDir: string, thread: string) => path.dirname(threadPaths(dataDir, thread).userData);

async function poolIn(dataDir: string, maxStdioSessions?: number): Promise<SessionPool> {
  const pool = new SessionPool(new RecordingLogger(), { dataDir, ...(maxStdioSessions === undefined ? {} : { maxStdioSessions }) });
  pools.push(pool);
  return pool;
}

/** Acquires the thread's session, returns its pid, releases it. */
async function pidOf(pool: SessionPool, user: string, thread: string, temporary = false): Promise<number> {
  const lease = await pool.acquire("local", server, scoped(user, thread, temporary));
  lease.release();
  return lease.session.pid!;
}

describe("the empty thread folder of a session that closed", () => {
  test("is removed when its pool closes, when the bound evicts it and when its child crashes", async () => {
    const dataDir = await makeTempDir("mcp-thread-folders-");
    const pool = await poolIn(dataDir, 1);
    const crashed = await pidOf(pool, "u", "crashes");
    expect(existsSync(threadPaths(dataDir, "crashes").tmp)).toBe(true);
    process.kill(crashed, "SIGKILL");
    expect(await waitUntil(() => !existsSync(threadFolder(dataDir, "crashes")), 30_000)).toBe(true);

    const evicted = await pidOf(pool, "u", "evicted");
    await pidOf(pool, "u", "kept");
    expect(await waitUntil(() => !alive(evicted) && !existsSync(threadFolder(dataDir, "evicted")), 30_000)).toBe(true);
    expect(existsSync(threadPaths(dataDir, "kept").tmp)).toBe(true);
    await pool.close();
    // Nothing the harness created is left; the threads folder itself stays.
    expect(await readdir(path.join(dataDir, "threads"))).toEqual([]);
  });

  test("through a toolkit and a graph: three threads' runs leave no folder once the toolkit closed", async () => {
    const dataDir = await makeTempDir("mcp-thread-folders-kit-");
    const configPath = await writeConfig(await makeTempDir("mcp-thread-folders-cfg-"), { mcpServers: { sh: { type: "stdio", command: "bash", args: [SH_SERVER] } } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
    toolkits.push(toolkit);
    const graph = toolNodeGraph(await toolkit.getTools());
    for (const thread of ["r-1", "r-2", "r-3"]) {
      expect((await callThroughGraph(graph, "sh_pid", {}, { context: { user_id: "u" }, configurable: { thread_id: thread } })).status).toBe("success");
      expect(existsSync(threadPaths(dataDir, thread).workspace)).toBe(true);
    }
    await toolkit.close();
    expect(await readdir(path.join(dataDir, "threads"))).toEqual([]);
  });

  test("a file written there (in the temp folder too), a link in the chain or a process running there keeps the folder, and what is in it", async () => {
    const dataDir = await makeTempDir("mcp-thread-folders-kept-");
    const outside = await makeTempDir("mcp-thread-folders-outside-");
    await mkdir(path.join(outside, "tmp"));
    const pool = await poolIn(dataDir);
    // A file in the workspace; an empty file deep in the private temp folder; `.mcp` a link to an empty folder elsewhere.
    const written = await pool.acquire("local", server, scoped("u", "written"));
    const answer = await written.session.client.callTool({ name: "fs_ops", arguments: { ops: [{ op: "write", path: "notes.txt", content: "n" }] } });
    expect(answer.isError).toBeFalsy();
    written.release();
    await pidOf(pool, "u", "temp-file");
    await writeFile(path.join(threadPaths(dataDir, "temp-file").tmp, "left"), "");
    const linked = threadPaths(dataDir, "linked");
    await mkdir(linked.workspace, { recursive: true });
    await symlink(outside, path.join(linked.workspace, ".mcp"));
    await pidOf(pool, "u", "linked");
    // A process (of another host sharing the data dir, or one a server left) running in an otherwise empty thread folder.
    await pidOf(pool, "u", "busy");
    const busy = spawn("sleep", ["600"], { cwd: threadPaths(dataDir, "busy").workspace, stdio: "ignore" });
    await new Promise((resolve) => busy.once("spawn", resolve));
    try {
      await pool.close();
      expect(existsSync(path.join(threadPaths(dataDir, "written").workspace, "notes.txt"))).toBe(true);
      expect(existsSync(path.join(threadPaths(dataDir, "temp-file").tmp, "left"))).toBe(true);
      expect(existsSync(path.join(linked.workspace, ".mcp"))).toBe(true);
      expect(await readdir(outside)).toEqual(["tmp"]);
      expect(existsSync(threadPaths(dataDir, "busy").tmp)).toBe(true);
    } finally {
      busy.kill("SIGKILL");
    }
  });

  test(".mcp/.gitignore (which keeps the folder out of a repository at the workspace's root) goes with it; one a tool changed keeps it", async () => {
    const dataDir = await makeTempDir("mcp-thread-folders-gitignore-");
    const pool = await poolIn(dataDir);
    await pidOf(pool, "u", "ignored");
    const ignore = path.join(path.dirname(threadPaths(dataDir, "ignored").tmp), ".gitignore");
    expect(await readFile(ignore, "utf8")).toBe(INTERNAL_GITIGNORE_TEXT);
    expect((await readFile(ignore, "utf8")).split("\n")).toContain("*");
    await pidOf(pool, "u", "edited");
    const edited = path.join(path.dirname(threadPaths(dataDir, "edited").tmp), ".gitignore");
    await writeFile(edited, "!notes\n");
    await pool.close();
    expect(existsSync(threadFolder(dataDir, "ignored"))).toBe(false);
    expect(await readFile(edited, "utf8")).toBe("!notes\n");
  });

  test("a .mcp/.gitignore already there is never rewritten, nor written through when it is a link", async () => {
    const dataDir = await makeTempDir("mcp-thread-folders-gitignore-kept-");
    const outside = path.join(await makeTempDir("mcp-thread-folders-gitignore-outside-"), "target");
    await writeFile(outside, "theirs\n");
    const own = threadPaths(dataDir, "own");
    const linked = threadPaths(dataDir, "linked-ignore");
    for (const paths of [own, linked]) await mkdir(path.dirname(paths.tmp), { recursive: true });
    await writeFile(path.join(path.dirname(own.tmp), ".gitignore"), "mine\n");
    await symlink(outside, path.join(path.dirname(linked.tmp), ".gitignore"));
    const pool = await poolIn(dataDir);
    await pidOf(pool, "u", "own");
    await pidOf(pool, "u", "linked-ignore");
    expect(await readFile(path.join(path.dirname(own.tmp), ".gitignore"), "utf8")).toBe("mine\n");
    expect(await readFile(outside, "utf8")).toBe("theirs\n");
  });

  test("another session of the thread (another user, another pool) keeps it until the last one leaves", async () => {
    const dataDir = await makeTempDir("mcp-thread-folders-shared-");
    const pool = await poolIn(dataDir);
    const successor = await poolIn(dataDir);
    const ann = await pidOf(pool, "ann", "shared");
    await pidOf(pool, "bob", "shared");
    await pidOf(successor, "cy", "shared");
    process.kill(ann, "SIGKILL");
    await pool.close();
    // Ann's and Bob's sessions are gone, Cy's (a pool a reload started) still runs in the folder.
    expect(existsSync(threadPaths(dataDir, "shared").tmp)).toBe(true);
    await successor.close();
    expect(existsSync(threadFolder(dataDir, "shared"))).toBe(false);
  });

  test("a session of the thread that starts while its folder is being removed runs in a folder created after the removal", async () => {
    const dataDir = await makeTempDir("mcp-thread-folders-race-");
    const pool = await poolIn(dataDir);
    // Several rounds: the removal's steps and the new session's preparation interleave differently in each.
    for (let i = 0; i < 8; i += 1) {
      const paths = threadPaths(dataDir, `again-${i}`);
      await mkdir(paths.tmp, { recursive: true });
      // The removal starts (the thread's last session left) and a new session of the thread is acquired at once.
      const removed = removeThreadSkeleton(paths, () => true);
      const lease = await pool.acquire("local", server, scoped("u", `again-${i}`));
      try {
        expect(await removed).toBe(true);
        const where = await lease.session.client.callTool({ name: "where", arguments: {} });
        const seen = JSON.parse((where.content as { text: string }[])[0]!.text) as { cwd: string; TMP: string };
        expect(seen).toMatchObject({ cwd: paths.workspace, TMP: paths.tmp });
        expect(existsSync(paths.tmp)).toBe(true);
      } finally {
        lease.release();
      }
    }
  });

  test("only the empty skeleton goes: a removal with a session of the thread still in it does nothing", async () => {
    const dataDir = await makeTempDir("mcp-thread-folders-unit-");
    const paths = threadPaths(dataDir, "t");
    await mkdir(paths.tmp, { recursive: true });
    expect(await removeThreadSkeleton(paths, () => false)).toBe(false);
    expect(existsSync(paths.tmp)).toBe(true);
    // A prefix of the chain is the skeleton too (a `.mcp` that could not be made).
    await rm(path.dirname(paths.tmp), { recursive: true });
    expect(await removeThreadSkeleton(paths, () => true)).toBe(true);
    expect(existsSync(threadFolder(dataDir, "t"))).toBe(false);
    // Another name next to the chain keeps all of it.
    await mkdir(paths.tmp, { recursive: true });
    await mkdir(path.join(paths.userData, "outputs"));
    expect(await removeThreadSkeleton(paths, () => true)).toBe(false);
    expect(existsSync(paths.tmp)).toBe(true);
  });
});

describe("stdio sessions of temporary threads (a LangGraph server's stateless runs)", () => {
  test("the temp files of a temporary thread's sessions go with its folder; an entry there from before its sessions began stays, and keeps it", async () => {
    const dataDir = await makeTempDir("mcp-thread-folders-tmp-");
    const paths = threadPaths(dataDir, "t");
    await mkdir(paths.tmp, { recursive: true });
    const older = path.join(paths.tmp, "older.txt");
    const left = path.join(paths.tmp, "left.txt");
    await writeFile(older, "a kept run's");
    const olderCtime = (await lstat(older)).ctimeMs;
    // The sessions began after it: written again until the coarse clock the change times come from has moved on.
    let since = olderCtime;
    while (since <= olderCtime) {
      await writeFile(left, "a temporary run's");
      since = (await lstat(left)).ctimeMs;
    }
    expect(await removeThreadSkeleton(paths, () => true, since)).toBe(false);
    expect(existsSync(older)).toBe(true);
    expect(existsSync(left)).toBe(false);
  });

  test("are the first the bound closes, also when they were used more recently", async () => {
    const dataDir = await makeTempDir("mcp-thread-folders-bound-");
    const pool = await poolIn(dataDir, 2);
    const real = await pidOf(pool, "u", "real-1");
    const stateless = await pidOf(pool, "u", "stateless-1", true);
    const second = await pidOf(pool, "u", "real-2");
    expect(await waitUntil(() => !alive(stateless), 30_000)).toBe(true);
    expect(alive(real) && alive(second)).toBe(true);
    expect(await pidOf(pool, "u", "real-1")).toBe(real);
    // A temporary session used by a run of a thread that is kept is an ordinary one from then on.
    const marked = await pidOf(pool, "u", "mixed", true);
    expect(await pidOf(pool, "u", "mixed")).toBe(marked);
    expect(await waitUntil(() => !alive(second), 30_000)).toBe(true);
    await pidOf(pool, "u", "real-3");
    // Of the two older children the bound closes the least recently used one, not the once temporary one.
    expect(await waitUntil(() => !alive(real) || !alive(marked), 30_000)).toBe(true);
    expect([alive(real), alive(marked)]).toEqual([false, true]);
  });

  test("a run with the server's ids and no checkpointer is temporary, one with a checkpointer is not (through ToolNode)", async () => {
    const dataDir = await makeTempDir("mcp-thread-folders-graph-");
    const configPath = await writeConfig(await makeTempDir("mcp-thread-folders-graph-cfg-"), { mcpServers: { sh: { type: "stdio", command: "bash", args: [SH_SERVER] } } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, maxStdioSessions: 3 });
    toolkits.push(toolkit);
    const tools = await toolkit.getTools();
    const stateful = toolNodeGraph(tools, new MemorySaver());
    const stateless = toolNodeGraph(tools);
    // As the LangGraph server runs them: its graph and assistant ids in `configurable`, a checkpointer or none.
    const run = (thread: string) => ({ configurable: { thread_id: thread, graph_id: "agent", assistant_id: "a-1" } });
    const pid = async (graph: typeof stateless, thread: string) => Number((await callThroughGraph(graph, "sh_pid", {}, run(thread))).content);
    // Discovery's child (the default scope) counts too: with it, three children fill the bound.
    const kept = await pid(stateful, "kept-1");
    const temporary = await pid(stateless, "temp-1");
    // In-process, no checkpointer and none of the server's ids: an ordinary thread.
    const plain = Number((await callThroughGraph(stateless, "sh_pid", {}, { configurable: { thread_id: "plain-1" } })).content);
    expect(await waitUntil(() => !alive(temporary), 30_000)).toBe(true);
    expect(alive(kept) && alive(plain)).toBe(true);
  });
});
