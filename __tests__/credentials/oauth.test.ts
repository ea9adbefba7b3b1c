import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import {
  createMcpToolkit,
  CredentialError,
  McpOAuthSchema,
  OAuthTokenManager,
  RecordingLogger,
  type McpOAuthConfig,
  type McpToolkit,
} from "../../lib";
import { EARLY_REFRESH_RETRY_MS } from "../../lib/credentials";
import { DeadlineExceededError } from "../../lib/shared/deadline";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, rawHeaderValues, type HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { defaultTokenResponder, startTokenFixture, type TokenFixture } from "../fixtures/token-server";
import { callThroughGraph, toolCalls, toolMessagesOf, toolNodeGraph } from "../fixtures/graph";

let tokens: TokenFixture;
let http: HttpFixture;
const toolkits: McpToolkit[] = [];

beforeAll(async () => {
  [tokens, http] = await Promise.all([startTokenFixture(), startHttpFixture({ name: "remote", toolNames: ["echo"] })]);
});
afterEach(async () => {
  tokens.respond(defaultTokenResponder);
  await Promise.all(toolkits.splice(0).map((t) => t.close()));
});
afterAll(async () => {
  await Promise.all([tokens.close(), http.close()]);
});

/** A clock the test moves; starts at an arbitrary fixed instant. */
function fakeClock() {
  let now = 1_700_000_000_000;
  return { now: () => now, advance: (seconds: number) => void (now += seconds * 1000) };
}

function oauthConfig(extra: Record<string, unknown> = {}): McpOAuthConfig {
  return McpOAuthSchema.parse({ token_url: tokens.url, client_id: "client-1", client_secret: "client-secret-1", ...extra });
}

function requestsSince(start: number) {
  return tokens.requests.slice(start);
}

/**
 * A manager holding its first token, valid for 120 s and refreshed 60 s early: 61 s on, a call refreshes early. The
 * endpoint answers with `token(n)` until the test changes it.
 */
async function tokenInHand(token: (n: number) => string, options: { earlyRefreshWaitMs?: number } = {}) {
  const clock = fakeClock();
  const manager = new OAuthTokenManager({ now: clock.now, ...options });
  tokens.respond(({ n }) => ({ body: { access_token: token(n), expires_in: 120 } }));
  const config = oauthConfig({ refresh_skew_seconds: 60 });
  const first = await manager.getAuthorizationHeader("srv", config);
  return { clock, manager, config, first };
}

describe("OAuthTokenManager against a real token endpoint", () => {
  test("client_credentials form: grant_type wins over extra_token_params; scope and audience sent", async () => {
    const start = tokens.requests.length;
    const manager = new OAuthTokenManager();
    const config = oauthConfig({ scope: "read", audience: "mcp", extra_token_params: { grant_type: "password", resource: "r-1" } });
    await expect(manager.getAuthorizationHeader("srv", config)).resolves.toMatch(/^Bearer access-\d+$/);
    expect(requestsSince(start).map((r) => r.form)).toEqual([
      { grant_type: "client_credentials", resource: "r-1", client_id: "client-1", client_secret: "client-secret-1", scope: "read", audience: "mcp" },
    ]);
  });

  test("the token is reused until expires_in − refresh_skew_seconds, then fetched again", async () => {
    const clock = fakeClock();
    const manager = new OAuthTokenManager({ now: clock.now });
    tokens.respond(({ n }) => ({ body: { access_token: `short-${n}`, token_type: "Bearer", expires_in: 120 } }));
    const config = oauthConfig({ refresh_skew_seconds: 60 });
    const start = tokens.requests.length;
    const first = await manager.getAuthorizationHeader("srv", config);
    clock.advance(59);
    expect(await manager.getAuthorizationHeader("srv", config)).toBe(first);
    expect(requestsSince(start)).toHaveLength(1);
    clock.advance(2);
    const second = await manager.getAuthorizationHeader("srv", config);
    expect(second).not.toBe(first);
    expect(requestsSince(start)).toHaveLength(2);
  });

  test("a failed early refresh falls back to the token in hand until it expires", async () => {
    const { clock, manager, config, first } = await tokenInHand(() => "still-valid-1");
    expect(first).toBe("Bearer still-valid-1");
    tokens.respond(() => ({ status: 500, body: "down" }));
    const start = tokens.requests.length;
    clock.advance(70);
    expect(await manager.getAuthorizationHeader("srv", config)).toBe("Bearer still-valid-1");
    expect(requestsSince(start)).toHaveLength(1);
    clock.advance(50);
    await expect(manager.getAuthorizationHeader("srv", config)).rejects.toThrow("answered HTTP 500");
  });

  test("a hung early refresh does not hold calls: they go on with the token in hand, and its answer serves later", async () => {
    const { clock, manager, config, first } = await tokenInHand((n) => `hung-${n}`, { earlyRefreshWaitMs: 0 });
    const start = tokens.requests.length;
    const held = tokens.hold();
    clock.advance(70);
    // The refresh is held at the endpoint: the call is answered with the token in hand, still valid for 50 s.
    expect(await manager.getAuthorizationHeader("srv", config)).toBe(first);
    expect(await manager.getAuthorizationHeader("srv", config)).toBe(first);
    await held.received;
    held.release();
    // Expired now: the next call waits for the one refresh under way (or finds its token).
    clock.advance(60);
    const second = await manager.getAuthorizationHeader("srv", config);
    expect(second).not.toBe(first);
    expect(requestsSince(start)).toHaveLength(1);
  });

  test("a caller whose own deadline stops its wait for an early refresh gets that deadline, not the token in hand", async () => {
    const { clock, manager, config } = await tokenInHand(() => "in-hand", { earlyRefreshWaitMs: 60_000 });
    const held = tokens.hold();
    clock.advance(70);
    try {
      const controller = new AbortController();
      const waiting = manager.getAuthorizationHeader("srv", config, controller.signal);
      await held.received;
      const deadline = new DeadlineExceededError(5000);
      controller.abort(deadline);
      await expect(waiting).rejects.toBe(deadline);
    } finally {
      held.release();
    }
  });

  test("after a failed early refresh, calls use the token in hand for EARLY_REFRESH_RETRY_MS before one asks again", async () => {
    const { clock, manager, config } = await tokenInHand(() => "in-hand", { earlyRefreshWaitMs: 60_000 });
    tokens.respond(() => ({ status: 503, body: "down" }));
    const start = tokens.requests.length;
    clock.advance(61);
    for (let i = 0; i < 5; i += 1) expect(await manager.getAuthorizationHeader("srv", config)).toBe("Bearer in-hand");
    expect(requestsSince(start)).toHaveLength(1);
    clock.advance(EARLY_REFRESH_RETRY_MS / 1000);
    tokens.respond(({ n }) => ({ body: { access_token: `back-${n}`, expires_in: 120 } }));
    expect(await manager.getAuthorizationHeader("srv", config)).toMatch(/^Bearer back-\d+$/);
    expect(requestsSince(start)).toHaveLength(2);
  });

  test("concurrent callers share one token request", async () => {
    const manager = new OAuthTokenManager();
    const start = tokens.requests.length;
    const held = tokens.hold();
    const callers = Array.from({ length: 20 }, () => manager.getAuthorizationHeader("srv", oauthConfig()));
    await held.received;
    held.release();
    const values = await Promise.all(callers);
    expect(new Set(values).size).toBe(1);
    expect(requestsSince(start)).toHaveLength(1);
  });

  test("refresh_token grant: the rotated refresh token is used on the next refresh, and the file is not touched", async () => {
    const clock = fakeClock();
    const manager = new OAuthTokenManager({ now: clock.now });
    const config = McpOAuthSchema.parse({ token_url: tokens.url, grant_type: "refresh_token", refresh_token: "refresh-0", client_id: "client-1" });
    const start = tokens.requests.length;
    await manager.getAuthorizationHeader("srv", config);
    clock.advance(3600);
    await manager.getAuthorizationHeader("srv", config);
    const forms = requestsSince(start).map((r) => r.form);
    expect(forms[0]).toEqual({ grant_type: "refresh_token", refresh_token: "refresh-0", client_id: "client-1" });
    expect(forms[1].refresh_token).toBe(`refresh-${start + 1}`);
    expect(config.refresh_token).toBe("refresh-0");
  });

  test("a rotated refresh token is kept even when the rest of the answer is refused: the old one is spent", async () => {
    const clock = fakeClock();
    const manager = new OAuthTokenManager({ now: clock.now });
    const config = McpOAuthSchema.parse({ token_url: tokens.url, grant_type: "refresh_token", refresh_token: "rt-0" });
    let n = 0;
    tokens.respond(() => (++n === 1 ? { body: { access_token: "bad\ntoken", refresh_token: "rt-1" } } : { body: { access_token: `ok-${n}`, refresh_token: `rt-${n}` } }));
    const start = tokens.requests.length;
    await expect(manager.getAuthorizationHeader("srv", config)).rejects.toThrow(/line break/);
    expect(await manager.getAuthorizationHeader("srv", config)).toBe("Bearer ok-2");
    expect(requestsSince(start).map((r) => r.form.refresh_token)).toEqual(["rt-0", "rt-1"]);
  });

  test("a token endpoint that redirects is an error: the client secret is never sent where the redirect points", async () => {
    const redirector = createHttpServer((_req, res) => res.writeHead(307, { location: tokens.url }).end());
    await new Promise<void>((resolve) => redirector.listen(0, "127.0.0.1", resolve));
    try {
      const start = tokens.requests.length;
      const config = oauthConfig({ token_url: `http://127.0.0.1:${(redirector.address() as AddressInfo).port}/token` });
      await expect(new OAuthTokenManager().getAuthorizationHeader("srv", config)).rejects.toThrow("the token endpoint answered HTTP 307");
      expect(requestsSince(start)).toHaveLength(0);
    } finally {
      await new Promise((resolve) => redirector.close(resolve));
    }
  });

  test("an endless or oversized token answer is refused after 1 MiB, neither held whole nor waited for", async () => {
    // /endless streams forever; /declared announces 2 MB and sends nothing; /error is an HTTP 400 streaming forever.
    const streaming = createHttpServer((req, res) => {
      if (req.url === "/declared") {
        res.writeHead(200, { "Content-Type": "application/json", "Content-Length": "2000000" });
        res.write("{");
        return;
      }
      res.writeHead(req.url === "/error" ? 400 : 200, { "Content-Type": "application/json" });
      const chunk = `{"error":"invalid_grant",${" ".repeat(64 * 1024)}`;
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once("drain", pump);
      };
      pump();
    });
    await new Promise<void>((resolve) => streaming.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(streaming.address() as AddressInfo).port}`;
    try {
      // A timeout the test would see instead if the body were read to its end.
      const manager = new OAuthTokenManager({ requestTimeoutMs: 20_000 });
      for (const path of ["/endless", "/declared"]) {
        await expect(manager.getAuthorizationHeader("srv", oauthConfig({ token_url: `${base}${path}` }))).rejects.toThrow(
          "OAuth token request of MCP server 'srv' failed: the token response is larger than 1048576 bytes",
        );
      }
      await expect(manager.getAuthorizationHeader("srv", oauthConfig({ token_url: `${base}/error` }))).rejects.toThrow(
        /^OAuth token request of MCP server 'srv' failed: the token endpoint answered HTTP 400$/,
      );
    } finally {
      streaming.closeAllConnections();
      await new Promise((resolve) => streaming.close(resolve));
    }
  });

  test("a token answer that starts with a byte-order mark is read as JSON, as fetch's text() reads it", async () => {
    tokens.respond(() => ({ body: `\uFEFF${JSON.stringify({ access_token: "bom-token", token_type: "Bearer", expires_in: 3600 })}` }));
    expect(await new OAuthTokenManager().getAuthorizationHeader("srv", oauthConfig())).toBe("Bearer bom-token");
  });

  test("a changed oauth block starts over; the same block (a reload) keeps the cached token", async () => {
    const manager = new OAuthTokenManager();
    const start = tokens.requests.length;
    const first = await manager.getAuthorizationHeader("srv", oauthConfig());
    expect(await manager.getAuthorizationHeader("srv", oauthConfig())).toBe(first);
    expect(requestsSince(start)).toHaveLength(1);
    await manager.getAuthorizationHeader("srv", oauthConfig({ scope: "write" }));
    expect(requestsSince(start)).toHaveLength(2);
  });

  test.each([
    ["HTTP 500 with a body", { status: 500, body: "internal failure; client_secret=client-secret-1" }, /^OAuth token request of MCP server 'srv' failed: the token endpoint answered HTTP 500$/],
    [
      "an OAuth error response",
      { status: 401, body: { error: "invalid_client", error_description: "secret client-secret-1 is wrong" } },
      /answered HTTP 401 \(error 'invalid_client'\)$/,
    ],
    [
      "an error code that is not a registered one (the client secret echoed there)",
      { status: 400, body: { error: "client-secret-1" } },
      /^OAuth token request of MCP server 'srv' failed: the token endpoint answered HTTP 400$/,
    ],
    ["a body that is not JSON", { body: "access_token=abc" }, /answered with a body that is not JSON$/],
    ["a response without the token field", { body: { token: "x" } }, /is missing 'access_token'$/],
  ])("%s → a clear error without the response's content", async (_what, answer, pattern) => {
    tokens.respond(() => answer);
    const error = await new OAuthTokenManager().getAuthorizationHeader("srv", oauthConfig()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CredentialError);
    expect((error as Error).message).toMatch(pattern);
    expect((error as Error).message).not.toContain("client-secret-1");
  });

  test("a failed request is not cached: the next call asks again", async () => {
    const manager = new OAuthTokenManager();
    tokens.respond(() => ({ status: 503, body: "busy" }));
    await expect(manager.getAuthorizationHeader("srv", oauthConfig())).rejects.toThrow("HTTP 503");
    tokens.respond(defaultTokenResponder);
    await expect(manager.getAuthorizationHeader("srv", oauthConfig())).resolves.toMatch(/^Bearer access-/);
  });

  test("an unreachable endpoint names the failure class, not the URL", async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port: free } = probe.address() as AddressInfo;
        probe.close(() => resolve(free));
      });
    });
    const config = oauthConfig({ token_url: `http://127.0.0.1:${port}/token?key=url-secret-1` });
    const error = (await new OAuthTokenManager().getAuthorizationHeader("srv", config).catch((e: unknown) => e)) as Error;
    expect(error.message).toBe("OAuth token request of MCP server 'srv' failed: could not reach the token endpoint (ECONNREFUSED)");
  });

  test("a slow endpoint is bounded by the request timeout", async () => {
    const held = tokens.hold();
    try {
      const manager = new OAuthTokenManager({ requestTimeoutMs: 200 });
      await expect(manager.getAuthorizationHeader("srv", oauthConfig())).rejects.toThrow(
        "OAuth token request of MCP server 'srv' timed out after 0.2s",
      );
    } finally {
      held.release();
    }
  });

  test.each([
    ["client_credentials without a secret", { client_secret: null }, "OAuth client_credentials for MCP server 'srv' requires client_id and client_secret"],
    ["refresh_token without a token", { grant_type: "refresh_token" }, "OAuth refresh_token grant for MCP server 'srv' requires refresh_token"],
  ])("%s fails before any request", async (_what, extra, message) => {
    const start = tokens.requests.length;
    await expect(new OAuthTokenManager().getAuthorizationHeader("srv", oauthConfig(extra))).rejects.toThrow(message);
    expect(requestsSince(start)).toHaveLength(0);
  });
});

describe("OAuth on the tool call path", () => {
  async function oauthToolkit(clock = fakeClock(), extra: Record<string, unknown> = {}) {
    const dir = await makeTempDir("mcp-oauth-");
    const configPath = await writeConfig(dir, {
      mcpServers: { remote: { type: "http", url: http.url, oauth: { token_url: tokens.url, client_id: "client-1", client_secret: "client-secret-1", ...extra } } },
    });
    const logger = new RecordingLogger();
    const toolkit = createMcpToolkit({ configPath, env: {}, logger, oauth: { now: clock.now } });
    toolkits.push(toolkit);
    return { toolkit, logger, clock, configPath };
  }

  test("discovery and calls use the token; it is reused until the skew, then refreshed", async () => {
    let n = 0;
    tokens.respond(() => ({ body: { access_token: `tool-token-${++n}`, expires_in: 600 } }));
    const { toolkit, clock } = await oauthToolkit();
    const graph = toolNodeGraph(await toolkit.getTools());
    const initialize = http.requests.filter((r) => r.rpcMethods?.includes("initialize")).at(-1)!;
    expect(rawHeaderValues(initialize, "authorization")).toEqual(["Bearer tool-token-1"]);

    await callThroughGraph(graph, "remote_echo", { text: "oauth-a" });
    clock.advance(539);
    await callThroughGraph(graph, "remote_echo", { text: "oauth-b" });
    clock.advance(2);
    await callThroughGraph(graph, "remote_echo", { text: "oauth-c" });
    expect(rawHeaderValues(findToolCall(http.requests, "oauth-a")!, "authorization")).toEqual(["Bearer tool-token-1"]);
    expect(rawHeaderValues(findToolCall(http.requests, "oauth-b")!, "authorization")).toEqual(["Bearer tool-token-1"]);
    expect(rawHeaderValues(findToolCall(http.requests, "oauth-c")!, "authorization")).toEqual(["Bearer tool-token-2"]);
    expect(n).toBe(2);
  });

  test("20 concurrent tool calls in one ToolNode step cause one token request", async () => {
    const { toolkit, clock } = await oauthToolkit();
    const graph = toolNodeGraph(await toolkit.getTools());
    clock.advance(7200); // the discovery token has expired
    const start = tokens.requests.length;
    const held = tokens.hold();
    let started = 0;
    const calls = Array.from({ length: 20 }, (_, i) => ({ name: "remote_echo", args: { text: `burst-${i}` } }));
    const run = graph.invoke({ messages: [toolCalls(calls)] }, { callbacks: [{ handleToolStart: () => void (started += 1) }] });
    await held.received;
    while (started < 20) await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve)); // every started call has reached the token manager
    held.release();
    const messages = toolMessagesOf((await run).messages);
    expect(messages.map((m) => m.status)).toEqual(Array(20).fill("success"));
    expect(requestsSince(start)).toHaveLength(1);
    const sent = new Set(calls.map((c) => rawHeaderValues(findToolCall(http.requests, c.args.text)!, "authorization")[0]));
    expect(sent.size).toBe(1);
  });

  test("a token endpoint failure at call time is an error ToolMessage, and the MCP server gets no request", async () => {
    const { toolkit, clock } = await oauthToolkit();
    const graph = toolNodeGraph(await toolkit.getTools());
    clock.advance(7200);
    tokens.respond(() => ({ status: 500, body: { error: "server_error", detail: "client-secret-1" } }));
    const message = await callThroughGraph(graph, "remote_echo", { text: "never-sent-oauth" });
    expect(message.status).toBe("error");
    expect(message.content).toBe(
      "OAuth token request of MCP server 'remote' failed: the token endpoint answered HTTP 500 (error 'server_error')",
    );
    expect(findToolCall(http.requests, "never-sent-oauth")).toBeUndefined();
  });

  test("a token endpoint failure at discovery skips the server with a warning", async () => {
    tokens.respond(() => ({ status: 500, body: "down" }));
    const { toolkit, logger } = await oauthToolkit();
    expect(await toolkit.getTools()).toEqual([]);
    expect(logger.messages("warn")).toContain(
      "Skipping MCP server 'remote' after tool discovery failed: OAuth token request of MCP server 'remote' failed: the token endpoint answered HTTP 500",
    );
  });

  test("a server switched off and on again keeps its rotated refresh token", async () => {
    const clock = fakeClock();
    const oauth = { token_url: tokens.url, grant_type: "refresh_token", refresh_token: "rt-0" };
    const { toolkit, configPath } = await oauthToolkit(clock, oauth);
    tokens.respond(({ n }) => ({ body: { access_token: `tok-${n}`, refresh_token: `rt-${n}`, expires_in: 60 } }));
    const dir = configPath.replace(/\/[^/]+$/, "");
    const write = (enabled: boolean) => writeConfig(dir, { mcpServers: { remote: { type: "http", url: http.url, enabled, oauth } } });
    const start = tokens.requests.length;
    await write(true);
    expect((await toolkit.getTools()).map((t) => t.name)).toEqual(["remote_echo"]);
    await write(false);
    expect(await toolkit.getTools()).toEqual([]);
    await write(true);
    clock.advance(3600);
    expect((await toolkit.getTools()).map((t) => t.name)).toEqual(["remote_echo"]);
    const sent = requestsSince(start).map((r) => r.form.refresh_token);
    expect(sent).toHaveLength(2);
    expect(sent[0]).toBe("rt-0");
    expect(sent[1]).toBe(`rt-${start + 1}`);
  });

  test("a config reload that keeps the oauth block keeps the token", async () => {
    const { toolkit, configPath } = await oauthToolkit();
    await toolkit.getTools();
    const start = tokens.requests.length;
    await writeConfig(configPath.replace(/\/[^/]+$/, ""), {
      mcpServers: {
        remote: {
          type: "http",
          url: http.url,
          description: "edited",
          oauth: { token_url: tokens.url, client_id: "client-1", client_secret: "client-secret-1" },
        },
      },
    });
    const graph = toolNodeGraph(await toolkit.getTools());
    await callThroughGraph(graph, "remote_echo", { text: "after-reload" });
    expect(requestsSince(start)).toHaveLength(0);
  });
});
