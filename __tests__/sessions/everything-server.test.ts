/**
 * The official "everything" MCP server (@modelcontextprotocol/server-everything), plugged in as a user would: over
 * stdio (one child per user and thread, pinned to the thread workspace) and over streamable HTTP (one session per
 * header set, surviving across calls and a server restart). Driven through ToolNode and createAgent with the
 * scripted model; SPEC §2 call path, §3.4 results, §4.3 secrets, §5 sessions.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { spawn, type ChildProcess } from "node:child_process";
import { connect } from "node:net";
import { readFileSync, readlinkSync, statSync } from "node:fs";
import { realpath } from "node:fs/promises";
import * as path from "node:path";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { z } from "zod";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { discoverServer } from "../../lib/mcp/discovery";
import { isExpiredSession, SessionPool } from "../../lib/sessions";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ScriptedChatModel } from "../../lib/agent";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, runningCall, toolMessagesOf, toolNodeGraph, type ToolNodeGraph, seenByModel, cleanErrorLine, streamedCall } from "../fixtures/graph";
import { startOnPort } from "../fixtures/gateway-process";
import { alive, pidsWithMarker, waitUntil } from "../fixtures/processes";

const SERVER = require.resolve("@modelcontextprotocol/server-everything/dist/index.js");

const scope = (user: string, thread: string) => ({ context: { user_id: user, thread_id: thread } });

describe("over stdio", () => {
  /** A unique argument on the child's command line, so the test counts the server's real processes. */
  const MARKER = `everything-marker-${process.pid}-${Date.now()}`;
  const SECRET = 'ev3ry"th1ng/tok+en';
  const LITERAL = "l1t-ev-T0k";
  const USER_SECRET = "us3r-K3y";
  const logger = new RecordingLogger();
  const checkpointer = new MemorySaver();
  let dataDir: string;
  let toolkit: McpToolkit;
  let tools: DynamicStructuredTool[];
  let graph: ToolNodeGraph;

  beforeAll(async () => {
    dataDir = await realpath(await makeTempDir("mcp-everything-data-"));
    const configPath = await writeConfig(await makeTempDir("mcp-everything-"), {
      mcpServers: {
        ev: {
          type: "stdio",
          command: process.execPath,
          args: [SERVER, "stdio", MARKER],
          // An operator credential from the environment, and one written as it is under a credential name.
          env: { EVERYTHING_API_TOKEN: "$OPERATOR_TOKEN", SERVICE_API_KEY: LITERAL },
          // Per-user credentials are for HTTP/SSE: on stdio they are ignored with a warning (SPEC §4.3).
          headers_from_context: { headers: { "X-Api-Key": "api_key" } },
          // Room for a loaded machine (a call and its workspace walks); the tests below scale their durations to it.
          tool_call_timeout: 3,
        },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: { OPERATOR_TOKEN: SECRET }, logger, dataDir });
    tools = await toolkit.getTools();
    graph = toolNodeGraph(tools, checkpointer);
  });
  afterAll(async () => {
    await toolkit.close();
    expect(await waitUntil(() => pidsWithMarker(MARKER).length === 0)).toBe(true);
  });

  const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");
  let runs = 0;
  /** One call in the scope (user, thread); each run checkpoints under its own LangGraph thread so runs do not pile up. */
  const call = (name: string, args: Record<string, unknown>, user: string, thread: string, run = `${user}-${thread}-${++runs}`) =>
    callThroughGraph(graph, `ev_${name}`, args, {
      context: { user_id: user, thread_id: thread, secrets: { api_key: USER_SECRET } },
      configurable: { thread_id: run },
    });
  /** The live child whose TMPDIR is `tmp` (each thread has its own), read from /proc. */
  const childrenWithTmp = (tmp: string) =>
    pidsWithMarker(MARKER).filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`TMPDIR=${tmp}`);
      } catch {
        return false;
      }
    });

  test("headers_from_context on a stdio server is ignored with one warning naming the server", () => {
    expect(logger.messages("warn").filter((m) => m.includes("headers_from_context"))).toEqual([
      "MCP server 'ev' uses stdio; headers_from_context applies only to http/sse servers and is ignored (stdio sessions are per user/thread already)",
    ]);
  });

  test("the toolkit lists the server's tools under the ev_ prefix", async () => {
    const names = tools.map((t) => t.name);
    for (const raw of ["echo", "get-sum", "get-env", "get-structured-content", "get-resource-links", "get-resource-reference"]) {
      expect(names).toContain(`ev_${raw}`);
    }
    expect(names).toContain("ev_trigger-long-running-operation");
  });

  test("two threads of one user get two children; the same thread again reuses its child; two users on one thread get two", async () => {
    const before = pidsWithMarker(MARKER).length;
    expect((await call("echo", { message: "a1" }, "alice", "t1")).content).toBe("Echo: a1");
    expect(pidsWithMarker(MARKER)).toHaveLength(before + 1);
    expect((await call("echo", { message: "a2" }, "alice", "t2")).content).toBe("Echo: a2");
    expect(pidsWithMarker(MARKER)).toHaveLength(before + 2);
    const t1 = childrenWithTmp(path.join(workspaceOf("t1"), ".mcp", "tmp"));
    expect(t1).toHaveLength(1);
    expect((await call("get-sum", { a: 2, b: 3 }, "alice", "t1")).content).toContain("5");
    expect(pidsWithMarker(MARKER)).toHaveLength(before + 2);
    expect(childrenWithTmp(path.join(workspaceOf("t1"), ".mcp", "tmp"))).toEqual(t1);
    expect((await call("echo", { message: "b1" }, "bob", "t1")).content).toBe("Echo: b1");
    expect(pidsWithMarker(MARKER)).toHaveLength(before + 3);
    expect(childrenWithTmp(path.join(workspaceOf("t1"), ".mcp", "tmp"))).toHaveLength(2);
  });

  test("the child runs in the thread workspace with TMPDIR/TMP/TEMP in its .mcp/tmp (0700)", async () => {
        const tmp = path.join(workspaceOf("t2"), ".mcp", "tmp");
    const [pid] = childrenWithTmp(tmp);
    expect(pid).toBeDefined();
    expect(readlinkSync(`/proc/${pid}/cwd`)).toBe(workspaceOf("t2"));
    const env = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    expect(env).toEqual(expect.arrayContaining([`TMP=${tmp}`, `TEMP=${tmp}`]));
    expect(statSync(tmp).mode & 0o777).toBe(0o700);
  });

  test("get-env: the operator's credentials the child holds never reach the ToolMessage, the logs or the checkpoint", async () => {
    const message = await call("get-env", {}, "alice", "t1", "alice-env");
    expect(message.status).toBe("success");
    const env = JSON.parse(String(message.content)) as Record<string, string>;
    // The server did get them (it echoes the variable names), the model sees no value.
    expect(Object.keys(env)).toEqual(expect.arrayContaining(["EVERYTHING_API_TOKEN", "SERVICE_API_KEY", "TMPDIR"]));
    expect(Object.values(env)).not.toContain(USER_SECRET);
    for (const secret of [SECRET, JSON.stringify(SECRET).slice(1, -1), encodeURIComponent(SECRET), LITERAL, USER_SECRET]) {
      expect(seenByModel(message)).not.toContain(secret);
      expect(logger.messages().join("\n")).not.toContain(secret);
      const tuples: string[] = [];
      for await (const tuple of checkpointer.list({ configurable: { thread_id: "alice-env" } })) tuples.push(JSON.stringify(tuple));
      expect(tuples.length).toBeGreaterThan(0);
      expect(tuples.join("\n")).not.toContain(secret);
    }
  });

  test("get-env: what the model sees of TMPDIR", async () => {
    const message = await call("get-env", {}, "alice", "t1");
    const env = JSON.parse(String(message.content)) as Record<string, string>;
    // SPEC §5.1 rewrites references to existing *files*; .mcp/tmp is a directory, so it is shown as it is.
    expect(env.TMPDIR).toBe(path.join(workspaceOf("t1"), ".mcp", "tmp"));
  });

  test("progress: trigger-long-running-operation's notifications reach the run's custom stream, in order, for this call", async () => {
    const { message, events } = await streamedCall(
      graph,
      "ev_trigger-long-running-operation",
      { duration: 0.2, steps: 4 },
      { ...scope("alice", "t1"), configurable: { thread_id: "progress-stream" } },
    );
    expect(message.status).toBe("success");
    expect(message.content).toBe("Long running operation completed. Duration: 0.2 seconds, Steps: 4.");
    const progress = events.filter((e) => e.type === "mcp_progress");
    expect(progress.map((e) => [e.progress, e.total])).toEqual([
      [1, 4],
      [2, 4],
      [3, 4],
      [4, 4],
    ]);
    for (const e of progress) {
      expect(e).toMatchObject({ toolCallId: "stream-ev_trigger-long-running-operation", server: "ev", tool: "trigger-long-running-operation" });
    }
  });

  test("progress restarts tool_call_timeout (3 s): a 5 s operation that reports every 0.2 s succeeds", async () => {
    const message = await call("trigger-long-running-operation", { duration: 5, steps: 25 }, "alice", "t1");
    expect(message.status).toBe("success");
    expect(message.content).toBe("Long running operation completed. Duration: 5 seconds, Steps: 25.");
  });

  test("without progress, tool_call_timeout ends the call with one clean line, and the child is kept", async () => {
    const tmp = path.join(workspaceOf("t2"), ".mcp", "tmp");
    const [pid] = childrenWithTmp(tmp);
    expect(pid).toBeDefined();
    const message = await call("trigger-long-running-operation", { duration: 8, steps: 1 }, "alice", "t2");
    expect(cleanErrorLine(message)).toContain("tool_call_timeout");
    expect((await call("echo", { message: "y" }, "alice", "t2")).content).toBe("Echo: y");
    expect(childrenWithTmp(tmp)).toEqual([pid]);
    expect(alive(pid)).toBe(true);
  });

  describe("result conversion (SPEC §3.4), through createAgent", () => {
    let messages: ToolMessage[];
    const byId = (id: string): ToolMessage => messages.find((m) => m.tool_call_id === id)!;

    beforeAll(async () => {
      const model = new ScriptedChatModel([
        ScriptedChatModel.toolCall("ev_get-structured-content", { location: "Chicago" }, "structured"),
        ScriptedChatModel.toolCall("ev_get-resource-links", { count: 2 }, "links"),
        ScriptedChatModel.toolCall("ev_get-resource-reference", { resourceType: "Text", resourceId: 2 }, "reference"),
        ScriptedChatModel.toolCall("ev_get-resource-reference", { resourceType: "Blob", resourceId: 1 }, "blob"),
        ScriptedChatModel.toolCall("ev_get-tiny-image", {}, "image"),
        ScriptedChatModel.toolCall("ev_get-annotated-message", { messageType: "error", includeImage: true }, "annotated"),
        ScriptedChatModel.toolCall("ev_get-sum", { a: "two", b: 3 }, "invalid"),
        { content: "done" },
      ]);
      const agent = createAgent({ model, tools, contextSchema: z.object({ user_id: z.string(), thread_id: z.string() }) });
      const result = await agent.invoke(
        { messages: [new HumanMessage("show me everything")] },
        { context: { user_id: "alice", thread_id: "t1" }, configurable: { thread_id: "conv" } },
      );
      messages = toolMessagesOf(result.messages as BaseMessage[]);
    });

    test("structuredContent rides along as the artifact; the text block is the content", () => {
      expect(byId("structured").content).toBe('{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}');
      expect(byId("structured").artifact).toEqual({ structuredContent: { temperature: 36, conditions: "Light rain / drizzle", humidity: 82 } });
    });

    test("resource links become file blocks carrying their URI and MIME type", () => {
      expect(byId("links").content).toEqual([
        { type: "text", text: "Here are 2 resource links to resources available in this server:" },
        { type: "file", url: "demo://resource/dynamic/blob/1", mimeType: "text/plain" },
        { type: "file", url: "demo://resource/dynamic/text/2", mimeType: "text/plain" },
      ]);
    });

    test("an embedded text resource becomes its text; an embedded blob a file block with its data", () => {
      expect(byId("reference").content).toMatch(
        /^Returning resource reference for Resource 2:\nResource 2: This is a plaintext resource created at .+\nYou can access this resource using the URI: demo:\/\/resource\/dynamic\/text\/2$/,
      );
      const blob = byId("blob").content as { type: string; mimeType?: string; data?: string }[];
      expect(blob.map((b) => b.type)).toEqual(["text", "file", "text"]);
      expect(blob[1].mimeType).toBe("text/plain");
      expect(Buffer.from(blob[1].data!, "base64").toString()).toMatch(/^Resource 1: This is a base64 blob created at /);
    });

    test("images become image blocks; annotated text keeps its text", () => {
      const image = byId("image").content as { type: string; mimeType?: string; data?: string }[];
      expect(image.map((b) => b.type)).toEqual(["text", "image", "text"]);
      expect(image[1].mimeType).toBe("image/png");
      const annotated = byId("annotated").content as { type: string; text?: string }[];
      expect(annotated).toEqual([
        { type: "text", text: "Error: Operation failed" },
        expect.objectContaining({ type: "image", mimeType: "image/png" }),
      ]);
      expect(byId("annotated").status).toBe("success");
    });

    test("an argument the schema refuses reaches the model as one clean line per field, naming it", () => {
      expect(byId("invalid").status).toBe("error");
      expect(byId("invalid").content).toBe("Invalid arguments for tool 'ev_get-sum'; fix them and call it again:\na: expected number");
    });

    test("nothing the model was shown holds the host data dir or a credential", () => {
      for (const message of messages) {
        expect(seenByModel(message)).not.toContain(dataDir);
        expect(seenByModel(message)).not.toContain(SECRET);
      }
    });
  });
});

describe("over streamable HTTP", () => {
  const logger = new RecordingLogger();
  let port: number;
  let child: ChildProcess;
  let toolkit: McpToolkit;
  let tools: DynamicStructuredTool[];
  let graph: ToolNodeGraph;

  /**
   * Starts the server on `port` and resolves once it listens. The server prints "listening on port" from express 5's
   * listen callback, which is called with a failed listen's error too (then "Port <n> is already in use" and exit 1):
   * a start is taken only once a connection to the port is accepted and that line has not followed.
   */
  async function startServer(): Promise<ChildProcess> {
    const started = spawn(process.execPath, [SERVER, "streamableHttp"], { env: { ...process.env, PORT: String(port) }, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    const exited = new Promise<number | null>((resolve) => started.once("exit", (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      started.stderr!.on("data", (chunk: Buffer) => {
        err += chunk.toString();
        if (err.includes("listening on port")) resolve();
      });
      void exited.then((code) => reject(new Error(`everything server exited (${code}): ${err}`)));
    });
    const accepted = await new Promise<boolean>((resolve) => {
      const socket = connect(port, "127.0.0.1", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (!accepted || err.includes("already in use") || started.exitCode !== null) {
      if (started.exitCode === null) started.kill("SIGKILL");
      await exited;
      throw new Error(`everything server did not listen (EADDRINUSE): ${err}`);
    }
    return started;
  }
  async function stopServer(): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  }

  beforeAll(async () => {
    // The port may be taken between freePort and the server's listen: a start that met EADDRINUSE is made on another.
    child = await startOnPort((p) => {
      port = p;
      return startServer();
    });
    const configPath = await writeConfig(await makeTempDir("mcp-everything-http-"), {
      mcpServers: {
        ev: {
          type: "http",
          url: `http://127.0.0.1:${port}/mcp`,
          headers_from_context: { headers: { "X-Api-Key": "api_key" } },
          tool_call_timeout: 5,
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
    if (child) await stopServer();
  });

  const as = (user: string) => ({ context: { user_id: user, thread_id: "http", secrets: { api_key: `key-of-${user}` } } });
  const call = (name: string, args: Record<string, unknown>, user: string) => callThroughGraph(graph, `ev_${name}`, args, as(user));
  /** The MCP session the server served a call on: toggle-simulated-logging names it (a second toggle stops it again). */
  async function sessionOf(user: string): Promise<string> {
    const started = await call("toggle-simulated-logging", {}, user);
    const id = /^Started simulated, random-leveled logging for session (\S+) /.exec(String(started.content))?.[1];
    expect(id).toBeDefined();
    const stopped = await call("toggle-simulated-logging", {}, user);
    expect(stopped.content).toBe(`Stopped simulated logging for session ${id}`);
    return id!;
  }

  test("each user's headers get their own session, and it survives across calls", async () => {
    const alice = await sessionOf("alice");
    const bob = await sessionOf("bob");
    expect(bob).not.toBe(alice);
    expect((await call("echo", { message: "hi" }, "alice")).content).toBe("Echo: hi");
    expect(await sessionOf("alice")).toBe(alice);
    expect(await sessionOf("bob")).toBe(bob);
    expect(logger.messages().join("\n")).not.toMatch(/key-of-/);
  });

  test("a user without the secret the headers need is refused before anything is sent, naming the key", async () => {
    const message = await callThroughGraph(graph, "ev_echo", { message: "x" }, { context: { user_id: "carol", thread_id: "http" } });
    expect(cleanErrorLine(message)).toContain("api_key");
  });

  test("progress over HTTP reaches the run's custom stream", async () => {
    const { message, events } = await streamedCall(graph, "ev_trigger-long-running-operation", { duration: 0.1, steps: 2 }, as("alice"));
    expect(message.content).toBe("Long running operation completed. Duration: 0.1 seconds, Steps: 2.");
    expect(events.map((e) => [e.type, e.progress, e.total])).toEqual([
      ["mcp_progress", 1, 2],
      ["mcp_progress", 2, 2],
    ]);
  });

  const EXPIRED =
    "MCP tool 'echo' on server 'ev' failed: the server no longer knows this MCP session (HTTP 400: it expired or the " +
    "server restarted). The call was not sent again; a new session serves the next call.";

  // The everything server answers a session id it does not know with HTTP 400 "No valid session ID provided" (as the
  // SDK's example servers do), not the 404 of the MCP spec: the harness must still see the session as gone.
  test("a restart between calls: the next call gets one clean error, not sent again; the one after works on a new session", async () => {
    const before = await sessionOf("alice");
    await stopServer();
    child = await startOnPort(startServer, port);
    const first = await call("echo", { message: "after-restart" }, "alice");
    expect(cleanErrorLine(first)).toBe(EXPIRED);
    const second = await call("echo", { message: "again" }, "alice");
    expect(second.content).toBe("Echo: again");
    expect(await sessionOf("alice")).not.toBe(before);
  });

  test("a restart during a call: that call gets one clean error (not sent again); the next call works on a new session", async () => {
    const before = await sessionOf("dave");
    const running = await runningCall(graph, "ev_trigger-long-running-operation", { duration: 5, steps: 50 }, as("dave"));
    await stopServer();
    child = await startOnPort(startServer, port);
    const message = await running.done;
    expect(cleanErrorLine(message)).toMatch(/^MCP tool 'trigger-long-running-operation' on server 'ev' failed: .*not sent again/);
    expect((await call("echo", { message: "back" }, "dave")).content).toBe("Echo: back");
    expect(await sessionOf("dave")).not.toBe(before);
  });

  test("discovery on a session the restarted server forgot re-initializes once, transparently", async () => {
    const server = McpServerSchema.parse({ type: "http", url: `http://127.0.0.1:${port}/mcp`, session_init_timeout: 5 });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const target = { serverName: "ev", server, headers: async () => ({}), secrets: [] };
    try {
      expect((await discoverServer(target, pool)).map((t) => t.definition.name)).toContain("get-env");
      await stopServer();
      child = await startOnPort(startServer, port);
      expect((await discoverServer(target, pool)).map((t) => t.definition.name)).toContain("get-env");
      expect(pool.size()).toBe(1);
    } finally {
      await pool.close();
    }
  });
});

describe("which HTTP 400 is a forgotten session", () => {
  const BODY = '{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}';
  const url = new URL("http://127.0.0.1:9/mcp");
  const withId = new StreamableHTTPClientTransport(url, { sessionId: "s-1" });

  test("the everything server's answer to an unknown session id, on a session it gave an id", () => {
    expect(isExpiredSession(new StreamableHTTPError(400, `Error POSTing to endpoint: ${BODY}`), withId)).toBe(true);
  });

  test("any other 400 is the server's own answer; so is any 400 on a session without an id (a stateless server)", () => {
    const other = '{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}';
    expect(isExpiredSession(new StreamableHTTPError(400, `Error POSTing to endpoint: ${other}`), withId)).toBe(false);
    expect(isExpiredSession(new StreamableHTTPError(400, "Error POSTing to endpoint: invalid arguments"), withId)).toBe(false);
    expect(isExpiredSession(new StreamableHTTPError(400, `Error POSTing to endpoint: ${BODY}`), new StreamableHTTPClientTransport(url))).toBe(false);
  });
});
