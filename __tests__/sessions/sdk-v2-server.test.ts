/**
 * An MCP server built on the MCP TypeScript SDK v2 (`@modelcontextprotocol/server` 2.4.0, `@modelcontextprotocol/node`
 * 2.1.2; ../fixtures/sdk-v2-server.ts) behind our SDK 1.32.2 client: over stdio (one child per user and thread, in the
 * thread workspace) and over streamable HTTP (per-user header sets, restarts), driven through ToolNode and createAgent
 * with the scripted model. SPEC §3 (discovery, results, progress) and §5 (sessions).
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { existsSync, readFileSync, readlinkSync } from "node:fs";
import { realpath } from "node:fs/promises";
import * as path from "node:path";
import { HumanMessage, type BaseMessage, type ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { createAgent } from "langchain";
import { z } from "zod";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { discoverServer } from "../../lib/mcp/discovery";
import { SessionPool } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, cleanErrorLine, seenByModel, streamedCall, toolMessagesOf, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { pidsWithMarker, waitUntil } from "../fixtures/processes";
import { sdkV2StdioLaunch, startSdkV2HandlerServer, startSdkV2HttpServer, type SdkV2HttpFixture, type SdkV2Stats } from "../fixtures/sdk-v2-server";

interface Pid {
  pid: number;
  cwd: string;
  sessionId: string | null;
  protocolVersion: string | null;
  userTag: string | null;
}
const pidOf = (message: ToolMessage): Pid => {
  expect(message.status).toBe("success");
  return JSON.parse(String(message.content)) as Pid;
};
const changes = (message: ToolMessage) => (message.artifact as { workspace_changes?: string[] } | undefined)?.workspace_changes;
const EXPIRED = (status: string) =>
  `MCP tool 'echo' on server 'v2' failed: the server no longer knows this MCP session (${status}: it expired or the server restarted). ` +
  "The call was not sent again; a new session serves the next call.";
const TOOLS = ["echo", "forecast", "loose_forecast", "pid", "progress", "report", "slow", "stats", "tags"];

describe("an SDK v2 server over stdio", () => {
  const MARKER = `sdk-v2-marker-${process.pid}-${Date.now()}`;
  const logger = new RecordingLogger();
  let dataDir: string;
  let toolkit: McpToolkit;
  let tools: DynamicStructuredTool[];
  let graph: ToolNodeGraph;

  beforeAll(async () => {
    dataDir = await realpath(await makeTempDir("mcp-sdk-v2-data-"));
    const dir = await makeTempDir("mcp-sdk-v2-stdio-");
    const configPath = await writeConfig(dir, { mcpServers: { v2: { type: "stdio", ...sdkV2StdioLaunch(MARKER), tool_call_timeout: 2 } } });
    toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir });
    tools = await toolkit.getTools();
    graph = toolNodeGraph(tools);
  });
  afterAll(async () => {
    await toolkit?.close();
    expect(await waitUntil(() => pidsWithMarker(MARKER).length === 0)).toBe(true);
  });

  const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");
  const scope = (user: string, thread: string) => ({ context: { user_id: user, thread_id: thread } });
  const call = (name: string, args: Record<string, unknown>, user: string, thread: string) => callThroughGraph(graph, `v2_${name}`, args, scope(user, thread));

  test("discovery lists the v2 tools; the session negotiates our client's latest protocol version", async () => {
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS.map((n) => `v2_${n}`));
    expect(logger.messages("warn")).toEqual([]);
    expect(pidOf(await call("pid", {}, "alice", "t1")).protocolVersion).toBe(LATEST_PROTOCOL_VERSION);
  });

  test("one child per user and thread, reused, working in the thread workspace", async () => {
    const [a1, a2, b1] = (await Promise.all([call("pid", {}, "alice", "t1"), call("pid", {}, "alice", "t2"), call("pid", {}, "bob", "t1")])).map(pidOf);
    expect(new Set([a1.pid, a2.pid, b1.pid]).size).toBe(3);
    expect(pidOf(await call("pid", {}, "alice", "t1")).pid).toBe(a1.pid);
    expect(a1.cwd).toBe(workspaceOf("t1"));
    expect(a2.cwd).toBe(workspaceOf("t2"));
    expect(readlinkSync(`/proc/${b1.pid}/cwd`)).toBe(workspaceOf("t1"));
  });

  test("a file:// resource_link to a file the tool wrote is shown as /mnt/user-data and listed in workspace_changes", async () => {
    const message = await call("report", { name: "r1.txt" }, "alice", "t1");
    expect(message.status).toBe("success");
    expect(readFileSync(path.join(workspaceOf("t1"), "r1.txt"), "utf8")).toBe("report r1.txt\n");
    expect(changes(message)).toEqual(["/mnt/user-data/workspace/r1.txt"]);
    expect(seenByModel(message)).toContain("/mnt/user-data/workspace/r1.txt");
    expect(seenByModel(message)).not.toContain(dataDir);
  });

  test("progress reaches the run's custom stream, in order", async () => {
    const { message, events } = await streamedCall(graph, "v2_progress", { steps: 3, delayMs: 1 }, scope("alice", "t1"));
    expect(message.content).toBe("done 3 steps");
    expect(events.map((e) => [e.type, e.toolCallId, e.server, e.tool, e.progress, e.total, e.message])).toEqual([1, 2, 3].map((n) => ["mcp_progress", "stream-v2_progress", "v2", "progress", n, 3, `step ${n}`]));
  });

  test("tool_call_timeout cancels the call on the server (notifications/cancelled), in one clean line; the child is kept", async () => {
    const before = pidOf(await call("pid", {}, "carol", "t1")).pid;
    expect(cleanErrorLine(await call("slow", { ms: 60_000 }, "carol", "t1"))).toContain("tool_call_timeout");
    const seen = async () => JSON.parse(String((await call("stats", {}, "carol", "t1")).content)) as SdkV2Stats;
    expect(await waitUntil(async () => (await seen()).cancelled === 1)).toBe(true);
    expect(pidOf(await call("pid", {}, "carol", "t1")).pid).toBe(before);
  });

  test("through createAgent: the scripted model's calls land in the user's thread child", async () => {
    const pid = pidOf(await call("pid", {}, "alice", "t2")).pid;
    const model = new ScriptedChatModel([
      ScriptedChatModel.toolCall("v2_pid", {}, "who"),
      ScriptedChatModel.toolCall("v2_report", { name: "agent.txt" }, "write"),
      { content: "done" },
    ]);
    const agent = createAgent({ model, tools, contextSchema: z.object({ user_id: z.string(), thread_id: z.string() }) });
    const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { context: { user_id: "alice", thread_id: "t2" }, configurable: { thread_id: "conv" } });
    const messages = toolMessagesOf(result.messages as BaseMessage[]);
    expect(pidOf(messages.find((m) => m.tool_call_id === "who")!).pid).toBe(pid);
    expect(changes(messages.find((m) => m.tool_call_id === "write")!)).toEqual(["/mnt/user-data/workspace/agent.txt"]);
    expect(existsSync(path.join(workspaceOf("t2"), "agent.txt"))).toBe(true);
  });
});

describe("an SDK v2 server behind v2's own serveStdio entry", () => {
  const MARKER = `sdk-v2-serve-${process.pid}-${Date.now()}`;
  const logger = new RecordingLogger();
  let toolkit: McpToolkit;
  let tools: DynamicStructuredTool[];

  beforeAll(async () => {
    const dataDir = await makeTempDir("mcp-sdk-v2-serve-data-");
    const dir = await makeTempDir("mcp-sdk-v2-serve-");
    const configPath = await writeConfig(dir, {
      mcpServers: {
        v2: { type: "stdio", ...sdkV2StdioLaunch(MARKER, "serve"), tool_call_timeout: 2 },
        modern: { type: "stdio", ...sdkV2StdioLaunch(MARKER, "modern"), session_init_timeout: 10 },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir });
    tools = await toolkit.getTools();
  });
  afterAll(async () => {
    await toolkit?.close();
    expect(await waitUntil(() => pidsWithMarker(MARKER).length === 0)).toBe(true);
  });

  test("its default serves our client (calls, a timeout the server honours); a modern-only one (legacy: 'reject') is skipped with one warning", async () => {
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS.map((n) => `v2_${n}`));
    const warnings = logger.messages("warn");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toBe(
      "Skipping MCP server 'modern' after tool discovery failed: the MCP server 'modern' does not accept this client's MCP protocol " +
        `version ${LATEST_PROTOCOL_VERSION} (it serves 2026-07-28)`,
    );
    const graph = toolNodeGraph(tools);
    const as = { context: { user_id: "hal", thread_id: "t1" } };
    expect(pidOf(await callThroughGraph(graph, "v2_pid", {}, as)).protocolVersion).toBe(LATEST_PROTOCOL_VERSION);
    expect(cleanErrorLine(await callThroughGraph(graph, "v2_slow", { ms: 60_000 }, as))).toContain("tool_call_timeout");
    const cancelled = async () => (JSON.parse(String((await callThroughGraph(graph, "v2_stats", {}, as)).content)) as SdkV2Stats).cancelled;
    expect(await waitUntil(async () => (await cancelled()) === 1)).toBe(true);
  });
});

describe("an SDK v2 server over streamable HTTP", () => {
  const logger = new RecordingLogger();
  let server: SdkV2HttpFixture;
  let toolkit: McpToolkit;
  let tools: DynamicStructuredTool[];
  let graph: ToolNodeGraph;

  beforeAll(async () => {
    server = await startSdkV2HttpServer();
    const dir = await makeTempDir("mcp-sdk-v2-http-");
    const configPath = await writeConfig(dir, {
      mcpServers: {
        v2: { type: "http", url: server.url, headers_from_context: { headers: { "X-User": "user_token" } }, tool_call_timeout: 1, session_init_timeout: 10 },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger, httpSessionIdleSeconds: null });
    tools = await toolkit.getTools();
    graph = toolNodeGraph(tools);
  });
  afterAll(async () => {
    await toolkit?.close();
    await server?.close();
  });

  const as = (user: string) => ({ context: { user_id: user, thread_id: "http", secrets: { user_token: `tok-${user}` } } });
  const call = (name: string, args: Record<string, unknown>, user: string) => callThroughGraph(graph, `v2_${name}`, args, as(user));

  test("discovery lists the v2 tools; sessions negotiate our client's latest protocol version and send it on each request", async () => {
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS.map((n) => `v2_${n}`));
    const alice = pidOf(await call("pid", {}, "alice"));
    expect(alice.protocolVersion).toBe(LATEST_PROTOCOL_VERSION);
    const later = server.requests.filter((r) => r.sessionId === alice.sessionId && r.method === "POST");
    expect(later.length).toBeGreaterThan(0);
    for (const request of later) expect(request.headers["mcp-protocol-version"]).toBe(LATEST_PROTOCOL_VERSION);
  });

  test("each user's header set gets its own session, reused across calls; the token never reaches the model or the logs", async () => {
    const [alice, bob] = (await Promise.all([call("pid", {}, "alice"), call("pid", {}, "bob")])).map(pidOf);
    expect(alice.sessionId).not.toBeNull();
    expect(bob.sessionId).not.toBe(alice.sessionId);
    expect(alice.userTag).not.toBe(bob.userTag);
    const initialized = server.initializeCount();
    expect(pidOf(await call("pid", {}, "alice"))).toEqual(alice);
    expect(pidOf(await call("pid", {}, "bob"))).toEqual(bob);
    expect(server.initializeCount()).toBe(initialized);
    expect(logger.messages().join("\n")).not.toContain("tok-");
  });

  test("structuredContent passes through as the artifact", async () => {
    const message = await call("forecast", { city: "Oslo" }, "alice");
    expect(message.status).toBe("success");
    expect((message.artifact as { structuredContent?: unknown }).structuredContent).toEqual({ city: "Oslo", celsius: 21.5 });
  });

  test("an array output (SEP-2106) arrives wrapped as { result } under the wrapped schema it listed: checked, passed through, shown as its JSON", async () => {
    const message = await call("tags", {}, "alice");
    expect(message.status).toBe("success");
    expect(message.content).toBe('["north","coast"]');
    expect((message.artifact as { structuredContent?: unknown }).structuredContent).toEqual({ result: ["north", "coast"] });
  });

  test("a result the listed outputSchema refuses is one clean line naming where; the v2 server's own refusal is one line too", async () => {
    expect(cleanErrorLine(await call("loose_forecast", { city: "Oslo" }, "alice"))).toBe(
      "MCP tool 'loose_forecast' on server 'v2' failed: its structuredContent does not match its output schema (data/celsius must be number)",
    );
    const refused = cleanErrorLine(await call("forecast", { city: "Oslo", broken: true }, "alice"));
    expect(refused).toMatch(/^Output validation error: Invalid structured content for tool forecast/);
  });

  test("progress reaches the run's custom stream and restarts tool_call_timeout (1 s): a 1.5 s call reporting every 0.25 s succeeds", async () => {
    const { message, events } = await streamedCall(graph, "v2_progress", { steps: 6, delayMs: 250 }, as("alice"));
    expect(message.content).toBe("done 6 steps");
    expect(events.map((e) => e.progress)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  test("tool_call_timeout sends notifications/cancelled, which the v2 server honours; the session is kept", async () => {
    const before = pidOf(await call("pid", {}, "bob"));
    const cancelledBefore = server.stats.cancelled;
    expect(cleanErrorLine(await call("slow", { ms: 60_000 }, "bob"))).toContain("tool_call_timeout");
    const cancel = await server.waitForRequest((r) => r.sessionId === before.sessionId && (r.rpcMethods ?? []).includes("notifications/cancelled"));
    await server.responseClosed(cancel);
    expect(await waitUntil(() => server.stats.cancelled === cancelledBefore + 1)).toBe(true);
    expect(pidOf(await call("pid", {}, "bob")).sessionId).toBe(before.sessionId);
  });

  test.each([
    ["HTTP 400 (the router of the v2 SDK's simpleStreamableHttp example)", "example" as const],
    ["HTTP 404 (the router of the v2 SDK's sessionRecoveryTestServer example)", "404" as const],
  ])("forgotten sessions, answered %s: discovery re-initializes transparently; the next call gets our one clean line, not sent again; the one after works", async (_answer, unknownSession) => {
    server.answerUnknownSessions(unknownSession);
    const target = { serverName: "v2", server: McpServerSchema.parse({ type: "http", url: server.url, session_init_timeout: 10 }), headers: async () => ({}), secrets: [] };
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    try {
      const [listed, before] = await Promise.all([discoverServer(target, pool), call("pid", {}, "alice").then(pidOf)]);
      expect(listed.map((t) => t.definition.name).sort()).toEqual(TOOLS);
      await server.forgetSessions({ streams: "kept" });
      const echoes = server.stats.calls.filter((c) => c === "echo").length;
      const first = await call("echo", { message: "after-restart" }, "alice");
      expect(cleanErrorLine(first)).toBe(EXPIRED(unknownSession === "404" ? "HTTP 404" : "HTTP 400"));
      expect(server.stats.calls.filter((c) => c === "echo").length).toBe(echoes);
      const [again, relisted] = await Promise.all([call("echo", { message: "again" }, "alice"), discoverServer(target, pool)]);
      expect(again.content).toBe("Echo: again");
      expect(relisted.map((t) => t.definition.name).sort()).toEqual(TOOLS);
      expect(pidOf(await call("pid", {}, "alice")).sessionId).not.toBe(before.sessionId);
    } finally {
      await pool.close();
    }
  });

  test("a restart between calls (connections cut, sessions gone): the next call gets one clean line, not sent again; the one after works", async () => {
    // The example router's 400 on a forgotten id: the event stream the client reopens after the restart does not end the
    // session (only a 404 there does, about a second later), so the next call meets the refusal whenever it comes.
    server.answerUnknownSessions("example");
    const before = pidOf(await call("pid", {}, "dave"));
    await server.restart();
    const echoes = server.stats.calls.filter((c) => c === "echo").length;
    expect(cleanErrorLine(await call("echo", { message: "x" }, "dave"))).toMatch(/^MCP tool 'echo' on server 'v2' failed: .*The call was not sent again; a new session serves the next call\.$/);
    expect(server.stats.calls.filter((c) => c === "echo").length).toBe(echoes);
    expect((await call("echo", { message: "back" }, "dave")).content).toBe("Echo: back");
    expect(pidOf(await call("pid", {}, "dave")).sessionId).not.toBe(before.sessionId);
  });
});

describe("an SDK v2 server with an event store", () => {
  const logger = new RecordingLogger();
  let server: SdkV2HttpFixture;
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;

  beforeAll(async () => {
    server = await startSdkV2HttpServer({ resumable: true });
    const dir = await makeTempDir("mcp-sdk-v2-resume-");
    const configPath = await writeConfig(dir, { mcpServers: { v2: { type: "http", url: server.url, tool_call_timeout: 30 } } });
    toolkit = createMcpToolkit({ configPath, env: {}, logger, httpSessionIdleSeconds: null });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit?.close();
    await server?.close();
  });

  test("the call in flight gets one clean line at once (not after tool_call_timeout), not sent again; the next call works", async () => {
    const running = callThroughGraph(graph, "v2_slow", { ms: 60_000 }, { context: { user_id: "erin", thread_id: "http" } });
    await server.waitForRequest((r) => (r.body as { params?: { name?: string } } | undefined)?.params?.name === "slow");
    await server.restart();
    const message = await running;
    expect(cleanErrorLine(message)).toMatch(/^MCP tool 'slow' on server 'v2' failed: .*not sent again/);
    expect(server.stats.calls.filter((c) => c === "slow")).toHaveLength(1);
    expect((await callThroughGraph(graph, "v2_echo", { message: "back" }, { context: { user_id: "erin", thread_id: "http" } })).content).toBe("Echo: back");
  });

  test("forgotten sessions: the event stream the client opens again is refused (400 as text), then the call gets our one clean line; the next call works", async () => {
    const as = { context: { user_id: "frank", thread_id: "http" } };
    expect((await callThroughGraph(graph, "v2_echo", { message: "one" }, as)).content).toBe("Echo: one");
    await server.forgetSessions();
    const mark = server.requests.length;
    const reopened = await server.waitForRequest((r) => server.requests.indexOf(r) >= mark && r.method === "GET");
    await server.responseClosed(reopened);
    expect(cleanErrorLine(await callThroughGraph(graph, "v2_echo", { message: "two" }, as))).toBe(EXPIRED("HTTP 400"));
    expect((await callThroughGraph(graph, "v2_echo", { message: "three" }, as)).content).toBe("Echo: three");
    expect(logger.messages("warn")).toEqual([]);
    expect(logger.messages("error")).toEqual([]);
  });
});

describe("an SDK v2 server behind v2's own createMcpHandler", () => {
  test("its default (2025-era clients served statelessly): discovery, calls, progress, structuredContent, and a timeout the server honours", async () => {
    const server = await startSdkV2HandlerServer("stateless");
    const dir = await makeTempDir("mcp-sdk-v2-handler-");
    const configPath = await writeConfig(dir, { mcpServers: { v2: { type: "http", url: server.url, tool_call_timeout: 1 } } });
    const logger = new RecordingLogger();
    const toolkit = createMcpToolkit({ configPath, env: {}, logger, httpSessionIdleSeconds: null });
    try {
      const tools = await toolkit.getTools();
      expect(tools.map((t) => t.name).sort()).toEqual(TOOLS.map((n) => `v2_${n}`));
      const graph = toolNodeGraph(tools);
      const as = { context: { user_id: "gina", thread_id: "http" } };
      expect(pidOf(await callThroughGraph(graph, "v2_pid", {}, as)).sessionId).toBeNull();
      const { message, events } = await streamedCall(graph, "v2_progress", { steps: 2, delayMs: 1 }, as);
      expect([message.content, events.map((e) => e.progress)]).toEqual(["done 2 steps", [1, 2]]);
      expect((await callThroughGraph(graph, "v2_forecast", { city: "Oslo" }, as)).artifact).toEqual({ structuredContent: { city: "Oslo", celsius: 21.5 } });
      expect(cleanErrorLine(await callThroughGraph(graph, "v2_slow", { ms: 60_000 }, as))).toContain("tool_call_timeout");
      expect(await waitUntil(() => server.stats.cancelled === 1)).toBe(true);
      expect(logger.messages("warn")).toEqual([]);
    } finally {
      await toolkit.close();
      await server.close();
    }
  });

  test("a modern-only endpoint (legacy: 'reject') is skipped at discovery with one warning naming the versions it serves", async () => {
    const server = await startSdkV2HandlerServer("reject");
    const dir = await makeTempDir("mcp-sdk-v2-modern-");
    const configPath = await writeConfig(dir, { mcpServers: { v2: { type: "http", url: server.url } } });
    const logger = new RecordingLogger();
    const toolkit = createMcpToolkit({ configPath, env: {}, logger, httpSessionIdleSeconds: null });
    try {
      expect(await toolkit.getTools()).toEqual([]);
      const warnings = logger.messages("warn");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toBe(
        "Skipping MCP server 'v2' after tool discovery failed: the MCP server 'v2' does not accept this client's MCP protocol " +
          `version ${LATEST_PROTOCOL_VERSION} (it serves 2026-07-28)`,
      );
    } finally {
      await toolkit.close();
      await server.close();
    }
  });
});
