/**
 * An MCP server built with mcp-framework (class-based tools discovered from a folder, and its own streamable HTTP
 * transport "http-stream", not the SDK's server wiring), plugged in as its users would: `type: "http"` on http-stream
 * in its default "stream" response mode and in "batch" (JSON) mode, `type: "sse"` on its SSE transport, with per-user
 * headers read by an mcp-framework `AuthProvider`. Driven through ToolNode; SPEC §2 call path, §5.2 sessions.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { ToolMessage } from "@langchain/core/messages";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { discoverServer } from "../../lib/mcp/discovery";
import { SessionPool } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { killAllListening, startListening, startOnPort, type ListeningProcess } from "../fixtures/gateway-process";
import { callThroughGraph, runningCall, toolNodeGraph, type ToolNodeGraph, cleanErrorLine, streamedCall } from "../fixtures/graph";

const SERVER = path.join(__dirname, "..", "fixtures", "mcp-framework-server", "server.js");
/** mcp-framework shows what a tool's execute() returned as JSON (MCPTool.useStringify, on by default). */
const answer = (text: string): string => JSON.stringify(text);
const tagOf = (value: string): string => createHash("sha256").update(value).digest("hex").slice(0, 16);

interface WhoAmI {
  userTag: string | null;
  pid: number;
}
const whoami = (message: ToolMessage): WhoAmI => {
  expect(message.status).toBe("success");
  return JSON.parse(String(message.content)) as WhoAmI;
};

interface Running {
  port: number;
  args: (port: number) => string[];
  process: ListeningProcess;
}

describe("mcp-framework over http-stream and SSE", () => {
  const logger = new RecordingLogger();
  let callLog: string;
  let stream: Running;
  let batch: Running;
  let sse: Running;
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;

  /** `args(port)` on `port` (a restart's), else on a free port. */
  function start(args: (port: number) => string[], port?: number): Promise<Running> {
    const env = { ...process.env, MCPF_CALL_LOG: callLog };
    return startOnPort(async (p) => ({ port: p, args, process: await startListening([SERVER, ...args(p)], "Server running and ready.", env) }), port);
  }
  async function restart(server: Running): Promise<Running> {
    await server.process.kill();
    return start(server.args, server.port);
  }
  const callsIn = (): string[] => readFileSync(callLog, "utf8").split("\n").filter((line) => line.length > 0);

  beforeAll(async () => {
    const dir = await makeTempDir("mcp-framework-");
    callLog = path.join(dir, "calls.log");
    writeFileSync(callLog, "");
    [stream, batch, sse] = await Promise.all([
      start((p) => ["http-stream", String(p), "stream"]),
      start((p) => ["http-stream", String(p), "batch"]),
      start((p) => ["sse", String(p)]),
    ]);
    const [p1, p2, p3] = [stream.port, batch.port, sse.port];
    const perUser = { headers_from_context: { headers: { "X-User": "user_token" } } };
    const configPath = await writeConfig(dir, {
      mcpServers: {
        mf: { type: "http", url: `http://127.0.0.1:${p1}/mcp`, ...perUser, tool_call_timeout: 3, session_init_timeout: 10 },
        mflong: { type: "http", url: `http://127.0.0.1:${p1}/mcp`, ...perUser, tool_call_timeout: 30 },
        mfb: { type: "http", url: `http://127.0.0.1:${p2}/mcp`, ...perUser, tool_call_timeout: 30 },
        mfsse: { type: "sse", url: `http://127.0.0.1:${p3}/sse`, ...perUser, tool_call_timeout: 30 },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger, httpSessionIdleSeconds: null });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    // Also after a failed beforeAll: the servers that did start are killed, so none outlives the file.
    await toolkit?.close();
    await killAllListening();
  });

  const as = (user: string) => ({ context: { user_id: user, thread_id: "t", secrets: { user_token: `tok-${user}` } } });
  const call = (tool: string, args: Record<string, unknown>, user: string) => callThroughGraph(graph, tool, args, as(user));

  test("the toolkit lists the class-based tools mcp-framework discovered, on each transport", async () => {
    const names = (await toolkit.getTools()).map((t) => t.name);
    for (const prefix of ["mf", "mfb", "mfsse"]) {
      expect(names.filter((n) => n.startsWith(`${prefix}_`)).sort()).toEqual(["echo", "fail", "progress", "sleep", "whoami"].map((n) => `${prefix}_${n}`));
    }
  });

  test("each user's header reaches the AuthProvider on every call, in stream, batch and SSE modes", async () => {
    for (const prefix of ["mf", "mfb", "mfsse"]) {
      expect(whoami(await call(`${prefix}_whoami`, {}, "alice")).userTag).toBe(tagOf("tok-alice"));
      expect(whoami(await call(`${prefix}_whoami`, {}, "bob")).userTag).toBe(tagOf("tok-bob"));
      expect((await call(`${prefix}_echo`, { message: "hi" }, "alice")).content).toBe(answer("Echo: hi"));
      expect(whoami(await call(`${prefix}_whoami`, {}, "alice")).userTag).toBe(tagOf("tok-alice"));
    }
    expect(logger.messages().join("\n")).not.toMatch(/tok-/);
  });

  // mcp-framework sends a tool's progress without naming the call it belongs to: over http-stream (stream and batch
  // modes alike) it travels on the session's standing GET stream, not the call's own, so the answer can overtake the
  // last steps (the call is over by then). Over SSE there is one stream, and every step arrives.
  test("progress reaches the run's custom stream: every step in order over SSE, an ordered prefix over http-stream", async () => {
    for (const prefix of ["mf", "mfb", "mfsse"]) {
      const { message: last, events } = await streamedCall(graph, `${prefix}_progress`, { steps: 3, delayMs: 5 }, as("alice"));
      expect(last.content).toBe(answer("done 3 steps"));
      const all = [
        [1, 3, "step 1"],
        [2, 3, "step 2"],
        [3, 3, "step 3"],
      ];
      const seen = events.map((e) => [e.progress, e.total, e.message]);
      expect(seen).toEqual(prefix === "mfsse" ? all : all.slice(0, seen.length));
    }
  });

  test("errors: a thrown error and tool_call_timeout are one clean line each and keep the session", async () => {
    // mcp-framework turns what execute() throws into an isError result with the error's message.
    for (const prefix of ["mf", "mfb", "mfsse"]) expect(cleanErrorLine(await call(`${prefix}_fail`, { reason: "quota" }, "bob"))).toBe("Refused: quota");
    expect((await call("mf_echo", { message: 3 }, "bob")).content).toBe("Invalid arguments for tool 'mf_echo'; fix them and call it again:\nmessage: expected string");
    expect(cleanErrorLine(await call("mf_sleep", { ms: 8000 }, "bob"))).toContain("tool_call_timeout");
    expect(whoami(await call("mf_whoami", {}, "bob")).userTag).toBe(tagOf("tok-bob"));
  });

  test("a user the AuthProvider refuses (mcp-framework's 401) gets one clean line; other users keep working", async () => {
    for (const prefix of ["mf", "mfb", "mfsse"]) {
      const message = await call(`${prefix}_echo`, { message: "x" }, "revoked-mallory");
      expect(cleanErrorLine(message)).toMatch(/^MCP tool 'echo' on server '\w+' failed: .*"status":401,"type":"authentication_error"/);
      expect(String(message.content)).not.toContain("tok-revoked");
    }
    expect((await call("mf_echo", { message: "still" }, "alice")).content).toBe(answer("Echo: still"));
  });

  const EXPIRED =
    "MCP tool 'echo' on server 'mf' failed: the server no longer knows this MCP session (HTTP 404: it expired or the " +
    "server restarted). The call was not sent again; a new session serves the next call.";

  // mcp-framework's http-stream answers a session id it does not hold with 404 {"code":-32001,"message":"Session not found"}.
  test("http-stream restarted between calls: one clean error, not sent again; the next call works; discovery re-initializes once", async () => {
    const server = McpServerSchema.parse({ type: "http", url: `http://127.0.0.1:${stream.port}/mcp`, session_init_timeout: 10 });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const target = { serverName: "mf", server, headers: async () => ({ "X-User": "discovery" }), secrets: [] };
    try {
      await Promise.all([discoverServer(target, pool), call("mf_whoami", {}, "alice")]);
      stream = await restart(stream);
      const sent = callsIn().length;
      expect(cleanErrorLine(await call("mf_echo", { message: "after" }, "alice"))).toBe(EXPIRED);
      expect(callsIn()).toHaveLength(sent);
      expect((await discoverServer(target, pool)).map((t) => t.definition.name)).toContain("whoami");
      expect(pool.size()).toBe(1);
      expect((await call("mf_echo", { message: "again" }, "alice")).content).toBe(answer("Echo: again"));
    } finally {
      await pool.close();
    }
  });

  test("http-stream restarted during a call: that call gets one clean error and is not sent again; the next call works", async () => {
    await call("mflong_whoami", {}, "dave");
    const running = await runningCall(graph, "mflong_progress", { steps: 400, delayMs: 20 }, as("dave"));
    stream = await restart(stream);
    const message = await running.done;
    expect(cleanErrorLine(message)).toMatch(/^MCP tool 'progress' on server 'mflong' failed: .*not sent again/);
    const sent = callsIn().filter((line) => line.endsWith(" progress")).length;
    expect((await call("mflong_echo", { message: "back" }, "dave")).content).toBe(answer("Echo: back"));
    expect(callsIn().filter((line) => line.endsWith(" progress"))).toHaveLength(sent);
  });

  test("http-stream in batch (JSON) mode restarted during a call: that call gets one clean error and is not sent again; the next call works", async () => {
    await call("mfb_whoami", {}, "dave");
    const running = await runningCall(graph, "mfb_progress", { steps: 400, delayMs: 20 }, as("dave"));
    batch = await restart(batch);
    expect(cleanErrorLine(await running.done)).toMatch(/^MCP tool 'progress' on server 'mfb' failed: .*not sent again/);
    const sent = callsIn().filter((line) => line.endsWith(" progress")).length;
    expect((await call("mfb_echo", { message: "back" }, "dave")).content).toBe(answer("Echo: back"));
    expect(callsIn().filter((line) => line.endsWith(" progress"))).toHaveLength(sent);
  });

  test("SSE restarted between calls and during a call: one clean error each, not sent again; the next call works", async () => {
    expect((await call("mfsse_echo", { message: "x" }, "alice")).content).toBe(answer("Echo: x"));
    sse = await restart(sse);
    // The restart ended the session's event stream: the harness drops the session once it reads that end, and this
    // call starts a new one; had it not read it yet, the call meets mcp-framework's 404 "Session not found" instead.
    const first = await call("mfsse_echo", { message: "after" }, "alice");
    if (first.status === "error") expect(cleanErrorLine(first)).toMatch(/no longer knows this MCP session \(HTTP 404.*not sent again/);
    else expect(first.content).toBe(answer("Echo: after"));
    expect((await call("mfsse_echo", { message: "again" }, "alice")).content).toBe(answer("Echo: again"));
    const running = await runningCall(graph, "mfsse_progress", { steps: 400, delayMs: 20 }, as("alice"));
    sse = await restart(sse);
    expect(cleanErrorLine(await running.done)).toMatch(/^MCP tool 'progress' on server 'mfsse' failed: .*not sent again/);
    expect((await call("mfsse_echo", { message: "back" }, "alice")).content).toBe(answer("Echo: back"));
  });
});
