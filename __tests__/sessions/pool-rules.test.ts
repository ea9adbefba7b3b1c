import { describe, expect, test } from "@jest/globals";
import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { McpServerSchema, RecordingLogger } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { stdioFixture } from "../fixtures/stdio";
import { startHttpFixture } from "../fixtures/http-server";
import { alive, pidsWithMarker, waitUntil } from "../fixtures/processes";

const acquiring = { headers: EMPTY_HEADERS, initTimeoutMs: null };

function childOf(session: { client: { transport?: unknown } }): ChildProcess {
  return (session.client.transport as { _process: ChildProcess })._process;
}

describe("a retired or closed pool", () => {
  test("starts no child: acquire() refuses naming the retirement, tryAcquire() gives nothing", async () => {
    const marker = `41.${process.pid}${Date.now() % 1000}`;
    const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
    const server = McpServerSchema.parse({ type: "stdio", ...launch, args: [...launch.args, marker] });
    const retired = new SessionPool(new RecordingLogger());
    const closed = new SessionPool(new RecordingLogger());
    try {
      retired.retire();
      await closed.close();
      for (const pool of [retired, closed]) {
        await expect(pool.acquire("local", server, acquiring)).rejects.toThrow("MCP session pool was retired; reload the tools");
        expect(pool.tryAcquire("local", server, acquiring)).toBeUndefined();
        expect(pool.live).toBe(0);
      }
      expect(pidsWithMarker(marker)).toEqual([]);
    } finally {
      await retired.close();
      await closed.close();
    }
  });
});

describe("a stdio child that exited, in the moment before its pipes tell the pool", () => {
  test("the next acquisition, with or without waiting, does not get the dead child's session", async () => {
    const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
    // A background `sleep` holds the child's pipes open: only the exit tells, a few event loop turns after it.
    const server = McpServerSchema.parse({
      type: "stdio",
      command: "sh",
      args: ["-c", 'sleep 3 & exec "$0" "$@"', launch.command, ...launch.args],
      env: launch.env,
    });
    const pool = new SessionPool(new RecordingLogger());
    try {
      const first = await pool.acquire("local", server, acquiring);
      first.release();
      const exit = once(childOf(first.session), "exit");
      process.kill(first.session.pid!, "SIGKILL");
      await exit;
      // Still in the pool (its close is reported only once what it wrote was read), but exited.
      expect(pool.size()).toBe(1);
      expect(pool.tryAcquire("local", server, acquiring)).toBeUndefined();
      const second = await pool.acquire("local", server, acquiring);
      second.release();
      expect(second.session).not.toBe(first.session);
      expect(second.session.pid).not.toBe(first.session.pid);
    } finally {
      await pool.close();
    }
  });
});

describe("an HTTP session used again after its idle count began", () => {
  test("is not closed under that call when the count ends: the call gets its answer, the DELETE comes after it", async () => {
    const http = await startHttpFixture({ name: "remote", toolNames: ["slow"] });
    const server = McpServerSchema.parse({ type: "http", url: http.url });
    // The count is far shorter than the call: it ends while the call runs.
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: 50 });
    try {
      const first = await pool.acquire("remote", server, acquiring);
      first.release();
      const lease = pool.tryAcquire("remote", server, acquiring)!;
      expect(lease.session).toBe(first.session);
      const sessionId = (lease.session.client.transport as { sessionId?: string }).sessionId;
      const result = await lease.session.client.callTool({ name: "slow", arguments: { ms: 500 } });
      expect(result.content).toEqual([{ type: "text", text: "slept 500" }]);
      expect(http.requests.some((r) => r.method === "DELETE" && r.sessionId === sessionId)).toBe(false);
      lease.release();
      await http.waitForRequest((r) => r.method === "DELETE" && r.sessionId === sessionId);
    } finally {
      await pool.close();
      await http.close();
    }
  });
});

describe("a stdio session that comes up after its pool was retired", () => {
  test("serves the call that waited for it, then closes once released", async () => {
    const launch = stdioFixture({ name: "local", toolNames: ["pid"], initDelayMs: 300 });
    const server = McpServerSchema.parse({ type: "stdio", ...launch });
    const pool = new SessionPool(new RecordingLogger());
    try {
      const creating = pool.acquire("local", server, acquiring);
      pool.retire();
      const lease = await creating;
      // Held (and its child kept) until released: not closed under the lease.
      expect(pool.size()).toBe(1);
      // Calls one after the other: the session stays open while leased, however many it serves.
      for (let call = 0; call < 3; call += 1) {
        const result = await lease.session.client.callTool({ name: "pid", arguments: {} });
        expect(result.content).toEqual([{ type: "text", text: String(lease.session.pid) }]);
      }
      expect(alive(lease.session.pid!)).toBe(true);
      lease.release();
      expect(await waitUntil(() => !alive(lease.session.pid!))).toBe(true);
      expect(pool.size()).toBe(0);
    } finally {
      await pool.close();
    }
  });
});

describe("at the bound, every child busy, a creation that comes up", () => {
  test("is the most recently used: the least recently used busy child leaves the pool (closed after its call), not the new one", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
    const pool = new SessionPool(new RecordingLogger(), { maxStdioSessions: 1 });
    const opts = (user: string) => ({ ...acquiring, scope: sessionScope(user, "t") });
    try {
      const bob = await pool.acquire("local", server, opts("bob"));
      const creating = pool.acquire("local", server, opts("alice"));
      // Bob's session is used again while alice's child starts: his is the more recently used of the two then.
      const bobAgain = pool.tryAcquire("local", server, opts("bob"))!;
      const alice = await creating;
      // Bob's calls still run: his child left the pool and closes after them; alice's is the pool's.
      expect(alive(bob.session.pid!)).toBe(true);
      alice.release();
      const next = pool.tryAcquire("local", server, opts("alice"));
      expect(next?.session).toBe(alice.session);
      next!.release();
      expect(pool.tryAcquire("local", server, opts("bob"))).toBeUndefined();
      bob.release();
      bobAgain.release();
      expect(await waitUntil(() => !alive(bob.session.pid!))).toBe(true);
      expect(alive(alice.session.pid!)).toBe(true);
    } finally {
      await pool.close();
    }
  });
});

describe("the bound on stdio children", () => {
  test("a new scope one beyond it closes exactly one child, the least recently used", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
    const pool = new SessionPool(new RecordingLogger(), { maxStdioSessions: 2 });
    const opts = (user: string) => ({ ...acquiring, scope: sessionScope(user, "t") });
    try {
      const pids: number[] = [];
      for (const user of ["ann", "ben", "cat"]) {
        const lease = await pool.acquire("local", server, opts(user));
        lease.release();
        pids.push(lease.session.pid!);
      }
      expect(await waitUntil(() => !alive(pids[0]!))).toBe(true);
      expect(pids.slice(1).map(alive)).toEqual([true, true]);
      expect(pool.size()).toBe(2);
    } finally {
      await pool.close();
    }
  });
});

describe("a stdio child's hold of a durable task", () => {
  test("is taken once per remote id: holding an id it holds already says so, and one let-go ends it", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
    const pool = new SessionPool(new RecordingLogger());
    try {
      const lease = await pool.acquire("local", server, acquiring);
      lease.release();
      const { session } = lease;
      expect(session.holdTask!("job-1", true)).toBe(true);
      // A second answer naming the same job (a duplicate the service refuses) did not start a hold of its own.
      expect(session.holdTask!("job-1", true)).toBe(false);
      expect(session.holdTask!("job-2", true)).toBe(true);
      // Held: a retirement keeps the child for the next generation.
      pool.retire();
      expect(pool.size()).toBe(1);
      expect(session.holdTask!("job-1", false)).toBe(false);
      expect(pool.size()).toBe(1);
      // The last pending task let go of: the retired pool closes it.
      session.holdTask!("job-2", false);
      expect(pool.size()).toBe(0);
      expect(await waitUntil(() => !alive(session.pid!))).toBe(true);
    } finally {
      await pool.close();
    }
  });
});

describe("closing a server's discovery sessions (closeServer)", () => {
  test("closes its stdio child of the default scope only: a thread's child is kept", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
    const pool = new SessionPool(new RecordingLogger());
    try {
      const discovery = await pool.acquire("local", server, acquiring);
      discovery.release();
      const thread = await pool.acquire("local", server, { ...acquiring, scope: sessionScope("bob", "t") });
      thread.release();
      await pool.closeServer("local");
      expect(await waitUntil(() => !alive(discovery.session.pid!))).toBe(true);
      expect(alive(thread.session.pid!)).toBe(true);
      expect(pool.tryAcquire("local", server, { ...acquiring, scope: sessionScope("bob", "t") })?.session).toBe(thread.session);
    } finally {
      await pool.close();
    }
  });
});

describe("a task holder adopted by the next generation's pool", () => {
  test("counts towards its bound at once: the pool's idle child goes, the holder stays", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
    const old = new SessionPool(new RecordingLogger());
    const next = new SessionPool(new RecordingLogger(), { maxStdioSessions: 1 });
    try {
      const holder = await old.acquire("local", server, { ...acquiring, scope: sessionScope("bob", "t") });
      holder.release();
      holder.session.holdTask!("job-1", true);
      old.retire();
      const idle = await next.acquire("local", server, acquiring);
      idle.release();
      next.adoptTaskHolders(old, () => true);
      expect(await waitUntil(() => !alive(idle.session.pid!))).toBe(true);
      expect(alive(holder.session.pid!)).toBe(true);
      expect(next.size()).toBe(1);
      expect(next.tryAcquire("local", server, { ...acquiring, scope: sessionScope("bob", "t") })?.session).toBe(holder.session);
    } finally {
      await next.close();
      await old.close();
    }
  });
});

describe("the cap on a server's HTTP sessions while a new header set's session starts", () => {
  test("an idle session released meanwhile is kept: the start under way is not counted until it is up", async () => {
    const up = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    // The same server name (so the same cap), reached for bob at an address that never answers initialize.
    const hanging = await startHttpFixture({ name: "remote", toolNames: ["echo"], hangOnInitialize: true });
    const pool = new SessionPool(new RecordingLogger(), { maxHttpSessionsPerServer: 1 });
    const alice = { ...acquiring, headers: { "x-user": "alice" } };
    const cancel = new AbortController();
    try {
      const first = await pool.acquire("remote", McpServerSchema.parse({ type: "http", url: up.url }), alice);
      first.release();
      const starting = pool.acquire("remote", McpServerSchema.parse({ type: "http", url: hanging.url }), { ...alice, headers: { "x-user": "bob" }, signal: cancel.signal });
      await hanging.waitForRequest((r) => r.rpcMethod === "initialize");
      const again = pool.tryAcquire("remote", McpServerSchema.parse({ type: "http", url: up.url }), alice)!;
      expect(again.session).toBe(first.session);
      again.release();
      expect(pool.size()).toBe(2);
      const third = pool.tryAcquire("remote", McpServerSchema.parse({ type: "http", url: up.url }), alice);
      expect(third?.session).toBe(first.session);
      third?.release();
      cancel.abort(new Error("run cancelled"));
      await expect(starting).rejects.toThrow("run cancelled");
    } finally {
      await pool.close();
      await up.close();
      await hanging.close();
    }
  });
});

describe("a task holder whose scope already has a child in the next generation's pool", () => {
  test("is not adopted over it: the holder closes, the pool's own child serves the scope, and close() leaves neither", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
    const old = new SessionPool(new RecordingLogger());
    const next = new SessionPool(new RecordingLogger());
    const bob = { ...acquiring, scope: sessionScope("bob", "t") };
    try {
      const holder = await old.acquire("local", server, bob);
      holder.release();
      holder.session.holdTask!("job-1", true);
      old.retire();
      const own = await next.acquire("local", server, bob);
      own.release();
      next.adoptTaskHolders(old, () => true);
      expect(await waitUntil(() => !alive(holder.session.pid!))).toBe(true);
      const again = next.tryAcquire("local", server, bob);
      expect(again?.session).toBe(own.session);
      again?.release();
      await next.close();
      expect(alive(own.session.pid!)).toBe(false);
    } finally {
      await next.close();
      await old.close();
    }
  });
});

describe("the bound among children that all hold pending durable tasks", () => {
  test("closes an idle one before one in the middle of a call, though that one was used less recently", async () => {
    const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
    const old = new SessionPool(new RecordingLogger());
    const next = new SessionPool(new RecordingLogger(), { maxStdioSessions: 1 });
    const scope = (user: string) => ({ ...acquiring, scope: sessionScope(user, "t") });
    try {
      const busy = await old.acquire("local", server, scope("ann"));
      busy.session.holdTask!("job-1", true);
      const idle = await old.acquire("local", server, scope("ben"));
      idle.release();
      idle.session.holdTask!("job-2", true);
      old.retire();
      next.adoptTaskHolders(old, () => true);
      expect(await waitUntil(() => !alive(idle.session.pid!))).toBe(true);
      busy.release();
      expect(alive(busy.session.pid!)).toBe(true);
      const again = next.tryAcquire("local", server, scope("ann"));
      expect(again?.session).toBe(busy.session);
      again?.release();
    } finally {
      await next.close();
      await old.close();
    }
  });
});
