/**
 * An MCP server built with fastmcp (the most used TypeScript MCP server framework; its HTTP layer is mcp-proxy),
 * plugged in as its users would: over streamable HTTP with per-user headers read by fastmcp's `authenticate(request)`,
 * and over stdio (one child per user and thread, pinned to the thread workspace). Driven through ToolNode and
 * createAgent with the scripted model; SPEC §2 call path, §3.4 results, §4.3 secrets, §5 sessions.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { realpath } from "node:fs/promises";
import * as path from "node:path";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createAgent } from "langchain";
import { z } from "zod";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { discoverServer } from "../../lib/mcp/discovery";
import { SessionPool } from "../../lib/sessions";
import { ScriptedChatModel } from "../../lib/agent";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, runningCall, toolMessagesOf, toolNodeGraph, type ToolNodeGraph, seenByModel, cleanErrorLine, streamedCall } from "../fixtures/graph";
import { freePort } from "../fixtures/ports";
import { alive, pidsWithMarker, waitUntil } from "../fixtures/processes";

const SERVER = path.join(__dirname, "..", "fixtures", "fastmcp-server.mjs");

const tagOf = (value: string): string => createHash("sha256").update(value).digest("hex").slice(0, 16);

/** The tool calls the server processes started, in order (`<pid> <tool>`), from the fixture's call log. */
const callsIn = (log: string): string[] => readFileSync(log, "utf8").split("\n").filter((line) => line.length > 0);

interface WhoAmI {
  userTag: string | null;
  sessionId: string | null;
  pid: number;
}
const whoami = (message: ToolMessage): WhoAmI => {
  expect(message.status).toBe("success");
  return JSON.parse(String(message.content)) as WhoAmI;
};

describe("fastmcp over streamable HTTP", () => {
  const logger = new RecordingLogger();
  const KEY = 'k3y"of/alice+=';
  let callLog: string;
  let port: number;
  let child: ChildProcess;
  let toolkit: McpToolkit;
  let tools: DynamicStructuredTool[];
  let graph: ToolNodeGraph;

  /** A server process loaded and waiting for a line on stdin to listen on `port` (fastmcp is slow to load). */
  let standby: Promise<ChildProcess> | undefined;
  function loadServer(): Promise<ChildProcess> {
    const loaded = spawn(process.execPath, [SERVER, "http", String(port)], {
      env: { ...process.env, FASTMCP_CALL_LOG: callLog, FASTMCP_START_ON_STDIN: "1" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    loaded.stderr!.resume();
    return new Promise<ChildProcess>((resolve, reject) => {
      let out = "";
      const onData = (chunk: Buffer) => {
        out += chunk.toString();
        if (!out.includes("fastmcp loaded")) return;
        loaded.stdout!.off("data", onData);
        loaded.off("exit", onExit);
        resolve(loaded);
      };
      const onExit = (code: number | null) => reject(new Error(`fastmcp server exited (${code}): ${out}`));
      loaded.stdout!.on("data", onData);
      loaded.once("exit", onExit);
    });
  }
  /** Starts the standby on `port`, resolves once it listens, and loads the next standby. */
  async function startServer(): Promise<ChildProcess> {
    const started = await (standby ?? loadServer());
    standby = loadServer();
    await new Promise<void>((resolve, reject) => {
      let out = "";
      started.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes(`fastmcp listening ${port}`)) resolve();
      });
      started.once("exit", (code) => reject(new Error(`fastmcp server exited (${code}): ${out}`)));
      started.stdin!.write("go\n");
    });
    return started;
  }
  async function stop(server: ChildProcess | undefined): Promise<void> {
    if (!server || server.exitCode !== null || server.signalCode !== null) return;
    const exited = new Promise((resolve) => server.once("exit", resolve));
    server.kill("SIGKILL");
    await exited;
  }
  const stopServer = () => stop(child);
  async function restartServer(): Promise<void> {
    await stopServer();
    child = await startServer();
  }

  beforeAll(async () => {
    const dir = await makeTempDir("mcp-fastmcp-http-");
    callLog = path.join(dir, "calls.log");
    writeFileSync(callLog, "");
    port = await freePort();
    child = await startServer();
    const configPath = await writeConfig(dir, {
      mcpServers: {
        fm: {
          type: "http",
          url: `http://127.0.0.1:${port}/mcp`,
          headers_from_context: { headers: { "X-User": "user_token", "X-Api-Key": "api_key" } },
          // Room for a loaded machine; the tests below scale their durations to it.
          tool_call_timeout: 3,
          session_init_timeout: 10,
        },
        // The same server with a timeout that outlasts a restart (the SDK resumes a broken stream after 1 s, then 1.5 s).
        fmlong: {
          type: "http",
          url: `http://127.0.0.1:${port}/mcp`,
          headers_from_context: { headers: { "X-User": "user_token", "X-Api-Key": "api_key" } },
          tool_call_timeout: 30,
        },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger, httpSessionIdleSeconds: null });
    tools = await toolkit.getTools();
    graph = toolNodeGraph(tools);
  });
  afterAll(async () => {
    // Also after a failed beforeAll, so that no server outlives the file.
    await toolkit?.close();
    await stopServer();
    if (standby) await stop(await standby.catch(() => undefined));
  });

  const tokenOf = (user: string) => `tok-${user}-${user.length}`;
  const as = (user: string) => ({
    context: { user_id: user, thread_id: "http", secrets: { user_token: tokenOf(user), api_key: user === "alice" ? KEY : `key-of-${user}` } },
  });
  const call = (name: string, args: Record<string, unknown>, user: string) => callThroughGraph(graph, `fm_${name}`, args, as(user));

  test("the toolkit lists fastmcp's tools under the fm_ prefix", () => {
    expect(tools.map((t) => t.name).filter((n) => n.startsWith("fm_")).sort()).toEqual(
      ["crash", "echo", "echo-key", "fail", "image", "log", "progress", "sleep", "stream", "whoami"].map((n) => `fm_${n}`),
    );
  });

  test("each user's headers reach authenticate() in their own session, only theirs, and the session survives across calls", async () => {
    // Each new fastmcp session costs the server about a second (it polls for the client's capabilities before it
    // handles the initialize request): the two users' sessions start side by side.
    const [alice, bob] = (await Promise.all([call("whoami", {}, "alice"), call("whoami", {}, "bob")])).map(whoami);
    expect(alice.userTag).toBe(tagOf(tokenOf("alice")));
    expect(bob.userTag).toBe(tagOf(tokenOf("bob")));
    expect(alice.sessionId).not.toBeNull();
    expect(bob.sessionId).not.toBe(alice.sessionId);
    expect((await call("echo", { message: "hi" }, "alice")).content).toBe("Echo: hi");
    expect(whoami(await call("whoami", {}, "alice"))).toEqual(alice);
    expect(whoami(await call("whoami", {}, "bob"))).toEqual(bob);
    expect(logger.messages().join("\n")).not.toMatch(/tok-|key-of-/);
  });

  test("the API key a careless server echoes (raw, JSON-escaped, URL-encoded, base64) never reaches the ToolMessage or the logs", async () => {
    const message = await call("echo-key", {}, "alice");
    expect(message.status).toBe("success");
    for (const form of [KEY, JSON.stringify(KEY).slice(1, -1), encodeURIComponent(KEY), Buffer.from(KEY).toString("base64")]) {
      expect(seenByModel(message)).not.toContain(form);
      expect(logger.messages().join("\n")).not.toContain(form);
    }
    expect(String(message.content)).toMatch(/^raw=\S+ json=/);
  });

  test("a user without the secret the headers need is refused before anything is sent, naming the key", async () => {
    const before = callsIn(callLog).length;
    const message = await callThroughGraph(graph, "fm_echo", { message: "x" }, { context: { user_id: "carol", thread_id: "http", secrets: { api_key: "k" } } });
    expect(cleanErrorLine(message)).toContain("user_token");
    expect(callsIn(callLog)).toHaveLength(before);
  });

  test("reportProgress reaches the run's custom stream, in order, with its message", async () => {
    const { message, events } = await streamedCall(graph, "fm_progress", { steps: 3, delayMs: 5 }, as("alice"));
    expect(message.content).toBe("done 3 steps");
    expect(events.map((e) => [e.type, e.progress, e.total, e.message])).toEqual([
      ["mcp_progress", 1, 3, "step 1"],
      ["mcp_progress", 2, 3, "step 2"],
      ["mcp_progress", 3, 3, "step 3"],
    ]);
    for (const e of events) expect(e).toMatchObject({ toolCallId: "stream-fm_progress", server: "fm", tool: "progress" });
  });

  test("progress restarts tool_call_timeout (3 s): a 4 s call that reports every 0.5 s succeeds", async () => {
    expect((await call("progress", { steps: 8, delayMs: 500 }, "alice")).content).toBe("done 8 steps");
  });

  test("without progress, tool_call_timeout ends the call with one clean line, and the session is kept", async () => {
    const before = whoami(await call("whoami", {}, "bob"));
    expect(cleanErrorLine(await call("sleep", { ms: 8000 }, "bob"))).toContain("tool_call_timeout");
    expect(whoami(await call("whoami", {}, "bob"))).toEqual(before);
  });

  test("streamContent (a fastmcp extension) does not disturb the call: the model gets the tool's result", async () => {
    const message = await call("stream", { words: ["a", "b", "c"] }, "alice");
    expect(message.status).toBe("success");
    expect(message.content).toBe("streamed: a b c");
  });

  test("a UserError reaches the model as its one line; a plain Error as fastmcp's one line", async () => {
    expect(cleanErrorLine(await call("fail", { reason: "quota" }, "alice"))).toBe("Refused: quota");
    expect(cleanErrorLine(await call("crash", {}, "alice"))).toBe("Tool 'crash' execution failed: kaboom");
  });

  test("a UserError that names the API key reaches the model without it", async () => {
    const text = cleanErrorLine(await call("fail", { reason: "quota", withKey: true }, "alice"));
    expect(text).toMatch(/^Refused: quota for key \S+$/);
    expect(text).not.toContain(KEY);
  });

  test("a key authenticate() refuses (fastmcp's 401) is one clean line without the key; other users keep working", async () => {
    const mallory = { context: { user_id: "mallory", thread_id: "http", secrets: { user_token: "tok-m", api_key: "revoked-k3y-99" } } };
    const message = await callThroughGraph(graph, "fm_echo", { message: "x" }, mallory);
    // fastmcp refuses with an empty body: without its status the line said nothing ("Error POSTing to endpoint: ").
    expect(cleanErrorLine(message)).toBe(
      "MCP tool 'echo' on server 'fm' failed: Streamable HTTP error: Error POSTing to endpoint (HTTP 401) with an empty body",
    );
    expect(seenByModel(message)).not.toContain("revoked-k3y-99");
    expect(logger.messages().join("\n")).not.toContain("revoked-k3y-99");
    expect((await call("echo", { message: "still" }, "alice")).content).toBe("Echo: still");
  });

  test("an argument the listed schema refuses reaches the model as one line per field, naming it", async () => {
    const message = await call("echo", { message: 3 }, "alice");
    expect(message.status).toBe("error");
    expect(message.content).toBe("Invalid arguments for tool 'fm_echo'; fix them and call it again:\nmessage: expected string");
  });

  test("images and embedded resources become blocks; log.info does not disturb the call", async () => {
    const image = await call("image", {}, "alice");
    const blocks = image.content as { type: string; mimeType?: string; text?: string }[];
    expect(blocks.map((b) => b.type)).toEqual(["image", "text"]);
    expect(blocks[0].mimeType).toBe("image/png");
    expect(blocks[1].text).toBe("note one");
    expect((await call("log", { message: "hello" }, "alice")).content).toBe("logged");
  });

  const EXPIRED =
    "MCP tool 'echo' on server 'fm' failed: the server no longer knows this MCP session (HTTP 404: it expired or the " +
    "server restarted). The call was not sent again; a new session serves the next call.";

  // fastmcp (mcp-proxy) answers a session id it does not know with the MCP spec's 404 {"code":-32001,"message":"Session not found"}.
  test("a restart between calls: the next call gets one clean error, not sent again; the one after works on a new session; discovery re-initializes once, transparently", async () => {
    const server = McpServerSchema.parse({ type: "http", url: `http://127.0.0.1:${port}/mcp`, session_init_timeout: 10 });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const target = { serverName: "fm", server, headers: async () => ({}), secrets: [] };
    try {
      const [listed, before] = await Promise.all([discoverServer(target, pool), call("whoami", {}, "alice").then(whoami)]);
      expect(listed.map((t) => t.definition.name)).toContain("whoami");
      await restartServer();
      const first = await call("echo", { message: "after-restart" }, "alice");
      expect(cleanErrorLine(first)).toBe(EXPIRED);
      expect(callsIn(callLog).filter((line) => line.startsWith(`${child.pid} `))).toEqual([]);
      const [again, relisted] = await Promise.all([call("echo", { message: "again" }, "alice"), discoverServer(target, pool)]);
      expect(again.content).toBe("Echo: again");
      expect(relisted.map((t) => t.definition.name)).toContain("whoami");
      expect(pool.size()).toBe(1);
      const after = whoami(await call("whoami", {}, "alice"));
      expect(after.sessionId).not.toBe(before.sessionId);
      expect(after.userTag).toBe(tagOf(tokenOf("alice")));
      expect(after.pid).toBe(child.pid);
    } finally {
      await pool.close();
    }
  });

  test("a restart during a call: that call gets one clean error and is not sent again; the next call works", async () => {
    const before = whoami(await callThroughGraph(graph, "fmlong_whoami", {}, as("dave")));
    // fastmcp's mcp-proxy keeps an event store by default: the call's stream has event ids, so the SDK resumes it
    // (a GET with Last-Event-ID) once it breaks; the restarted server does not know the session, and the call is lost.
    const running = await runningCall(graph, "fmlong_progress", { steps: 400, delayMs: 20 }, as("dave"));
    const killed = child.pid;
    await restartServer();
    const message = await running.done;
    expect(cleanErrorLine(message)).toMatch(/^MCP tool 'progress' on server 'fmlong' failed: .*not sent again/);
    expect((await callThroughGraph(graph, "fmlong_echo", { message: "back" }, as("dave"))).content).toBe("Echo: back");
    expect(whoami(await callThroughGraph(graph, "fmlong_whoami", {}, as("dave"))).sessionId).not.toBe(before.sessionId);
    const progressCalls = callsIn(callLog).filter((line) => line.endsWith(" progress"));
    expect(progressCalls.filter((line) => line.startsWith(`${killed} `)).length).toBeGreaterThan(0);
    expect(progressCalls.filter((line) => line.startsWith(`${child.pid} `))).toEqual([]);
  });
});

describe("fastmcp over stdio", () => {
  const MARKER = `fastmcp-marker-${process.pid}-${Date.now()}`;
  const logger = new RecordingLogger();
  let callLog: string;
  let dataDir: string;
  let toolkit: McpToolkit;
  let tools: DynamicStructuredTool[];
  let graph: ToolNodeGraph;

  beforeAll(async () => {
    dataDir = await realpath(await makeTempDir("mcp-fastmcp-data-"));
    const dir = await makeTempDir("mcp-fastmcp-stdio-");
    callLog = path.join(dir, "calls.log");
    writeFileSync(callLog, "");
    const configPath = await writeConfig(dir, {
      mcpServers: {
        fm: { type: "stdio", command: process.execPath, args: [SERVER, "stdio", MARKER], env: { FASTMCP_CALL_LOG: callLog }, tool_call_timeout: 5 },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir });
    tools = await toolkit.getTools();
    graph = toolNodeGraph(tools);
  });
  afterAll(async () => {
    await toolkit.close();
    expect(await waitUntil(() => pidsWithMarker(MARKER).length === 0)).toBe(true);
  });

  const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");
  const scope = (user: string, thread: string) => ({ context: { user_id: user, thread_id: thread } });
  const call = (name: string, args: Record<string, unknown>, user: string, thread: string) => callThroughGraph(graph, `fm_${name}`, args, scope(user, thread));
  const pidOf = async (user: string, thread: string) => whoami(await call("whoami", {}, user, thread)).pid;
  async function kill(pid: number): Promise<void> {
    process.kill(pid, "SIGKILL");
    expect(await waitUntil(() => !alive(pid))).toBe(true);
  }

  test("per-thread children in the thread workspace: same scope reuses its child, another thread or user gets its own", async () => {
    // Discovery's own child (the default scope) is there already.
    const discovery = pidsWithMarker(MARKER);
    expect(discovery).toHaveLength(1);
    const [a1, a2, b1] = await Promise.all([pidOf("alice", "t1"), pidOf("alice", "t2"), pidOf("bob", "t1")]);
    expect(new Set([a1, a2, b1]).size).toBe(3);
    expect(await pidOf("alice", "t1")).toBe(a1);
    expect(pidsWithMarker(MARKER).sort()).toEqual([...discovery, a1, a2, b1].sort());
    expect(readlinkSync(`/proc/${a1}/cwd`)).toBe(workspaceOf("t1"));
    expect(readlinkSync(`/proc/${a2}/cwd`)).toBe(workspaceOf("t2"));
    expect(readFileSync(`/proc/${b1}/environ`, "utf8").split("\0")).toContain(`TMPDIR=${path.join(workspaceOf("t1"), ".mcp", "tmp")}`);
  });

  test("progress over stdio reaches the run's custom stream; a UserError is one clean line and keeps the child", async () => {
    const pid = await pidOf("alice", "t1");
    const { message, events } = await streamedCall(graph, "fm_progress", { steps: 2, delayMs: 5 }, scope("alice", "t1"));
    expect(message.content).toBe("done 2 steps");
    expect(events.map((e) => [e.progress, e.total])).toEqual([
      [1, 2],
      [2, 2],
    ]);
    expect(cleanErrorLine(await call("fail", { reason: "nope" }, "alice", "t1"))).toBe("Refused: nope");
    expect(await pidOf("alice", "t1")).toBe(pid);
  });

  test("the child killed during a call: that call gets one clean error and is not replayed; the next call runs on a new child", async () => {
    const pid = await pidOf("bob", "t1");
    const running = await runningCall(graph, "fm_progress", { steps: 400, delayMs: 20 }, scope("bob", "t1"));
    await kill(pid);
    cleanErrorLine(await running.done);
    const next = await pidOf("bob", "t1");
    expect(next).not.toBe(pid);
    expect(callsIn(callLog).filter((line) => line === `${next} progress`)).toEqual([]);
  });

  test("through createAgent: the scripted model's calls land in the user's thread child", async () => {
    const pid = await pidOf("alice", "t1");
    const model = new ScriptedChatModel([
      ScriptedChatModel.toolCall("fm_whoami", {}, "who"),
      ScriptedChatModel.toolCall("fm_echo", { message: "agent" }, "echo"),
      { content: "done" },
    ]);
    const agent = createAgent({ model, tools, contextSchema: z.object({ user_id: z.string(), thread_id: z.string() }) });
    const result = await agent.invoke({ messages: [new HumanMessage("who am i")] }, { context: { user_id: "alice", thread_id: "t1" }, configurable: { thread_id: "conv" } });
    const messages = toolMessagesOf(result.messages as BaseMessage[]);
    expect(whoami(messages.find((m) => m.tool_call_id === "who")!).pid).toBe(pid);
    expect(messages.find((m) => m.tool_call_id === "echo")!.content).toBe("Echo: agent");
    for (const m of messages) expect(seenByModel(m)).not.toContain(dataDir);
  });
});
