/**
 * A real third-party streamable HTTP server, @cyanheads/git-mcp-server (its own Hono transport, not the SDK's example
 * wiring), in its JWT auth mode, plugged in as a user would: a static service token from the environment for
 * discovery, and each user's token from the run's `context.secrets` (`headers_from_context`). The server keys its
 * per-user state (the working folder) by the token's tenant claim, so what a call did shows in the next one. A
 * recording proxy in front of it tells which session each request used. Driven through createAgent and ToolNode with
 * the scripted model; SPEC §4 credentials, §5.2 sessions.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { execFileSync } from "node:child_process";
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import * as path from "node:path";
import { HumanMessage, type BaseMessage, type ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createAgent } from "langchain";
import { z } from "zod";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { discoverServer } from "../../lib/mcp/discovery";
import { SessionPool } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { killAllListening, startListening, type ListeningProcess } from "../fixtures/gateway-process";
import { callThroughGraph, cleanErrorLine, seenByModel, toolMessagesOf, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startProxy, type Proxy } from "../fixtures/proxy";
import { echoForms } from "../fixtures/tools";
import { waitUntil } from "../fixtures/processes";

const SERVER = require.resolve("@cyanheads/git-mcp-server/index.js");
/** Moves the server's `Date.now()` a day ahead on SIGUSR2: past its session idle expiry, without waiting for it. */
const CLOCK = path.join(__dirname, "..", "fixtures", "server-clock.mjs");
const LISTENING = "HTTP transport listening at";

/** The server's HS256 signing key (its own secret): the tokens below are signed with it. */
const SERVER_KEY = "git-mcp-server-test-signing-key-0123456789";

/** An `Authorization` value the server takes: a JWT naming the client (and tenant) `clientId`, with both git scopes. */
function bearer(clientId: string, key = SERVER_KEY): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const signed = `${part({ alg: "HS256", typ: "JWT" })}.${part({ cid: clientId, tid: clientId, scope: "tool:git:read tool:git:write" })}`;
  return `Bearer ${signed}.${createHmac("sha256", key).update(signed).digest("base64url")}`;
}

const NO_WORKING_DIR = "Error: No session working directory set. Please specify a 'path' or use 'git_set_working_dir' first.";

const expiredLine = (tool: string) =>
  `MCP tool '${tool}' on server 'git' failed: the server no longer knows this MCP session (HTTP 404: it expired or the ` +
  "server restarted). The call was not sent again; a new session serves the next call.";

const RunContext = z.object({ user_id: z.string(), thread_id: z.string(), secrets: z.record(z.string(), z.string()) });

describe("git-mcp-server over streamable HTTP, JWT per user", () => {
  const logger = new RecordingLogger();
  let repo: string;
  let otherRepo: string;
  let configPath: string;
  let hungConfigPath: string;
  let port: number;
  let server: ListeningProcess;
  let proxy: Proxy;
  let toolkit: McpToolkit;
  let tools: DynamicStructuredTool[];
  let graph: ToolNodeGraph;

  function start(onPort: number): Promise<ListeningProcess> {
    return startListening(["--import", CLOCK, SERVER], LISTENING, {
      ...process.env,
      MCP_TRANSPORT_TYPE: "http",
      MCP_HTTP_HOST: "127.0.0.1",
      MCP_HTTP_PORT: String(onPort),
      // A taken port is an error, not a silent move to the next one.
      MCP_HTTP_MAX_PORT_RETRIES: "0",
      // The line it listens by is logged at info, as JSON on stderr in production (development pretty-prints it on
      // stdout, and the "test" that jest sets silences it).
      MCP_LOG_LEVEL: "info",
      NODE_ENV: "production",
      MCP_AUTH_MODE: "jwt",
      MCP_AUTH_SECRET_KEY: SERVER_KEY,
      MCP_STATEFUL_SESSION_STALE_TIMEOUT_MS: String(60 * 60 * 1000),
    });
  }

  function gitRepo(dir: string, branch: string): string {
    execFileSync("git", ["init", "-q", "-b", branch, dir]);
    writeFileSync(path.join(dir, "README.md"), `${branch}\n`);
    execFileSync("git", ["-C", dir, "add", "README.md"]);
    execFileSync("git", ["-C", dir, "-c", "user.name=T", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "first"]);
    return dir;
  }

  beforeAll(async () => {
    const dir = await makeTempDir("mcp-git-http-");
    repo = gitRepo(path.join(dir, "repo"), "main");
    otherRepo = gitRepo(path.join(dir, "other"), "other");
    server = await start(0);
    port = Number(/127\.0\.0\.1:(\d+)\/mcp/.exec(server.output())![1]);
    // The server logs each session it creates only for its first ten or so (its logger then falls silent): the
    // sessions are counted from the requests, which carry their session's id once it has one.
    proxy = await startProxy(`http://127.0.0.1:${port}`);
    const auth = { headers: { Authorization: "$GIT_SERVICE_TOKEN" }, headers_from_context: { headers: { Authorization: "git_token" } } };
    const hung = { type: "http", url: proxy.url("/mcp"), ...auth, tool_call_timeout: 3, session_init_timeout: 3 };
    configPath = await writeConfig(dir, {
      mcpServers: {
        git: { type: "http", url: proxy.url("/mcp"), ...auth, tool_call_timeout: 10, session_init_timeout: 10 },
        // Short bounds for the hung-server test (room for a loaded machine all the same).
        hung,
        // Without the proxy: what a user sees when nothing listens at the server's address.
        direct: { type: "http", url: `http://127.0.0.1:${port}/mcp`, ...auth, tool_call_timeout: 10, session_init_timeout: 10 },
      },
    });
    hungConfigPath = await writeConfig(dir, { mcpServers: { hung } }, "hung.json");
    toolkit = createMcpToolkit({ configPath, env: { GIT_SERVICE_TOKEN: bearer("service") }, logger, httpSessionIdleSeconds: null });
    tools = await toolkit.getTools();
    graph = toolNodeGraph(tools);
  });
  afterAll(async () => {
    // Also after a failed beforeAll, so that no server outlives the file (a stopped one included: SIGKILL ends it).
    await toolkit?.close();
    await proxy?.close();
    await killAllListening();
  });

  /** Every ToolMessage the runs of this file gave the model, for the leak scan at the end. */
  const shown: ToolMessage[] = [];
  const through = async (name: string, args: Record<string, unknown>, options: Record<string, unknown>) => {
    const message = await callThroughGraph(graph, name, args, options);
    shown.push(message);
    return message;
  };
  const as = (user: string, thread = "t") => ({ context: { user_id: user, thread_id: thread, secrets: { git_token: bearer(user) } } });
  const call = (tool: string, args: Record<string, unknown>, user: string, server = "git", thread?: string) =>
    through(`${server}_${tool}`, args, as(user, thread));
  const status = (user: string, server = "git", thread?: string) => call("git_status", { path: repo }, user, server, thread);
  const onBranch = (branch: string, message: ToolMessage) => {
    expect([message.status, String(message.content)]).toEqual(["success", expect.stringContaining(`"currentBranch": "${branch}"`)]);
  };
  const succeeded = (message: ToolMessage) => onBranch("main", message);

  /** The requests sent with `user`'s token through the proxy. */
  const sentBy = (user: string) => proxy.requests.filter((r) => r.headers.authorization === bearer(user));
  /** The MCP sessions `user`'s token used: every request after a session's initialize carries its id. */
  const sessionsOf = (user: string) => [...new Set(sentBy(user).flatMap((r) => r.headers["mcp-session-id"] ?? []))];
  /** The tool calls sent with `user`'s token, each with the session it was sent on. */
  const callsOf = (user: string) =>
    sentBy(user)
      .filter((r) => r.rpcMethod === "tools/call")
      .map((r) => ({ tool: (r.params as { name: string }).name, args: (r.params as { arguments: unknown }).arguments, session: r.headers["mcp-session-id"] }));

  test("discovery lists the git tools with the service token, each prefixed", () => {
    const names = tools.filter((t) => t.name.startsWith("git_")).map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(["git_git_status", "git_git_set_working_dir", "git_git_log", "git_git_commit"]));
    expect(toolkit.discoveryFailures.size).toBe(0);
    // One discovery session per server entry behind the proxy.
    expect(sessionsOf("service")).toHaveLength(2);
  });

  test("each user's token gets one session of its own, kept across calls, runs and threads; concurrent first calls share it", async () => {
    const model = new ScriptedChatModel([
      ScriptedChatModel.toolCall("git_git_set_working_dir", { path: repo }, "cd"),
      ScriptedChatModel.toolCall("git_git_status", {}, "status"),
      { content: "done" },
    ]);
    const agent = createAgent({ model, tools, contextSchema: RunContext });
    const result = await agent.invoke({ messages: [new HumanMessage("what is the state of my repo?")] }, { ...as("alice", "t1"), configurable: { thread_id: "conv-alice" } });
    const [cd, state] = toolMessagesOf(result.messages as BaseMessage[]);
    shown.push(cd, state);
    expect(cd.status).toBe("success");
    succeeded(state);
    // The working folder is the token's tenant's: bob's token, on its own session, has none, and the server says so.
    expect(cleanErrorLine(await call("git_status", {}, "bob"))).toBe(NO_WORKING_DIR);
    const [first, second] = await Promise.all([status("carol"), status("carol")]);
    succeeded(first);
    succeeded(second);
    succeeded(await status("alice", "git", "t2"));
    succeeded(await status("bob", "git", "t3"));

    for (const user of ["alice", "bob", "carol"]) {
      const sessions = sessionsOf(user);
      expect(sessions).toHaveLength(1);
      expect(new Set(callsOf(user).map((c) => c.session))).toEqual(new Set(sessions));
    }
    expect(callsOf("alice").map((c) => c.tool)).toEqual(["git_set_working_dir", "git_status", "git_status"]);
    expect(sessionsOf("service")).toHaveLength(2);
  });

  test("a token the server refuses (401) is one clean line; no form of it, nor of the server's key, reaches a message or a log", async () => {
    const forged = bearer("mallory", "a-key-that-is-not-the-servers-0123456789");
    const basic = `Basic ${Buffer.from("trudy:trudy-pa55word").toString("base64")}`;
    const refused = async (user: string, value: string) => {
      const message = await through("git_git_status", { path: repo }, { context: { user_id: user, thread_id: "t", secrets: { git_token: value } } });
      return { message, line: cleanErrorLine(message) };
    };
    const mallory = await refused("mallory", forged);
    expect(mallory.line).toBe(
      "MCP tool 'git_status' on server 'git' failed: Streamable HTTP error: Error POSTing to endpoint (HTTP 401): " +
        '{"jsonrpc":"2.0","error":{"code":-32006,"message":"Token verification failed."},"id":0}',
    );
    const trudy = await refused("trudy", basic);
    expect(trudy.line).toBe(
      "MCP tool 'git_status' on server 'git' failed: Streamable HTTP error: Error POSTing to endpoint (HTTP 401): " +
        '{"jsonrpc":"2.0","error":{"code":-32006,"message":"Missing or invalid Authorization header. Bearer scheme required."},"id":0}',
    );
    const shown = [seenByModel(mallory.message), seenByModel(trudy.message), ...logger.messages()].join("\n");
    for (const secret of [forged, forged.slice("Bearer ".length), basic, "trudy-pa55word", SERVER_KEY, bearer("alice").slice("Bearer ".length)]) {
      for (const form of echoForms(secret)) expect(shown).not.toContain(form);
    }
    // A user without the secret is refused before anything is sent, naming the key; the others keep working.
    const sent = proxy.requests.length;
    const nobody = await through("git_git_status", { path: repo }, { context: { user_id: "nobody", thread_id: "t" } });
    expect(cleanErrorLine(nobody)).toContain("git_token");
    expect(proxy.requests).toHaveLength(sent);
    succeeded(await status("alice"));
  });

  test("the server's idle expiry (its clock moved past MCP_STATEFUL_SESSION_STALE_TIMEOUT_MS) acts as a restart: one clean error, not run; the next call works", async () => {
    expect((await call("git_set_working_dir", { path: repo }, "dora")).status).toBe("success");
    const from = server.output().length;
    server.child.kill("SIGUSR2");
    await server.printed("clock advanced", from);

    expect(cleanErrorLine(await call("git_set_working_dir", { path: otherRepo }, "dora"))).toBe(expiredLine("git_set_working_dir"));
    // The server kept dora's working folder (it did not restart): still the first one, so the call was not run.
    onBranch("main", await call("git_status", {}, "dora"));
    expect(callsOf("dora").filter((c) => (c.args as { path?: string }).path === otherRepo)).toHaveLength(1);
    expect(sessionsOf("dora")).toHaveLength(2);
    expect((await call("git_set_working_dir", { path: otherRepo }, "dora")).status).toBe("success");
    onBranch("other", await call("git_status", {}, "dora"));
  });

  test("a hung server (SIGSTOP): session_init_timeout bounds discovery and a new session's start, tool_call_timeout a call on a live one", async () => {
    succeeded(await status("erin", "hung"));
    server.child.kill("SIGSTOP");
    const fresh = createMcpToolkit({ configPath: hungConfigPath, env: { GIT_SERVICE_TOKEN: bearer("service") }, logger, httpSessionIdleSeconds: null });
    try {
      const [live, starting, listed] = await Promise.all([status("erin", "hung"), status("fred", "hung"), fresh.getTools()]);
      expect(cleanErrorLine(live)).toBe("MCP tool 'git_status' on server 'hung' failed: timed out after 3.0s without a result or progress (tool_call_timeout)");
      expect(cleanErrorLine(starting)).toBe("MCP tool 'git_status' on server 'hung' was not called: its MCP session did not start within 3.0s (session_init_timeout)");
      expect(listed).toEqual([]);
      expect(fresh.discoveryFailures.get("hung")).toBe("Skipping MCP server 'hung' after tool discovery timed out (3.0s)");
    } finally {
      server.child.kill("SIGCONT");
      await fresh.close();
    }
    // Once the server runs again, the kept session serves the user's next call.
    succeeded(await status("erin", "hung"));
    expect(sessionsOf("erin")).toHaveLength(1);
  });

  test("a restart between calls: the call gets one clean error and is not run again; discovery re-initializes once, transparently; the next call works", async () => {
    const definition = McpServerSchema.parse({ type: "http", url: proxy.url("/mcp"), session_init_timeout: 10 });
    const pool = new SessionPool(logger, { httpIdleMs: null });
    const target = { serverName: "git", server: definition, headers: async () => ({ Authorization: bearer("service") }), secrets: [] };
    try {
      const [listed, warm] = await Promise.all([discoverServer(target, pool), call("git_set_working_dir", { path: repo }, "gus")]);
      expect(listed.map((t) => t.definition.name)).toContain("git_status");
      expect(warm.status).toBe("success");
      const [before] = sessionsOf("gus");
      await server.kill();
      server = await start(port);

      expect(cleanErrorLine(await call("git_set_working_dir", { path: otherRepo }, "gus"))).toBe(expiredLine("git_set_working_dir"));
      const relisted = await discoverServer(target, pool);
      expect(relisted.map((t) => t.definition.name)).toEqual(listed.map((t) => t.definition.name));
      expect(pool.size()).toBe(1);
      // The restarted server never ran the lost call: gus has no working folder there until he sets one.
      expect(cleanErrorLine(await call("git_status", {}, "gus"))).toBe(NO_WORKING_DIR);
      expect(callsOf("gus").filter((c) => (c.args as { path?: string }).path === otherRepo)).toEqual([{ tool: "git_set_working_dir", args: { path: otherRepo }, session: before }]);
      expect((await call("git_set_working_dir", { path: repo }, "gus")).status).toBe("success");
      succeeded(await call("git_status", {}, "gus"));
      expect(sessionsOf("gus")).toEqual([before, expect.not.stringMatching(before)]);
      expect((await toolkit.getTools()).map((t) => t.name)).toEqual(tools.map((t) => t.name));
    } finally {
      await pool.close();
    }
  });

  test("a crash during a call: that call gets one clean error and is not run; after the restart the next call works on a new session", async () => {
    expect((await call("git_set_working_dir", { path: repo }, "jack")).status).toBe("success");
    const [before] = sessionsOf("jack");
    // Stopped first, so the call is on its way (the proxy has it) but never run when the server dies.
    server.child.kill("SIGSTOP");
    const running = call("git_set_working_dir", { path: otherRepo }, "jack");
    await waitUntil(() => callsOf("jack").length === 2);
    await server.kill();
    expect(cleanErrorLine(await running)).toBe(
      "MCP tool 'git_set_working_dir' on server 'git' failed: the server closed the connection before it answered (it " +
        "restarted or dropped the call). The call was not sent again; a new session serves the next call.",
    );
    server = await start(port);
    expect(cleanErrorLine(await call("git_status", {}, "jack"))).toBe(NO_WORKING_DIR);
    expect(callsOf("jack").filter((c) => (c.args as { path?: string }).path === otherRepo)).toHaveLength(1);
    expect(sessionsOf("jack")).toEqual([before, expect.not.stringMatching(before)]);
  });

  test("the server down (connection refused): one clean line at call time and at discovery; once it is back, the next call works at once", async () => {
    succeeded(await status("hank", "direct"));
    await server.kill();
    // On the user's live session, and for a user whose session would start now. (A kept-alive connection the client has
    // not yet seen closed says so instead: the same line as a crash during a call, or fetch's "other side closed".)
    const refused = String.raw`fetch failed \((connect ECONNREFUSED 127\.0\.0\.1:\d+|other side closed)\)`;
    const dropped = String.raw`the server closed the connection before it answered \(it restarted or dropped the call\)\. .*`;
    const refusedLine = new RegExp(`^MCP tool 'git_status' on server 'direct' failed: (${refused}|${dropped})$`);
    expect(cleanErrorLine(await status("hank", "direct"))).toMatch(refusedLine);
    expect(cleanErrorLine(await status("ivy", "direct"))).toMatch(refusedLine);
    const fresh = createMcpToolkit({ configPath, env: { GIT_SERVICE_TOKEN: bearer("service") }, logger, httpSessionIdleSeconds: null });
    try {
      expect(await fresh.getTools()).toEqual([]);
      expect(fresh.discoveryFailures.get("direct")).toMatch(new RegExp(`^Skipping MCP server 'direct' after tool discovery failed: ${refused}$`));
      // Behind the proxy, which cuts the connection: a line of the same kind.
      for (const reason of fresh.discoveryFailures.values()) expect(reason).toMatch(/^Skipping MCP server '\w+' after tool discovery failed: fetch failed \([^\n]+\)$/);
    } finally {
      await fresh.close();
    }

    server = await start(port);
    // The refused call dropped the session: the server's restart costs the user no second failed call.
    succeeded(await status("hank", "direct"));
    succeeded(await status("ivy", "direct"));
  });

  test("no token (the users', the service's), nor the server's key, in any form, in any ToolMessage or log line of the runs above", () => {
    const users = ["service", "alice", "bob", "carol", "dora", "erin", "fred", "gus", "hank", "ivy", "jack"];
    const everything = [...shown.map(seenByModel), ...logger.messages()].join("\n");
    expect(shown.length).toBeGreaterThan(30);
    for (const secret of [SERVER_KEY, ...users.flatMap((user) => [bearer(user), bearer(user).slice("Bearer ".length)])]) {
      for (const form of echoForms(secret)) expect(everything).not.toContain(form);
    }
  });
});
