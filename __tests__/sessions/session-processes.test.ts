import { describe, expect, test } from "@jest/globals";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { createMcpToolkit, McpServerSchema, RecordingLogger } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { endProcesses, SESSION_TAG_ENV, taggedProcesses } from "../../lib/sessions/session-processes";
import { sessionScope } from "../../lib/sessions/scope";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { stdioFixture } from "../fixtures/stdio";
import { alive, pidsWithMarker, waitUntil } from "../fixtures/processes";

let markers = 0;
/** A `sleep` argument no other process has: the sleeper is found by it in /proc. */
const marker = () => `9${(markers += 1)}.${process.pid}${Date.now() % 1000}`;

/** A stdio launch of the fixture server through `sh -c`, which first starts `background` (shell text) behind it. */
function wrapped(background: string) {
  const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
  return { type: "stdio" as const, command: "sh", args: ["-c", `${background} exec "$0" "$@"`, launch.command, ...launch.args], env: launch.env };
}

/** The fixture server launched as `env -i PATH=… <its env> sh -c '<background> exec server'`: no process of it is tagged. */
function clearedEnvironment(background: string) {
  const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
  const vars = Object.entries({ PATH: process.env.PATH ?? "/usr/bin:/bin", ...launch.env }).map(([k, v]) => `${k}=${v}`);
  return { type: "stdio" as const, command: "env", args: ["-i", ...vars, "sh", "-c", `${background} exec "$0" "$@"`, launch.command, ...launch.args] };
}

function killAll(...marks: string[]): void {
  for (const mark of marks) for (const pid of pidsWithMarker(mark)) process.kill(pid, "SIGKILL");
}

describe("what a stdio server started ends with its session", () => {
  test("close() ends a background process holding the server's pipes, one in a session of its own, and one that ignores SIGTERM", async () => {
    const [holder, detached, stubborn] = [marker(), marker(), marker()];
    const background =
      `sleep ${holder} & setsid sleep ${detached} </dev/null >/dev/null 2>&1 & ` +
      `(trap '' TERM; exec sleep ${stubborn}) </dev/null >/dev/null 2>&1 &`;
    const configPath = await writeConfig(await makeTempDir("tree-close-"), { mcpServers: { local: wrapped(background) } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("tree-close-data-") });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      const pid = Number((await callThroughGraph(graph, "local_pid", {}, { context: { user_id: "u" }, configurable: { thread_id: "t" } })).content);
      expect(alive(pid)).toBe(true);
      // Discovery's session and the thread's each started one of each.
      for (const mark of [holder, detached, stubborn]) expect(await waitUntil(() => pidsWithMarker(mark).length === 2)).toBe(true);
    } finally {
      await toolkit.close();
    }
    // Gone when close() returns, not some time later.
    expect([holder, detached, stubborn].map((mark) => pidsWithMarker(mark))).toEqual([[], [], []]);
    killAll(holder, detached, stubborn);
  }, 20_000);

  test("an evicted scope's server takes its background process with it", async () => {
    const sleeper = marker();
    const server = McpServerSchema.parse(wrapped(`sleep ${sleeper} </dev/null >/dev/null 2>&1 &`));
    const pool = new SessionPool(new RecordingLogger(), { maxStdioSessions: 1, dataDir: await makeTempDir("tree-evict-") });
    const opts = (user: string) => ({ headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope(user, "t") });
    try {
      (await pool.acquire("local", server, opts("bob"))).release();
      expect(await waitUntil(() => pidsWithMarker(sleeper).length === 1)).toBe(true);
      const [bobs] = pidsWithMarker(sleeper);
      (await pool.acquire("local", server, opts("alice"))).release();
      // Alice's server started a sleeper of its own; bob's is the one that ends.
      expect(await waitUntil(() => !alive(bobs))).toBe(true);
      expect(pidsWithMarker(sleeper)).toHaveLength(1);
    } finally {
      await pool.close();
      killAll(sleeper);
    }
    expect(pidsWithMarker(sleeper)).toEqual([]);
  });

  test.each([
    ["while it holds the server's pipes", ""],
    ["without its pipes (a browser it drove)", " </dev/null >/dev/null 2>&1"],
  ])("a server that dies on its own: what it started %s is ended too", async (_label, redirect) => {
    const sleeper = marker();
    const server = McpServerSchema.parse(wrapped(`sleep ${sleeper}${redirect} &`));
    const pool = new SessionPool(new RecordingLogger());
    try {
      const lease = await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null });
      lease.release();
      expect(await waitUntil(() => pidsWithMarker(sleeper).length === 1)).toBe(true);
      process.kill(lease.session.pid!, "SIGKILL");
      expect(await waitUntil(() => pidsWithMarker(sleeper).length === 0)).toBe(true);
      expect(pool.size()).toBe(0);
    } finally {
      await pool.close();
      killAll(sleeper);
    }
  });

  test("a supervisor that respawns its worker, and a descendant started with an empty environment, end too; one marked `keep` stays", async () => {
    const [respawned, bare, kept, keptSaved] = [marker(), marker(), marker(), marker()];
    const background =
      `(trap 'true' TERM; while :; do sleep ${respawned}; done) </dev/null >/dev/null 2>&1 & ` +
      `env -i /bin/sleep ${bare} </dev/null >/dev/null 2>&1 & ` +
      `${SESSION_TAG_ENV}=keep sleep ${kept} </dev/null >/dev/null 2>&1 & ` +
      // Marked `keep` after a variable whose name ends in the tag's (the session's tag saved): the tag is its own variable only.
      `env -i SAVED_${SESSION_TAG_ENV}="$${SESSION_TAG_ENV}" ${SESSION_TAG_ENV}=keep /bin/sleep ${keptSaved} </dev/null >/dev/null 2>&1 &`;
    const server = McpServerSchema.parse(wrapped(background));
    const pool = new SessionPool(new RecordingLogger());
    try {
      (await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null })).release();
      for (const mark of [respawned, bare, kept, keptSaved]) expect(await waitUntil(() => pidsWithMarker(mark).length > 0)).toBe(true);
    } finally {
      await pool.close();
    }
    try {
      expect([pidsWithMarker(respawned), pidsWithMarker(bare)]).toEqual([[], []]);
      expect(pidsWithMarker(kept)).toHaveLength(1);
      expect(pidsWithMarker(keptSaved)).toHaveLength(1);
    } finally {
      killAll(respawned, bare, kept, keptSaved);
    }
  }, 20_000);

  test("a server launched through `env -i`: what it started ends with its pool, and with a toolkit (discovery's and a thread's)", async () => {
    const [pooled, kit] = [marker(), marker()];
    const pool = new SessionPool(new RecordingLogger(), { dataDir: await makeTempDir("tree-cleared-") });
    const configPath = await writeConfig(await makeTempDir("tree-cleared-cfg-"), {
      mcpServers: { local: clearedEnvironment(`sleep ${kit} </dev/null >/dev/null 2>&1 &`) },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("tree-cleared-data-") });
    try {
      const server = McpServerSchema.parse(clearedEnvironment(`sleep ${pooled} </dev/null >/dev/null 2>&1 &`));
      const lease = await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("u", "t") });
      lease.release();
      const graph = toolNodeGraph(await toolkit.getTools());
      const message = await callThroughGraph(graph, "local_pid", {}, { context: { user_id: "u" }, configurable: { thread_id: "t" } });
      expect(message.status).toBe("success");
      expect(await waitUntil(() => pidsWithMarker(pooled).length === 1 && pidsWithMarker(kit).length === 2)).toBe(true);
      await Promise.all([pool.close(), toolkit.close()]);
      expect(alive(lease.session.pid!)).toBe(false);
      expect([pidsWithMarker(pooled), pidsWithMarker(kit)]).toEqual([[], []]);
    } finally {
      await Promise.all([pool.close(), toolkit.close()]);
      killAll(pooled, kit);
    }
  }, 20_000);

  test.each(["its session_init_timeout passes", "its caller gives up", "the pool closes"])(
    "a creation that fails (%s): close() returns once the child and what it started are gone, a descendant started with an empty environment too",
    async (how) => {
      const [started, bare, child] = [marker(), marker(), marker()];
      // Never answers initialize and outlives the end of its stdin.
      const server = McpServerSchema.parse({
        type: "stdio",
        command: "sh",
        args: ["-c", `sleep ${started} & env -i /bin/sleep ${bare} </dev/null >/dev/null 2>&1 & exec sleep ${child}`],
      });
      const pool = new SessionPool(new RecordingLogger());
      const caller = new AbortController();
      try {
        const acquiring = pool.acquire("local", server, {
          headers: EMPTY_HEADERS,
          // Long enough for the three processes to be seen on a loaded machine before the creation fails (with 300 ms,
          // under the full suite, the first sleeper was already ended when they were counted).
          initTimeoutMs: how === "its session_init_timeout passes" ? 3000 : null,
          signal: caller.signal,
        });
        acquiring.catch(() => undefined);
        // Counted once each runs `sleep <marker>`: before its exec, a forked shell's command line holds every marker, and
        // one read during the exec can find it empty.
        const counts = () => [started, bare, child].map((m) => sleepersOf(m).length);
        await waitUntil(() => counts().every((n) => n === 1));
        // The counts themselves, so a failure shows which process was missing or doubled.
        expect(counts()).toEqual([1, 1, 1]);
        if (how === "its caller gives up") caller.abort(new Error("run cancelled"));
        if (how === "the pool closes") await pool.close();
        await expect(acquiring).rejects.toThrow();
      } finally {
        await pool.close();
      }
      try {
        expect([pidsWithMarker(started), pidsWithMarker(bare), pidsWithMarker(child)]).toEqual([[], [], []]);
      } finally {
        killAll(started, bare, child);
      }
    },
    20_000,
  );
});

/** Live processes running `sleep <marker>` (any path to sleep), found by their exact arguments. */
function sleepersOf(marker: string): number[] {
  return pidsWithMarker(marker).filter((pid) => {
    try {
      const [program, ...args] = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((arg) => arg !== "");
      return path.basename(program ?? "") === "sleep" && args.length === 1 && args[0] === marker;
    } catch {
      return false;
    }
  });
}

describe("endProcesses", () => {
  test("signals a process only while its pid still names the process that was found (same start time)", async () => {
    const sleeper = marker();
    const tag = `test-${sleeper}`;
    const child = spawn("sleep", [sleeper], { stdio: "ignore", env: { ...process.env, [SESSION_TAG_ENV]: tag } });
    try {
      const [ref] = await taggedProcesses(tag);
      expect(ref?.pid).toBe(child.pid);
      // The same pid with another start time is another process (the pid was reused): left alone.
      expect(await endProcesses([{ pid: ref.pid, start: `${Number(ref.start) + 1}` }], 100)).toBe(0);
      expect(alive(ref.pid)).toBe(true);
      expect(await endProcesses([ref], 100)).toBe(1);
      expect(child.signalCode).toBe("SIGTERM");
    } finally {
      child.kill("SIGKILL");
    }
  });
});
