import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, McpToolCallError, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, rawHeaderValues, type HttpFixture, type RecordedRequest } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { startSseFixture } from "../fixtures/sse-server";
import { stdioFixture } from "../fixtures/stdio";
import { sha256Hex } from "../fixtures/tools";
import { mergedHeaderSets } from "../../lib/shared/headers";
import { startTokenFixture, type TokenFixture } from "../fixtures/token-server";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";

let http: HttpFixture;
let sse: HttpFixture;
let tokens: TokenFixture;
let toolkit: McpToolkit;
let logger: RecordingLogger;
let graph: ToolNodeGraph;
let marker = 0;

const STATIC = "Static static-cred-1";
const USER = "User alice-cred-1";
const REQUEST = "Request req-cred-1";

beforeAll(async () => {
  [http, sse, tokens] = await Promise.all([
    startHttpFixture({ name: "remote", toolNames: ["echo", "fail"] }),
    startSseFixture({ name: "legacy", toolNames: ["echo"] }),
    startTokenFixture(),
  ]);
  const oauth = { token_url: tokens.url, client_id: "client-1", client_secret: "client-secret-1" };
  const userAuth = { header: "Authorization", users: { alice: USER } };
  const contextHeaders = { headers: { AUTHORIZATION: "request_token" } };
  const base = (which: string) => ({ type: "http", url: http.url, headers: { authorization: STATIC, "X-Which": which } });
  const dir = await makeTempDir("mcp-layers-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      four: { ...base("four"), oauth, user_auth: userAuth, headers_from_context: contextHeaders },
      three: { ...base("three"), oauth, user_auth: userAuth },
      two: { ...base("two"), oauth },
      one: base("one"),
      guarded: {
        ...base("guarded"),
        user_auth: { header: "X-User-Token", users: { alice: "alice-token-1", carol: "carol-token-1", blank: "" } },
        headers_from_context: { headers: { "X-Api-Key": "api_key" } },
      },
      lenient: {
        ...base("lenient"),
        user_auth: { header: "X-User-Token", users: { alice: "alice-token-1" }, on_missing: "passthrough" },
        headers_from_context: { headers: { "X-Api-Key": "api_key" }, on_missing: "passthrough" },
      },
      legacy: { type: "sse", url: sse.url, headers_from_context: { headers: { "X-Api-Key": "api_key" } } },
      local: {
        type: "stdio",
        ...stdioFixture({ name: "local", toolNames: ["whoami"] }),
        user_auth: { header: "X-User-Token", users: { alice: "alice-token-1" } },
      },
    },
  });
  logger = new RecordingLogger();
  toolkit = createMcpToolkit({ configPath, env: {}, logger });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit.close();
  await Promise.all([http.close(), sse.close(), tokens.close()]);
});

const alice = { user_id: "alice", secrets: { request_token: REQUEST, api_key: "api-key-1" } };

async function echo(server: string, context: object | undefined, fixture: HttpFixture = http) {
  const text = `m-${++marker}`;
  const postsBefore = fixture.requests.filter((r) => r.method === "POST").length;
  const message = await callThroughGraph(graph, `${server}_echo`, { text }, context ? { context } : {});
  return {
    message,
    request: findToolCall(fixture.requests, text),
    newPosts: fixture.requests.filter((r) => r.method === "POST").length - postsBefore,
  };
}

function sessionRequests(fixture: HttpFixture, call: RecordedRequest): RecordedRequest[] {
  return fixture.requests.filter((r) => r.sessionId !== undefined && r.sessionId === call.sessionId);
}

describe("precedence: static → OAuth → user_auth → headers_from_context", () => {
  test.each([
    ["four", REQUEST],
    ["three", USER],
    ["two", "Bearer access-"],
    ["one", STATIC],
  ])("server '%s' sends exactly one Authorization header, from its highest layer", async (server, expected) => {
    const { message, request } = await echo(server, alice);
    expect(message.status).toBe("success");
    const values = rawHeaderValues(request!, "authorization");
    expect(values).toHaveLength(1);
    expect(values[0].startsWith(expected)).toBe(true);
  });

  test("static lower-case `authorization` + OAuth `Authorization`: one header with the OAuth value", async () => {
    const { request } = await echo("two", undefined);
    expect(rawHeaderValues(request!, "authorization")).toEqual([expect.stringMatching(/^Bearer access-\d+$/)]);
    expect(rawHeaderValues(request!, "x-which")).toEqual(["two"]);
  });

  test("the per-call headers reach every request of the call's session, initialize included", async () => {
    const { request } = await echo("four", alice);
    const requests = sessionRequests(http, request!);
    expect(requests.map((r) => r.rpcMethod ?? r.method)).toEqual(expect.arrayContaining(["notifications/initialized", "tools/call"]));
    for (const r of requests) expect(rawHeaderValues(r, "authorization")).toEqual([REQUEST]);
    const initialize = http.requests.find(
      (r) => r.rpcMethods?.includes("initialize") && rawHeaderValues(r, "authorization")[0] === REQUEST,
    );
    expect(initialize).toBeDefined();
  });

  test("the same credentials reuse one session; another user's credentials get their own", async () => {
    const first = await echo("guarded", { user_id: "alice", secrets: { api_key: "k-1" } });
    const again = await echo("guarded", { user_id: "alice", secrets: { api_key: "k-1" } });
    const carol = await echo("guarded", { user_id: "carol", secrets: { api_key: "k-1" } });
    expect(again.request!.sessionId).toBe(first.request!.sessionId);
    expect(carol.request!.sessionId).not.toBe(first.request!.sessionId);
    expect(again.newPosts).toBe(1);
    expect(rawHeaderValues(carol.request!, "x-user-token")).toEqual(["carol-token-1"]);
  });
});

describe("error texts", () => {
  test("a server's error text is scrubbed of the header values the call sent", async () => {
    const message = await callThroughGraph(graph, "one_fail", { message: `credential ${STATIC} was rejected` });
    expect(message.status).toBe("error");
    expect(message.content).toBe("credential [redacted] was rejected");
  });
});

describe("fail closed", () => {
  test.each([
    ["an unmapped user", { user_id: "bob", secrets: { api_key: "k" } }, /no user_auth credential for user 'bob' \(header 'X-User-Token'\)/],
    ["a run without a user id", { secrets: { api_key: "k" } }, /has no user id/],
    ["a user mapped to an empty value", { user_id: "blank", secrets: { api_key: "k" } }, /user 'blank'/],
    ["a missing secret key", { user_id: "alice", secrets: {} }, /context\.secrets 'api_key' \(headers_from_context\)/],
    ["an empty secret", { user_id: "alice", secrets: { api_key: "" } }, /'api_key'/],
    ["a non-string secret", { user_id: "alice", secrets: { api_key: 42 } }, /'api_key'/],
    ["no context at all", undefined, /has no user id/],
  ])("%s: an error ToolMessage naming the key, and no request reaches the server", async (_what, context, pattern) => {
    const { message, request, newPosts } = await echo("guarded", context);
    expect(message.status).toBe("error");
    expect(String(message.content)).toMatch(pattern);
    expect(String(message.content)).toMatch(/^MCP server 'guarded'/);
    expect(request).toBeUndefined();
    expect(newPosts).toBe(0);
  });

  test("passthrough: the call proceeds without the missing headers", async () => {
    const { message, request } = await echo("lenient", { user_id: "bob" });
    expect(message.status).toBe("success");
    expect(rawHeaderValues(request!, "x-user-token")).toEqual([]);
    expect(rawHeaderValues(request!, "x-api-key")).toEqual([]);
    expect(rawHeaderValues(request!, "authorization")).toEqual([STATIC]);
  });

  test("passthrough still rejects a value that cannot be sent", async () => {
    const { message, request, newPosts } = await echo("lenient", { user_id: "alice", secrets: { api_key: "api-key\r\nX-Evil: 1" } });
    expect(message.status).toBe("error");
    expect(message.content).toBe(
      "MCP server 'lenient': header 'X-Api-Key' from headers_from_context contains a line break (CR or LF); the value is not shown",
    );
    expect(request).toBeUndefined();
    expect(newPosts).toBe(0);
  });

  test("passthrough still sends what it has", async () => {
    const { request } = await echo("lenient", { user_id: "alice", secrets: { api_key: "api-key-7" } });
    expect(rawHeaderValues(request!, "x-user-token")).toEqual(["alice-token-1"]);
    expect(rawHeaderValues(request!, "x-api-key")).toEqual(["api-key-7"]);
  });
});

describe("transports", () => {
  test("SSE: the per-request header travels on the event stream and on every POST of the session", async () => {
    const { message, request } = await echo("legacy", { secrets: { api_key: "sse-key-1" } }, sse);
    expect(message.status).toBe("success");
    const requests = sessionRequests(sse, request!);
    expect(requests.some((r) => r.method === "GET" && r.path === "/sse")).toBe(true);
    expect(requests.filter((r) => r.method === "POST").length).toBeGreaterThanOrEqual(3);
    for (const r of requests) expect(rawHeaderValues(r, "x-api-key")).toEqual(["sse-key-1"]);
  });

  test("stdio: user_auth is ignored with one warning, and no _meta.headers is sent", async () => {
    const message = await callThroughGraph(graph, "local_whoami", {}, { context: alice });
    expect(JSON.parse(String(message.content)).meta.headers).toBeUndefined();
    const warnings = logger.messages("warn").filter((m) => m.includes("'local'"));
    expect(warnings).toEqual([
      "MCP server 'local' uses stdio; user_auth applies only to http/sse servers and is ignored (stdio sessions are per user/thread already)",
    ]);
  });

  test("stdio: the warning is not repeated on reload, only when the server's declared layers change", async () => {
    const dir = await makeTempDir("mcp-layers-stdio-warn-");
    // A child that exits at once keeps each reload cheap; the warning comes from the config, not the session.
    const quiet = (extra: object) => ({ type: "stdio", ...stdioFixture({ mode: "crash" }), user_auth: { header: "X-U", users: {} }, ...extra });
    const configPath = await writeConfig(dir, { mcpServers: { quiet: quiet({}) } });
    const own = new RecordingLogger();
    const reloading = createMcpToolkit({ configPath, env: {}, logger: own });
    const stdioWarnings = () => own.messages("warn").filter((m) => m.includes("uses stdio"));
    try {
      await reloading.getTools();
      await writeConfig(dir, { mcpServers: { quiet: quiet({ description: "edited" }) } });
      await reloading.getTools();
      await reloading.reset();
      await reloading.getTools();
      expect(own.messages("info").filter((m) => m.includes("reloading tools"))).toHaveLength(1);
      expect(stdioWarnings()).toEqual([
        "MCP server 'quiet' uses stdio; user_auth applies only to http/sse servers and is ignored (stdio sessions are per user/thread already)",
      ]);
      await writeConfig(dir, { mcpServers: { quiet: quiet({ headers_from_context: { headers: { "X-K": "k" } } }) } });
      await reloading.getTools();
      await reloading.reset();
      await reloading.getTools();
      expect(stdioWarnings()).toEqual([
        "MCP server 'quiet' uses stdio; user_auth applies only to http/sse servers and is ignored (stdio sessions are per user/thread already)",
        "MCP server 'quiet' uses stdio; user_auth, headers_from_context apply only to http/sse servers and are ignored (stdio sessions are per user/thread already)",
      ]);
    } finally {
      await reloading.close();
    }
  });

  test("stdio: headers an interceptor sets arrive as the call's _meta.headers, and their echo is scrubbed", async () => {
    const dir = await makeTempDir("mcp-layers-stdio-");
    const configPath = await writeConfig(dir, {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["whoami"] }) } },
    });
    const traced: McpToolInterceptor = (request, next) =>
      next(request.override({ headers: { ...request.headers, "X-Trace": `trace-${String(request.runtime?.toolCallId)}` } }));
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [traced] });
    try {
      const message = await callThroughGraph(toolNodeGraph(await own.getTools()), "local_whoami", {});
      const echoed = JSON.parse(String(message.content));
      expect(echoed.metaHeadersDigest).toBe(sha256Hex(JSON.stringify({ "X-Trace": `trace-${message.tool_call_id}` })));
      expect(echoed.meta.headers).toEqual({ "X-Trace": "[redacted]" });
    } finally {
      await own.close();
    }
  });
});

describe("calls outside an agent run (the durable-task switch)", () => {
  function text(outcome: unknown): string {
    return ((outcome as CallToolResult).content[0] as { text: string }).text;
  }

  test("requestScopedHeaders: false uses static + OAuth only and does not fail closed", async () => {
    const id = `direct-${++marker}`;
    const outcome = await toolkit.callTool({ server: "four", tool: "echo", args: { text: id }, requestScopedHeaders: false });
    expect(text(outcome)).toBe(id);
    expect(rawHeaderValues(findToolCall(http.requests, id)!, "authorization")).toEqual([expect.stringMatching(/^Bearer access-/)]);

    const guarded = `direct-${++marker}`;
    await toolkit.callTool({ server: "guarded", tool: "echo", args: { text: guarded }, requestScopedHeaders: false });
    const request = findToolCall(http.requests, guarded)!;
    expect(rawHeaderValues(request, "x-user-token")).toEqual([]);
    expect(rawHeaderValues(request, "authorization")).toEqual([STATIC]);
  });

  test("requestScopedHeaders (default): the layers read the given runtime, and fail closed without one", async () => {
    const id = `direct-${++marker}`;
    const runtime = { context: alice } as never;
    await toolkit.callTool({ server: "four", tool: "echo", args: { text: id }, runtime });
    expect(rawHeaderValues(findToolCall(http.requests, id)!, "authorization")).toEqual([REQUEST]);

    const denied = toolkit.callTool({ server: "guarded", tool: "echo", args: { text: "never sent" } });
    await expect(denied).rejects.toThrow(McpToolCallError);
    await expect(denied).rejects.toThrow(/has no user id/);
    expect(findToolCall(http.requests, "never sent")).toBeUndefined();
  });

  test("an unknown server is a clear error", async () => {
    await expect(toolkit.callTool({ server: "nope", tool: "echo", args: {} })).rejects.toThrow(
      "MCP server 'nope' is not configured or not enabled",
    );
  });
});

describe("remembered header sets", () => {
  test("per-run tokens on a server with two per-user layers keep at most 1024 header sets in the whole process", async () => {
    const call = async (userId: string, token: string) => {
      const id = `bound-${++marker}`;
      const runtime = { context: { user_id: userId, secrets: { api_key: token } } } as never;
      await toolkit.callTool({ server: "guarded", tool: "echo", args: { text: id }, runtime });
      return findToolCall(http.requests, id)!;
    };
    // Each user's merged user_auth headers are the base of the headers_from_context memo: 2 users × 520 runs.
    for (let run = 0; run < 520; run += 8) {
      const batch: Promise<RecordedRequest>[] = [];
      for (let i = run; i < run + 8; i += 1) batch.push(call("alice", `run-${i}`), call("carol", `run-${i}`));
      await Promise.all(batch);
    }
    expect(mergedHeaderSets()).toBeLessThanOrEqual(1024);

    const last = await call("alice", "run-519");
    expect(rawHeaderValues(last, "x-user-token")).toEqual(["alice-token-1"]);
    expect(rawHeaderValues(last, "x-api-key")).toEqual(["run-519"]);
    const postsBefore = http.requests.filter((r) => r.method === "POST").length;
    const again = await call("alice", "run-519");
    expect(again.sessionId).toBe(last.sessionId);
    expect(http.requests.filter((r) => r.method === "POST").length - postsBefore).toBe(1);
    // More than 1024 new sessions: about 9 s alone on 2 cores, over 60 s beside other suites (jest's default here).
  }, 240_000);
});
