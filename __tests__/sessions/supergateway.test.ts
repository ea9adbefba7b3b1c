/**
 * supergateway (the common way to put a stdio MCP server on the network) in front of a plain SDK stdio server, plugged
 * in as its users would: `type: "http"` on its stateful and stateless streamable HTTP outputs, `type: "sse"` on its SSE
 * output. Driven through ToolNode with per-user headers; SPEC §2 call path, §5.2 sessions.
 *
 * supergateway does not pass a request's headers on to the stdio server: per-user headers show as per-user sessions
 * (in stateful mode one stdio child per session, so a tool returning its pid tells whose session served a call).
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { ToolMessage } from "@langchain/core/messages";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { discoverServer } from "../../lib/mcp/discovery";
import { isGatewayProcessFailed, SessionPool } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { killAllListening, startListening, startOnPort, type ListeningProcess } from "../fixtures/gateway-process";
import { callThroughGraph, runningCall, toolNodeGraph, type ToolNodeGraph, cleanErrorLine, streamedCall } from "../fixtures/graph";

const GATEWAY = require.resolve("supergateway/dist/index.js");
const SERVER = path.join(__dirname, "..", "fixtures", "plain-stdio-server.mjs");

const pidOf = (message: ToolMessage): number => {
  expect(message.status).toBe("success");
  return (JSON.parse(String(message.content)) as { pid: number }).pid;
};

interface Gateway {
  port: number;
  process: ListeningProcess;
}

describe("supergateway in front of a stdio server", () => {
  const logger = new RecordingLogger();
  let dir: string;
  let callLog: string;
  let stateful: Gateway;
  let stateless: Gateway;
  let sse: Gateway;
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;

  const gatewayArgs = (port: number, output: string[]) => [
    GATEWAY,
    "--stdio",
    `${JSON.stringify(process.execPath)} ${JSON.stringify(SERVER)}`,
    "--port",
    String(port),
    ...output,
  ];
  /** On `port` (a restart's), else on a free port. */
  function startGateway(output: string[], port?: number): Promise<Gateway> {
    const env = { ...process.env, PLAIN_CALL_LOG: callLog };
    return startOnPort(async (p) => ({ port: p, process: await startListening(gatewayArgs(p, output), `Listening on port ${p}`, env) }), port);
  }
  const STATEFUL = ["--outputTransport", "streamableHttp", "--stateful"];
  async function restart(gateway: Gateway, output: string[]): Promise<Gateway> {
    await gateway.process.kill();
    return startGateway(output, gateway.port);
  }
  /** The tool calls the stdio servers started, in order (`<pid> <tool>`). */
  const callsIn = (): string[] => readFileSync(callLog, "utf8").split("\n").filter((line) => line.length > 0);

  beforeAll(async () => {
    dir = await makeTempDir("mcp-supergateway-");
    callLog = path.join(dir, "calls.log");
    writeFileSync(callLog, "");
    [stateful, stateless, sse] = await Promise.all([
      startGateway(STATEFUL),
      startGateway(["--outputTransport", "streamableHttp"]),
      startGateway(["--outputTransport", "sse"]),
    ]);
    const [p1, p2, p3] = [stateful.port, stateless.port, sse.port];
    const perUser = { headers_from_context: { headers: { "X-User": "user_token" } } };
    const configPath = await writeConfig(dir, {
      mcpServers: {
        sg: { type: "http", url: `http://127.0.0.1:${p1}/mcp`, ...perUser, tool_call_timeout: 3, session_init_timeout: 10 },
        sglong: { type: "http", url: `http://127.0.0.1:${p1}/mcp`, ...perUser, tool_call_timeout: 30 },
        sgless: { type: "http", url: `http://127.0.0.1:${p2}/mcp`, ...perUser, tool_call_timeout: 10 },
        sgsse: { type: "sse", url: `http://127.0.0.1:${p3}/sse`, ...perUser, tool_call_timeout: 10 },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger, httpSessionIdleSeconds: null });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    // Also after a failed beforeAll: the gateways that did start are killed, so none outlives the file.
    await toolkit?.close();
    await killAllListening();
  });

  const as = (user: string) => ({ context: { user_id: user, thread_id: "t", secrets: { user_token: `tok-${user}` } } });
  const call = (tool: string, args: Record<string, unknown>, user: string) => callThroughGraph(graph, tool, args, as(user));

  test("the toolkit lists the stdio server's tools through each of the three outputs", async () => {
    const names = (await toolkit.getTools()).map((t) => t.name);
    for (const prefix of ["sg", "sgless", "sgsse"]) expect(names).toContain(`${prefix}_whoami`);
  });

  test("stateful: each user's headers get their own session (their own stdio child), kept across calls", async () => {
    const [alice, bob] = await Promise.all([call("sg_whoami", {}, "alice").then(pidOf), call("sg_whoami", {}, "bob").then(pidOf)]);
    expect(alice).not.toBe(bob);
    expect((await call("sg_echo", { message: "hi" }, "alice")).content).toBe("Echo: hi");
    expect(pidOf(await call("sg_whoami", {}, "alice"))).toBe(alice);
    expect(pidOf(await call("sg_whoami", {}, "bob"))).toBe(bob);
    expect(logger.messages().join("\n")).not.toMatch(/tok-/);
  });

  test("stateless and SSE outputs answer calls", async () => {
    expect((await call("sgless_echo", { message: "a" }, "alice")).content).toBe("Echo: a");
    expect((await call("sgsse_echo", { message: "b" }, "alice")).content).toBe("Echo: b");
  });

  test("progress reaches the run's custom stream through the stateful, stateless and SSE outputs", async () => {
    for (const prefix of ["sg", "sgless", "sgsse"]) {
      const { message: last, events } = await streamedCall(graph, `${prefix}_progress`, { steps: 3, delayMs: 5 }, as("alice"));
      expect(last.content).toBe("done 3 steps");
      expect(events.map((e) => [e.progress, e.total, e.message])).toEqual([
        [1, 3, "step 1"],
        [2, 3, "step 2"],
        [3, 3, "step 3"],
      ]);
    }
  });

  test("errors: an isError result, a thrown error and tool_call_timeout are one clean line each and keep the session", async () => {
    const before = pidOf(await call("sg_whoami", {}, "bob"));
    expect(cleanErrorLine(await call("sg_fail", { reason: "quota" }, "bob"))).toBe("Refused: quota");
    expect(cleanErrorLine(await call("sg_crash", {}, "bob"))).toContain("kaboom");
    expect(cleanErrorLine(await call("sg_sleep", { ms: 8000 }, "bob"))).toContain("tool_call_timeout");
    expect(pidOf(await call("sg_whoami", {}, "bob"))).toBe(before);
  });

  // supergateway answers the calls in flight with -32603 "MCP server process failed" and drops the session: the
  // next call must not meet the dropped session's 404 first (a second error for one crash).
  test("the stdio server exits during a call: one clean line, not sent again; the next call runs on a new session and child", async () => {
    const before = pidOf(await call("sg_whoami", {}, "erin"));
    // As the expired, lost-call and closed-connection lines: what happened, and that the call was not sent again.
    expect(cleanErrorLine(await call("sg_exit", {}, "erin"))).toBe(
      "MCP tool 'exit' on server 'sg' failed: the server's process failed during the call (its gateway answered \"MCP server " +
        "process failed\" and dropped the session). The call was not sent again; a new session serves the next call.",
    );
    const after = pidOf(await call("sg_whoami", {}, "erin"));
    expect(after).not.toBe(before);
    expect(callsIn().filter((line) => line.endsWith(" exit"))).toEqual([`${before} exit`]);
  });

  // supergateway answers a session id it does not hold with the MCP spec's 404 {"code":-32001,"message":"Session not found"}.
  test("stateful, restarted during one user's call and between another's: one clean error each, not sent again; the next calls work; discovery re-initializes once", async () => {
    const server = McpServerSchema.parse({ type: "http", url: `http://127.0.0.1:${stateful.port}/mcp`, session_init_timeout: 10 });
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    const target = { serverName: "sg", server, headers: async () => ({}), secrets: [] };
    try {
      const [listed, before] = await Promise.all([discoverServer(target, pool), call("sg_whoami", {}, "alice").then(pidOf)]);
      expect(listed.map((t) => t.definition.name)).toContain("whoami");
      await call("sglong_whoami", {}, "dave");
      const running = await runningCall(graph, "sglong_progress", { steps: 400, delayMs: 20 }, as("dave"));
      stateful = await restart(stateful, STATEFUL);
      expect(cleanErrorLine(await running.done)).toMatch(/^MCP tool 'progress' on server 'sglong' failed: .*not sent again/);
      const sent = callsIn().length;
      expect(cleanErrorLine(await call("sg_echo", { message: "after" }, "alice"))).toBe(
        "MCP tool 'echo' on server 'sg' failed: the server no longer knows this MCP session (HTTP 404: it expired or the " +
          "server restarted). The call was not sent again; a new session serves the next call.",
      );
      expect(callsIn()).toHaveLength(sent);
      const relisted = await discoverServer(target, pool);
      expect(relisted.map((t) => t.definition.name)).toContain("whoami");
      expect(pool.size()).toBe(1);
      expect((await call("sg_echo", { message: "again" }, "alice")).content).toBe("Echo: again");
      expect(pidOf(await call("sg_whoami", {}, "alice"))).not.toBe(before);
      expect((await call("sglong_echo", { message: "back" }, "dave")).content).toBe("Echo: back");
      expect(callsIn().slice(sent).filter((line) => line.endsWith(" progress"))).toEqual([]);
    } finally {
      await pool.close();
    }
  });

  // The SSE output ends every event stream when it goes down: the harness drops those sessions at once.
  test("SSE, restarted during one call and between another user's calls: the running call gets one clean error, not sent again; the next calls work", async () => {
    expect((await call("sgsse_echo", { message: "x" }, "bob")).content).toBe("Echo: x");
    const running = await runningCall(graph, "sgsse_progress", { steps: 400, delayMs: 20 }, as("alice"));
    sse = await restart(sse, ["--outputTransport", "sse"]);
    expect(cleanErrorLine(await running.done)).toMatch(/^MCP tool 'progress' on server 'sgsse' failed: .*not sent again/);
    const sent = callsIn().filter((line) => line.endsWith(" progress")).length;
    expect((await call("sgsse_echo", { message: "back" }, "alice")).content).toBe("Echo: back");
    // Bob's session's event stream ended with the restart: the harness drops the session once it reads that end; had it
    // not read it yet, the call meets supergateway's 503 "No active SSE connection for session <id>", shown as it is.
    const bobs = await call("sgsse_echo", { message: "after" }, "bob");
    if (bobs.status === "error") expect(cleanErrorLine(bobs)).toMatch(/HTTP 503/);
    else expect(bobs.content).toBe("Echo: after");
    expect((await call("sgsse_echo", { message: "later" }, "bob")).content).toBe("Echo: later");
    expect(callsIn().filter((line) => line.endsWith(" progress"))).toHaveLength(sent);
  });
});

describe("which failed call means the gateway dropped the session", () => {
  const url = new URL("http://127.0.0.1:1/mcp");
  const withId = new StreamableHTTPClientTransport(url, { sessionId: "s-1" });
  const failed = new McpError(ErrorCode.InternalError, "MCP server process failed");

  test("supergateway's answer for a stdio process that failed, on a session it gave an id", () => {
    expect(isGatewayProcessFailed(failed, withId)).toBe(true);
  });

  test("any other internal error is the server's own answer (the session stays); so is this one without a session id", () => {
    expect(isGatewayProcessFailed(new McpError(ErrorCode.InternalError, "MCP server process failed to parse"), withId)).toBe(false);
    expect(isGatewayProcessFailed(new McpError(ErrorCode.InternalError, "database unavailable"), withId)).toBe(false);
    expect(isGatewayProcessFailed(new McpError(ErrorCode.InvalidParams, "MCP server process failed"), withId)).toBe(false);
    expect(isGatewayProcessFailed(new Error(failed.message), withId)).toBe(false);
    expect(isGatewayProcessFailed(failed, new StreamableHTTPClientTransport(url))).toBe(false);
    expect(isGatewayProcessFailed(failed, new SSEClientTransport(new URL("http://127.0.0.1:1/sse")))).toBe(false);
  });
});

describe("a stdio server behind supergateway that dies during a listing", () => {
  test("discovery drops the session the gateway dropped and lists once more on a new one: the server's tools are there", async () => {
    const dir = await makeTempDir("mcp-supergateway-list-");
    const marker = path.join(dir, "listed-once");
    const env = { ...process.env, PLAIN_EXIT_ON_FIRST_LIST: marker };
    const gateway = await startOnPort(async (p) => ({
      port: p,
      process: await startListening(
        [GATEWAY, "--stdio", `${JSON.stringify(process.execPath)} ${JSON.stringify(SERVER)}`, "--port", String(p), "--outputTransport", "streamableHttp", "--stateful"],
        `Listening on port ${p}`,
        env,
      ),
    }));
    const pool = new SessionPool(new RecordingLogger(), { httpIdleMs: null });
    try {
      const server = McpServerSchema.parse({ type: "http", url: `http://127.0.0.1:${gateway.port}/mcp`, session_init_timeout: 10 });
      const tools = await discoverServer({ serverName: "sg", server, headers: async () => ({}), secrets: [] }, pool);
      expect(tools.map((t) => t.definition.name)).toContain("whoami");
      // The first process asked did die during the listing.
      expect(readFileSync(marker, "utf8")).toMatch(/^\d+$/);
      expect(pool.live).toBe(1);
    } finally {
      await pool.close();
      await gateway.process.kill();
    }
  });
});
