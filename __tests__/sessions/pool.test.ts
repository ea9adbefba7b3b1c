import { afterAll, beforeAll, describe, expect, jest, test } from "@jest/globals";
import type { ChildProcess } from "node:child_process";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, type HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { startSseFixture } from "../fixtures/sse-server";
import { stdioFixture } from "../fixtures/stdio";
import { alive, blockUntilBlockedOnWrite, pidsWithMarker, waitUntil } from "../fixtures/processes";

let http: HttpFixture;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["echo", "slow"] });
  const dir = await makeTempDir("mcp-pool-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      remote: { type: "http", url: http.url, user_auth: { header: "X-User-Token", users: { alice: "a-1", bob: "b-1" } } },
      local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), httpSessionIdleSeconds: 0.2 });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

const deleted = (sessionId: string | undefined) => (r: { method: string; sessionId?: string }) =>
  r.method === "DELETE" && r.sessionId === sessionId;

describe("HTTP sessions per header set close when idle", () => {
  test("an unused session is terminated; the next call opens a new one; stdio sessions stay", async () => {
    const pid = (await callThroughGraph(graph, "local_pid", {})).content;
    await callThroughGraph(graph, "remote_echo", { text: "idle-1" }, { context: { user_id: "alice" } });
    const first = findToolCall(http.requests, "idle-1")!.sessionId;
    await http.waitForRequest(deleted(first));
    expect(http.activeSessionIds()).not.toContain(first);

    await callThroughGraph(graph, "remote_echo", { text: "idle-2" }, { context: { user_id: "alice" } });
    const second = findToolCall(http.requests, "idle-2")!.sessionId;
    expect(second).toBeDefined();
    expect(second).not.toBe(first);
    expect((await callThroughGraph(graph, "local_pid", {})).content).toBe(pid);
  });

  test("a session is not closed while a call is running on it", async () => {
    const message = await callThroughGraph(graph, "remote_slow", { ms: 600 }, { context: { user_id: "bob" } });
    expect(message.content).toBe("slept 600");
    const call = http.requests.find((r) => r.rpcMethods?.includes("tools/call") && (r.body as { params: { name: string } }).params.name === "slow")!;
    expect(http.requests.some(deleted(call.sessionId))).toBe(false);
    await http.waitForRequest(deleted(call.sessionId));
  });
});

describe("an HTTP session whose initialization fails after the server gave it an id", () => {
  test("is terminated (DELETE), so no server-side session is left behind", async () => {
    let open!: () => void;
    const fx = await startHttpFixture({ name: "held", toolNames: ["echo"], initializedGate: new Promise<void>((resolve) => (open = resolve)) });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const server = McpServerSchema.parse({ type: "http", url: fx.url });
    try {
      await expect(pool.acquire("held", server, { headers: EMPTY_HEADERS, initTimeoutMs: 300 })).rejects.toThrow();
      const initialized = fx.requests.find((r) => r.rpcMethods?.includes("notifications/initialized"));
      expect(initialized?.sessionId).toBeDefined();
      await fx.waitForRequest(deleted(initialized!.sessionId));
      await pool.close();
      expect(fx.requests.filter(deleted(initialized!.sessionId))).toHaveLength(1);
      expect(fx.activeSessionIds()).toEqual([]);
    } finally {
      open();
      await pool.close();
      await fx.close();
    }
  });
});

describe("an HTTP session whose server refuses its notifications/initialized (after giving it an id)", () => {
  test("the creation fails and the session is terminated (DELETE), not left on the server", async () => {
    const fx = await startHttpFixture({ name: "refusing", toolNames: ["echo"], initializedStatus: 500 });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const server = McpServerSchema.parse({ type: "http", url: fx.url });
    try {
      await expect(pool.acquire("refusing", server, { headers: EMPTY_HEADERS, initTimeoutMs: null })).rejects.toThrow();
      const initialized = fx.requests.find((r) => r.rpcMethods?.includes("notifications/initialized"));
      expect(initialized?.sessionId).toBeDefined();
      await pool.close();
      expect(fx.requests.filter(deleted(initialized!.sessionId))).toHaveLength(1);
      expect(fx.activeSessionIds()).toEqual([]);
    } finally {
      await pool.close();
      await fx.close();
    }
  });
});

describe("closing a server's sessions after its discovery failed (closeServer)", () => {
  test("a session with a call running is taken out of the pool at once and closed once that call has its answer", async () => {
    let answer!: (text: string) => void;
    const held = new Promise<string>((resolve) => (answer = resolve));
    const fx = await startHttpFixture({ name: "busy", toolNames: ["echo"], extraTools: [{ name: "held", respond: () => held }] });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const server = McpServerSchema.parse({ type: "http", url: fx.url });
    const opts = { headers: EMPTY_HEADERS, initTimeoutMs: null };
    try {
      const busy = await pool.acquire("busy", server, opts);
      const sessionId = (busy.session.client.transport as StreamableHTTPClientTransport).sessionId;
      const running = busy.session.client.callTool({ name: "held", arguments: {} });
      await fx.waitForRequest((r) => r.rpcMethods?.includes("tools/call") === true);
      await pool.closeServer("busy");
      // Not reused: the next caller gets a session of its own.
      const next = await pool.acquire("busy", server, opts);
      expect(next.session).not.toBe(busy.session);
      next.release();
      expect(fx.requests.some(deleted(sessionId))).toBe(false);
      answer("done");
      expect(await running).toMatchObject({ content: [{ type: "text", text: "done" }] });
      busy.release();
      await fx.waitForRequest(deleted(sessionId));
    } finally {
      await pool.close();
      await fx.close();
    }
  });
});

describe("the idle count restarts with every release", () => {
  test("a session used again before its idle time is up closes that long after its last use, not its first", async () => {
    const fx = await startHttpFixture({ name: "idle", toolNames: ["echo"] });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: 1000 });
    const server = McpServerSchema.parse({ type: "http", url: fx.url });
    const opts = { headers: EMPTY_HEADERS, initTimeoutMs: null };
    try {
      const first = await pool.acquire("idle", server, opts);
      jest.useFakeTimers({ doNotFake: ["nextTick", "setImmediate", "queueMicrotask", "Date", "performance", "hrtime"] });
      first.release();
      jest.advanceTimersByTime(800);
      const again = pool.tryAcquire("idle", server, opts);
      expect(again?.session).toBe(first.session);
      again!.release();
      jest.advanceTimersByTime(800); // 1.6 s after the first release, 0.8 s after the last
      expect(pool.size()).toBe(1);
      jest.advanceTimersByTime(300);
      expect(pool.size()).toBe(0);
    } finally {
      jest.useRealTimers();
      await pool.close();
      await fx.close();
    }
  });
});

describe("an idle HTTP/SSE session the server ends", () => {
  test("leaves no idle count behind; when that count would have ended, the new session of its header set is kept", async () => {
    const fx = await startSseFixture({ name: "ended", toolNames: ["echo"] });
    const logger = new RecordingLogger();
    const pool = new SessionPool(logger, { httpIdleMs: 1000 });
    const server = McpServerSchema.parse({ type: "sse", url: fx.url });
    const opts = { headers: EMPTY_HEADERS, initTimeoutMs: null };
    try {
      const first = await pool.acquire("ended", server, opts);
      jest.useFakeTimers({ doNotFake: ["nextTick", "setImmediate", "queueMicrotask", "Date", "performance", "hrtime"] });
      const timers = jest.getTimerCount();
      first.release();
      expect(jest.getTimerCount()).toBe(timers + 1); // its idle count
      jest.advanceTimersByTime(500);
      await fx.endStreams();
      // The pool hears of the end through the stream (setImmediate is not faked).
      while (pool.live > 0) await new Promise<void>((resolve) => setImmediate(resolve));
      expect(jest.getTimerCount()).toBe(timers);
      const next = await pool.acquire("ended", server, opts);
      next.release();
      logger.lines.length = 0;
      jest.advanceTimersByTime(600); // the ended session's count would have ended; the new one's has 400 ms to go
      expect(pool.tryAcquire("ended", server, opts)?.session).toBe(next.session);
      expect(logger.lines).toEqual([]);
    } finally {
      jest.useRealTimers();
      await pool.close();
      await fx.close();
    }
  });
});

const initialize = (r: { rpcMethods?: string[] }) => r.rpcMethods?.includes("initialize") ?? false;

describe("a closing session leaves the pool only if the pool entry is still that session", () => {
  test("the late close of a replaced session does not drop its replacement", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const fx = await startHttpFixture({ name: "gated", toolNames: ["echo"], initGate: gate });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const server = McpServerSchema.parse({ type: "http", url: fx.url });
    const opts = { headers: EMPTY_HEADERS, initTimeoutMs: null };
    try {
      const replaced = pool.acquire("gated", server, opts);
      replaced.catch(() => undefined);
      await fx.waitForRequest(initialize);
      // The first session leaves the pool while it is still connecting: its creation stops, and its transport
      // closes a few turns later, with the replacement already under the same key.
      const closing = pool.closeServer("gated");
      const replacement = pool.acquire("gated", server, opts);
      open();
      await expect(replaced).rejects.toThrow("MCP session closed while connecting");
      const lease = await replacement;
      lease.release();
      await closing;
      expect(pool.size()).toBe(1);
      // The server had created the first session before its answer, with the id, came back: it was ended, not left open.
      expect(fx.activeSessionIds()).toEqual([(lease.session.client.transport as StreamableHTTPClientTransport).sessionId]);
      const again = await pool.acquire("gated", server, opts);
      expect(again.session).toBe(lease.session);
      again.release();
      expect(fx.initializeCount()).toBe(2);
    } finally {
      open();
      await pool.close();
      await fx.close();
    }
  });
});

describe("retirement on invalidation", () => {
  test.each(["reset()", "a config edit"])(
    "%s retires the old pool: its session closes once its running call ends; the new generation opens its own",
    async (how) => {
      let release!: (text: string) => void;
      const blocked = new Promise<string>((resolve) => (release = resolve));
      const fx = await startHttpFixture({ name: "busy", toolNames: ["echo"], extraTools: [{ name: "block", respond: () => blocked }] });
      const dir = await makeTempDir("mcp-retire-");
      const configPath = await writeConfig(dir, { mcpServers: { busy: { type: "http", url: fx.url } } });
      const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
      try {
        const running = callThroughGraph(toolNodeGraph(await own.getTools()), "busy_block", {});
        const call = await fx.waitForRequest((r) => (r.body as { params?: { name?: string } })?.params?.name === "block");
        const old = call.sessionId;

        if (how === "reset()") await own.reset();
        else await writeFile(configPath, (await readFile(configPath, "utf8")).replace('"http"', '"http", "description": "edited"'));
        await callThroughGraph(toolNodeGraph(await own.getTools()), "busy_echo", { text: "new-generation" });
        const fresh = findToolCall(fx.requests, "new-generation")!.sessionId;
        expect(fresh).toBeDefined();
        expect(fresh).not.toBe(old);
        expect(fx.initializeCount()).toBe(2);
        // the old session stays open while its call runs
        expect(fx.activeSessionIds()).toContain(old);
        expect(fx.requests.some(deleted(old))).toBe(false);

        release("released");
        expect((await running).content).toBe("released");
        await fx.waitForRequest(deleted(old));
        expect(fx.activeSessionIds()).toEqual([fresh]);
      } finally {
        release("test over");
        await own.close();
        await fx.close();
      }
    },
  );
});

describe("a stdio child that died while its pipes stay open", () => {
  test("the next acquisition sees the exit and starts a new child", async () => {
    const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
    // A background `sleep` inherits the child's stdout and holds it open after the child dies: only its exit tells.
    const server = McpServerSchema.parse({
      type: "stdio",
      command: "sh",
      args: ["-c", 'sleep 3 & exec "$0" "$@"', launch.command, ...launch.args],
      env: launch.env,
    });
    const pool = new SessionPool(new RecordingLogger());
    try {
      const first = await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null });
      first.release();
      const pid = first.session.pid!;
      process.kill(pid, "SIGKILL");
      expect(await waitUntil(() => !alive(pid))).toBe(true);
      // The call path's no-wait acquisition sees it too.
      expect(pool.tryAcquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null })).toBeUndefined();
      const second = await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null });
      second.release();
      expect(second.session).not.toBe(first.session);
      expect(second.session.pid).not.toBe(pid);
    } finally {
      await pool.close();
    }
  });
});

/** Processes with `marker` on their command line whose program is `name` (by /proc comm). */
function pidsNamed(marker: string, name: string): number[] {
  return pidsWithMarker(marker).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === name;
    } catch {
      return false;
    }
  });
}

describe("a stdio child that exits while a process it started writes on to its stdout", () => {
  test("the pool warns that the child's output was cut past its exit", async () => {
    const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
    const marker = `pool-cut-${process.pid}-${Date.now()}`;
    // Once the server is gone, the writer writes zeros (no line to parse) to the stdout it inherited until it is killed or
    // that socket closes. It makes it blocking again (the server's Node made it non-blocking): a writer blocked on a full
    // buffer then sleeps in the kernel, where the hold below can see it.
    const writerCode = "import os\nos.set_blocking(1, True)\nzeros = bytes(1 << 16)\nwhile True:\n    os.write(1, zeros)\n";
    const script = 'M=$1; W=$2; shift 2; (tail --pid=$$ -s 0.05 -f /dev/null; exec python3 -c "$W" "$M") & exec "$@"';
    const server = McpServerSchema.parse({
      type: "stdio",
      command: "sh",
      args: ["-c", script, "sh", marker, writerCode, launch.command, ...launch.args],
      env: launch.env,
    });
    // The event loop is held between polls until the writer is blocked on a full pipe, as in child-after-exit.test.ts:
    // every poll past the exit then finds new output, so only the pool's bound ends the reading.
    let holding = false;
    let writer: number | undefined;
    const nap = new Int32Array(new SharedArrayBuffer(4));
    const hold = () => {
      if (!holding) return;
      for (let i = 0; writer === undefined && i < 10_000; i += 1) {
        writer = pidsNamed(marker, "python3")[0];
        if (writer === undefined) Atomics.wait(nap, 0, 0, 1);
      }
      if (writer !== undefined) blockUntilBlockedOnWrite(writer);
      setImmediate(hold);
    };
    // Published as the child is made: this exit listener comes before the pool's own (`whenGone`), so the hold runs
    // before each of its checks.
    const onChild = (message: unknown) => {
      const child = (message as { process: ChildProcess }).process;
      child.once("exit", () => {
        if (!child.spawnargs.includes(marker)) return;
        holding = true;
        hold();
      });
    };
    subscribe("child_process", onChild);
    const logger = new RecordingLogger();
    const pool = new SessionPool(logger);
    const cut = () => logger.messages("warn").filter((m) => m.includes("its output was cut"));
    try {
      const lease = await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null });
      process.kill(lease.session.pid!, "SIGKILL");
      expect(await waitUntil(() => cut().length > 0)).toBe(true);
      holding = false;
      lease.release();
      const [warning] = cut();
      expect(warning).toMatch(
        /^the stdio MCP server 'local' exited while a process it started still writes to its stdout; its output was cut after (\d+ bytes|1000 ms) past the exit$/,
      );
      const bytes = /after (\d+) bytes/.exec(warning!);
      if (bytes) expect(Number(bytes[1])).toBeGreaterThanOrEqual(1 << 20);
      expect(pool.size()).toBe(0);
    } finally {
      holding = false;
      unsubscribe("child_process", onChild);
      await pool.close();
      for (const pid of [...pidsNamed(marker, "python3"), ...pidsNamed(marker, "sh")]) process.kill(pid, "SIGKILL");
    }
  });
});

describe("a stdio child that dies during a call while its pipes stay open", () => {
  test("the call fails at once with the closed connection, is not replayed, and the scope's next call gets a new child", async () => {
    const launch = stdioFixture({ name: "local", toolNames: ["pid", "slow"] });
    const marker = `32.${process.pid}${Date.now() % 1000}`;
    // The background `sleep` holds the child's stdout open for far longer than the test runs.
    const server = McpServerSchema.parse({
      type: "stdio",
      command: "sh",
      args: ["-c", `sleep ${marker} & exec "$0" "$@"`, launch.command, ...launch.args],
      env: launch.env,
    });
    const pool = new SessionPool(new RecordingLogger());
    try {
      const lease = await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null });
      const pid = lease.session.pid!;
      const child = (lease.session.client.transport as unknown as { _process: ChildProcess })._process;
      const { client } = lease.session;
      const poolOnclose = client.onclose;
      let closes = 0;
      client.onclose = () => {
        closes += 1;
        poolOnclose?.();
      };
      // No timeout of its own: only the child's exit can end this call.
      const call = lease.session.client.callTool({ name: "slow", arguments: { ms: 60_000 } }, undefined, { timeout: 2 ** 31 - 1 });
      process.kill(pid, "SIGKILL");
      await expect(call).rejects.toThrow("Connection closed");
      lease.release();
      expect(pool.size()).toBe(0);
      // When the grandchild lets go of the pipes, their close is not reported a second time.
      const pipesClosed = once(child, "close");
      for (const sleeper of pidsWithMarker(marker)) process.kill(sleeper, "SIGKILL");
      await pipesClosed;
      expect(closes).toBe(1);
      const next = await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null });
      next.release();
      expect(next.session.pid).not.toBe(pid);
    } finally {
      await pool.close();
      for (const sleeper of pidsWithMarker(marker)) process.kill(sleeper, "SIGKILL");
    }
  });
});

describe("a stdio creation that fails", () => {
  test("close() returns only once its child is gone, also one that ignores the end of its stdin", async () => {
    const marker = `31.${process.pid}${Date.now() % 1000}`;
    // Never answers initialize and outlives stdin EOF (a slow package download, say): the SDK's close escalates to signals.
    const server = McpServerSchema.parse({ type: "stdio", command: "sh", args: ["-c", `exec sleep ${marker}`] });
    const pool = new SessionPool(new RecordingLogger());
    try {
      await expect(pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: 200 })).rejects.toThrow();
      expect(pidsWithMarker(marker)).toHaveLength(1);
    } finally {
      await pool.close();
    }
    expect(pidsWithMarker(marker)).toEqual([]);
  });

  test("at the bound, a creation that comes up makes room among the others: the least recently used meanwhile goes, not itself", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
    const pool = new SessionPool(new RecordingLogger(), { maxStdioSessions: 1, dataDir: await makeTempDir("pool-bound-new-") });
    const opts = (user: string) => ({ headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope(user, "t") });
    try {
      const bob = await pool.acquire("local", server, opts("bob"));
      bob.release();
      const creating = pool.acquire("local", server, opts("alice"));
      // Bob's session is used while alice's child starts.
      pool.tryAcquire("local", server, opts("bob"))!.release();
      const alice = await creating;
      alice.release();
      expect(await waitUntil(() => !alive(bob.session.pid!))).toBe(true);
      expect(alive(alice.session.pid!)).toBe(true);
      expect(pool.tryAcquire("local", server, opts("alice"))?.session).toBe(alice.session);
    } finally {
      await pool.close();
    }
  });

  test("at the bound, a cancelled or failing creation evicts no other scope's child", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
    const broken = McpServerSchema.parse({ type: "stdio", command: "/nonexistent/mcp-server" });
    const pool = new SessionPool(new RecordingLogger(), { maxStdioSessions: 1, dataDir: await makeTempDir("pool-bound-") });
    const opts = (user: string, signal?: AbortSignal) => ({ headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope(user, "t"), signal });
    try {
      const alice = await pool.acquire("local", server, opts("alice"));
      alice.release();
      const cancelled = AbortSignal.abort(new Error("run cancelled"));
      await expect(pool.acquire("local", server, opts("bob", cancelled))).rejects.toThrow("run cancelled");
      expect(pool.live).toBe(1); // nothing was started for bob
      await expect(pool.acquire("broken", broken, opts("carol"))).rejects.toMatchObject({ code: "ENOENT" });
      expect(alive(alice.session.pid!)).toBe(true);
      const again = pool.tryAcquire("local", server, opts("alice"));
      expect(again?.session).toBe(alice.session);
      again!.release();
      // A creation that comes up does make room: the least recently used child goes.
      const dave = await pool.acquire("local", server, opts("dave"));
      dave.release();
      expect(await waitUntil(() => !alive(alice.session.pid!))).toBe(true);
      expect(pool.size()).toBe(1);
    } finally {
      await pool.close();
    }
  });
});

describe("tryAcquire: a lease without waiting", () => {
  test("none while the session connects or after retirement; the connected session otherwise, counted as in use", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
    const opts = { headers: EMPTY_HEADERS, initTimeoutMs: null };
    const pool = new SessionPool(new RecordingLogger());
    try {
      const connecting = pool.acquire("local", server, opts);
      expect(pool.tryAcquire("local", server, opts)).toBeUndefined();
      const first = await connecting;
      const again = pool.tryAcquire("local", server, opts)!;
      expect(again.session).toBe(first.session);
      first.release();
      // Still leased by `again`: retirement waits for it before closing the child.
      pool.retire();
      expect(pool.tryAcquire("local", server, opts)).toBeUndefined();
      expect(alive(first.session.pid!)).toBe(true);
      again.release();
      expect(await waitUntil(() => !alive(first.session.pid!))).toBe(true);
    } finally {
      await pool.close();
    }
  });
});

describe("a session still connecting", () => {
  test("close() stops its creation: the child is gone and the waiting caller gets a clear error", async () => {
    const marker = `--connecting-${process.pid}-${Date.now()}`;
    const launch = stdioFixture({ name: "local", mode: "hang" });
    const server = McpServerSchema.parse({ type: "stdio", ...launch, args: [...launch.args, marker] });
    const pool = new SessionPool(new RecordingLogger());
    // No init timeout: only close() can end this creation.
    const waiting = pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null });
    waiting.catch(() => undefined);
    expect(await waitUntil(() => pidsWithMarker(marker).length === 1)).toBe(true);
    const [child] = pidsWithMarker(marker);
    await pool.close();
    await expect(waiting).rejects.toThrow("MCP session closed while connecting");
    expect(await waitUntil(() => !alive(child))).toBe(true);
  });

  // The real SDK connect, wrapped only to place the caller's abort a few microtasks after the connection is up: in
  // that window the pool has not taken the session yet, and the creation no longer listens for an abort. Whatever
  // the moment, the child ends up in the pool (the scope's next call gets it) or closed, never running unseen.
  test.each([0, 1, 2, 3, 4, 5, 6])("the last waiter gives up %i microtasks after the connection is up: no child is left unseen", async (ticks) => {
    const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
    const opts = { headers: EMPTY_HEADERS, initTimeoutMs: null };
    const pool = new SessionPool(new RecordingLogger());
    const caller = new AbortController();
    const connect = Client.prototype.connect;
    let pid: number | undefined;
    const spy = jest.spyOn(Client.prototype, "connect").mockImplementation(async function (this: Client, ...args) {
      await connect.apply(this, args);
      pid = (this.transport as unknown as { pid: number }).pid;
      let later = Promise.resolve();
      for (let i = 0; i < ticks; i += 1) later = later.then(() => undefined);
      void later.then(() => caller.abort(new Error("the caller gave up")));
    });
    try {
      await pool.acquire("local", server, { ...opts, signal: caller.signal }).then(
        (lease) => lease.release(),
        () => undefined,
      );
      spy.mockRestore();
      const held = pool.tryAcquire("local", server, opts);
      if (held) {
        expect(held.session.pid).toBe(pid);
        held.release();
      } else {
        expect(await waitUntil(() => !alive(pid!))).toBe(true);
      }
      await pool.close();
      expect(await waitUntil(() => !alive(pid!))).toBe(true);
    } finally {
      spy.mockRestore();
      await pool.close();
    }
  });
});

describe("a session closed twice", () => {
  test("retired with a call running, then closed: it is closed once, also when the call ends", async () => {
    const server = McpServerSchema.parse({ type: "http", url: http.url });
    const pool = new SessionPool(new RecordingLogger());
    const lease = await pool.acquire("remote", server, { headers: { "X-Once": "1" }, initTimeoutMs: null });
    const sessionId = (lease.session.client.transport as unknown as { sessionId?: string }).sessionId;
    expect(sessionId).toBeDefined();
    // Counts the real client's closes (it still runs them).
    const closes = jest.spyOn(lease.session.client, "close");
    try {
      pool.retire();
      await pool.close();
      lease.release();
      await pool.close();
      await http.waitForRequest(deleted(sessionId));
      expect(closes).toHaveBeenCalledTimes(1);
      expect(http.requests.filter(deleted(sessionId))).toHaveLength(1);
    } finally {
      closes.mockRestore();
    }
  });
});
