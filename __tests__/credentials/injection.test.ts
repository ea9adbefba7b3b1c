/**
 * Header injection from every layer is stopped before the transport, and no secret (good or bad) reaches
 * a ToolMessage, an error text, a log line, the console, a checkpoint or a trace of the run.
 */
import { afterAll, beforeAll, describe, expect, jest, test } from "@jest/globals";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { ToolMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { TraceRecorder } from "../fixtures/trace";
import { findToolCall, rawHeaderValues, type HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { startTokenFixture, type TokenFixture } from "../fixtures/token-server";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";

/** Each bad value wraps a unique core, which is what the leak scan looks for. */
const VARIANTS = {
  crlf: { make: (core: string) => `${core}\r\nX-Evil: 1`, problem: "contains a line break (CR or LF)" },
  lf: { make: (core: string) => `${core}\nx`, problem: "contains a line break (CR or LF)" },
  nul: { make: (core: string) => `${core}\u0000`, problem: "contains a NUL character" },
  leading: { make: (core: string) => ` ${core}`, problem: "has leading or trailing whitespace" },
  nonascii: { make: (core: string) => `${core}é`, problem: "contains a non-ASCII character" },
} as const;
type Variant = keyof typeof VARIANTS;
const NAMES = Object.keys(VARIANTS) as Variant[];
const LAYERS = ["static", "oauth", "user", "context", "interceptor"] as const;

const cores: string[] = [];
function bad(layer: (typeof LAYERS)[number], variant: Variant): string {
  const core = `injected-${layer}-${variant}-core`;
  cores.push(core);
  return VARIANTS[variant].make(core);
}

const GOOD = {
  static: "static-secret-good-1",
  clientSecret: "oauth-client-secret-1",
  user: "user-secret-good-1",
  context: "ctx-secret-good-1",
  echoed: "echoed-secret-good-1",
};
const goodTokens: string[] = [];

let http: HttpFixture;
let tokens: TokenFixture;
let echoer: Server;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;
const logger = new RecordingLogger();
const checkpointer = new MemorySaver();
const consoleLines: string[] = [];
const traces: string[] = [];
const toolMessages: ToolMessage[] = [];
let clock = 1_700_000_000_000;
const tokenCalls = new Map<string, number>();
let thread = 0;

beforeAll(async () => {
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    jest.spyOn(console, level).mockImplementation((...args: unknown[]) => void consoleLines.push(args.map(String).join(" ")));
  }
  [http, tokens] = await Promise.all([startHttpFixture({ name: "remote", toolNames: ["echo"] }), startTokenFixture()]);
  // Discovery gets a good token; every later token of an `oa_*` client is the bad one for its variant.
  tokens.respond(({ form }) => {
    const client = form.client_id;
    const count = (tokenCalls.get(client) ?? 0) + 1;
    tokenCalls.set(client, count);
    const variant = client.replace(/^oa_/, "") as Variant;
    if (client === "good" || count === 1) {
      const token = `access-secret-${client}-${count}`;
      goodTokens.push(token);
      return { body: { access_token: token, token_type: "Bearer", expires_in: 600 } };
    }
    const value = bad("oauth", variant);
    // A leading space in the token itself would sit inside "Bearer  …"; put it where it reaches the edge.
    return variant === "leading"
      ? { body: { access_token: value.trim(), token_type: " Bearer", expires_in: 600 } }
      : { body: { access_token: value, token_type: "Bearer", expires_in: 600 } };
  });
  // Not an MCP server: it answers every request with 403 and a body that echoes the credential it got.
  echoer = createServer((req, res) => {
    res.writeHead(403, { "Content-Type": "text/plain" });
    res.end(`forbidden for ${String(req.headers.authorization)}`);
  });
  await new Promise<void>((resolve) => echoer.listen(0, "127.0.0.1", resolve));

  const env: NodeJS.ProcessEnv = {};
  const servers: Record<string, object> = {};
  const remote = (which: string, extra: object = {}) => ({ type: "http", url: http.url, headers: { "X-Which": which }, ...extra });
  for (const variant of NAMES) {
    env[`BAD_${variant.toUpperCase()}`] = bad("static", variant);
    servers[`st_${variant}`] = remote(`st_${variant}`, { headers: { "X-Which": `st_${variant}`, "X-Api-Key": `$BAD_${variant.toUpperCase()}` } });
    servers[`oa_${variant}`] = remote(`oa_${variant}`, {
      oauth: { token_url: tokens.url, client_id: `oa_${variant}`, client_secret: GOOD.clientSecret },
    });
  }
  env.GOOD_STATIC = GOOD.static;
  servers.good = remote("good", {
    headers: { "X-Which": "good", "X-Api-Key": "${GOOD_STATIC}" },
    oauth: { token_url: tokens.url, client_id: "good", client_secret: GOOD.clientSecret },
  });
  servers.ua = remote("ua", {
    user_auth: { header: "X-User-Token", users: { good: GOOD.user, ...Object.fromEntries(NAMES.map((v) => [v, bad("user", v)])) } },
  });
  servers.cx = remote("cx", { headers_from_context: { headers: { "X-Api-Key": "api_key" } } });
  servers.ic = remote("ic");
  servers.echoer = { type: "http", url: `http://127.0.0.1:${(echoer.address() as AddressInfo).port}/mcp`, headers: { Authorization: `Bearer ${GOOD.echoed}` } };

  const customBad: McpToolInterceptor = (request, next) => {
    const variant = request.args.text as Variant;
    if (request.serverName !== "ic" || !(variant in VARIANTS)) return next(request);
    return next(request.override({ headers: { ...request.headers, "X-Custom": bad("interceptor", variant) } }));
  };
  const dir = await makeTempDir("mcp-injection-");
  const configPath = await writeConfig(dir, { mcpServers: servers });
  toolkit = createMcpToolkit({ configPath, env, logger, interceptors: [customBad], oauth: { now: () => clock } });
  graph = toolNodeGraph(await toolkit.getTools(), checkpointer);
  clock += 3600_000; // every discovery token has expired: the next call of each server fetches again
});
afterAll(async () => {
  await toolkit.close();
  await Promise.all([http.close(), tokens.close(), new Promise((resolve) => echoer.close(resolve))]);
  jest.restoreAllMocks();
});

async function call(server: string, text: string, context?: object): Promise<ToolMessage> {
  const message = await callThroughGraph(graph, `${server}_echo`, { text }, {
    ...(context ? { context } : {}),
    configurable: { thread_id: `injection-${++thread}` },
    callbacks: [new TraceRecorder(traces)],
  });
  toolMessages.push(message);
  return message;
}

function expectRejected(message: ToolMessage, server: string, header: string, layer: string, variant: Variant): void {
  expect(message.status).toBe("error");
  expect(message.content).toBe(`MCP server '${server}': header '${header}' from ${layer} ${VARIANTS[variant].problem}; the value is not shown`);
}

describe("a bad value from any layer is rejected before the transport", () => {
  test.each(NAMES)("static headers (%s): the server is not started, with a warning naming header and layer", (variant) => {
    expect(logger.messages("warn")).toContain(
      `MCP server 'st_${variant}': header 'X-Api-Key' from static headers ${VARIANTS[variant].problem}; the value is not shown; not starting it`,
    );
    expect(http.requests.some((r) => rawHeaderValues(r, "x-which")[0] === `st_${variant}`)).toBe(false);
  });

  test.each(NAMES)("OAuth token response (%s)", async (variant) => {
    expectRejected(await call(`oa_${variant}`, `oauth-${variant}`), `oa_${variant}`, "Authorization", "OAuth", variant);
    expect(findToolCall(http.requests, `oauth-${variant}`)).toBeUndefined();
  });

  test.each(NAMES)("user_auth map (%s)", async (variant) => {
    expectRejected(await call("ua", `user-${variant}`, { user_id: variant }), "ua", "X-User-Token", "user_auth", variant);
    expect(findToolCall(http.requests, `user-${variant}`)).toBeUndefined();
  });

  test.each(NAMES)("context secret (%s), rejected even with the value present", async (variant) => {
    const message = await call("cx", `context-${variant}`, { secrets: { api_key: bad("context", variant) } });
    expectRejected(message, "cx", "X-Api-Key", "headers_from_context", variant);
    expect(findToolCall(http.requests, `context-${variant}`)).toBeUndefined();
  });

  test.each(NAMES)("a custom interceptor's header (%s)", async (variant) => {
    expectRejected(await call("ic", variant), "ic", "X-Custom", "an interceptor", variant);
    expect(http.requests.filter((r) => r.rpcMethods?.includes("tools/call") && rawHeaderValues(r, "x-which")[0] === "ic")).toEqual([]);
  });

  test("good values from every layer still work", async () => {
    expect((await call("good", "good-call")).status).toBe("success");
    expect((await call("ua", "good-user", { user_id: "good" })).status).toBe("success");
    expect((await call("cx", "good-context", { secrets: { api_key: GOOD.context } })).status).toBe("success");
    expect(rawHeaderValues(findToolCall(http.requests, "good-call")!, "x-api-key")).toEqual([GOOD.static]);
    expect(rawHeaderValues(findToolCall(http.requests, "good-user")!, "x-user-token")).toEqual([GOOD.user]);
    expect(rawHeaderValues(findToolCall(http.requests, "good-context")!, "x-api-key")).toEqual([GOOD.context]);
  });

  test("a server whose error body echoes the credential is skipped without the credential in the warning", () => {
    const warning = logger.messages("warn").find((m) => m.startsWith("Skipping MCP server 'echoer'"));
    expect(warning).toContain("Error POSTing to endpoint (HTTP 403): forbidden for [redacted]");
  });
});

describe("the leak scan", () => {
  test("no bad value reached the server, and no secret is in any message, error, log line, console line, checkpoint or trace", async () => {
    const checkpoints: string[] = [];
    for (let t = 1; t <= thread; t += 1) {
      for await (const tuple of checkpointer.list({ configurable: { thread_id: `injection-${t}` } })) {
        checkpoints.push(JSON.stringify(tuple));
      }
    }
    expect(checkpoints.length).toBeGreaterThan(0);
    expect(traces.length).toBeGreaterThan(0);
    const texts = [
      ...toolMessages.map((m) => JSON.stringify(m.toDict())),
      ...logger.lines.map((l) => l.message),
      ...consoleLines,
      ...checkpoints,
      ...traces,
    ];
    const secrets = [...cores, ...Object.values(GOOD), ...goodTokens];
    expect(goodTokens.length).toBeGreaterThan(0);
    expect(cores.length).toBeGreaterThanOrEqual(LAYERS.length * NAMES.length);
    const leaks = texts.flatMap((text) => secrets.filter((secret) => text.includes(secret)).map((secret) => `${secret} in ${text.slice(0, 120)}`));
    expect(leaks).toEqual([]);

    const sent = http.requests.flatMap((r) => r.rawHeaders.map(([, value]) => value));
    expect(sent.filter((value) => cores.some((core) => value.includes(core)))).toEqual([]);
  });
});
