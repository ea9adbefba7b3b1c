/**
 * An OAuth token the server no longer accepts (HTTP 401: revoked, or the server restarted with new keys) before it
 * expires: replaced once, and the refused request sent again with the new one (a 401 comes before the server runs
 * anything); never more than one new token per refusal.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, McpOAuthSchema, OAuthTokenManager, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { findToolCall, rawHeaderValues } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { waitUntil } from "../fixtures/processes";
import { startProxy } from "../fixtures/proxy";
import { startSseFixture } from "../fixtures/sse-server";
import { startTokenFixture } from "../fixtures/token-server";

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function toolkitFor(name: string, server: Record<string, unknown>, now?: () => number): Promise<McpToolkit> {
  const configPath = await writeConfig(await makeTempDir("mcp-oauth-refused-"), { mcpServers: { [name]: server } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), ...(now ? { oauth: { now } } : {}) });
  cleanup.push(() => toolkit.close());
  return toolkit;
}

/** A clock the test moves; starts at an arbitrary fixed instant. */
function fakeClock() {
  let now = 1_700_000_000_000;
  return { now: () => now, advance: (seconds: number) => void (now += seconds * 1000) };
}

/** A token endpoint, a streamable HTTP server behind a proxy (whose `rule` a test sets), and a toolkit using both on a test clock. */
async function oauthBehindProxy() {
  const [tokens, http] = await Promise.all([startTokenFixture(), startHttpFixture({ name: "remote", toolNames: ["echo"] })]);
  cleanup.push(() => tokens.close(), () => http.close());
  const proxy = await startProxy(http.url);
  cleanup.push(() => proxy.close());
  const clock = fakeClock();
  const toolkit = await toolkitFor(
    "remote",
    { type: "http", url: proxy.url("/mcp"), oauth: { token_url: tokens.url, client_id: "client-1", client_secret: "client-secret-1" } },
    clock.now,
  );
  return { tokens, http, proxy, clock, toolkit };
}

/** Every form a header value could be echoed in. */
function forms(secret: string): string[] {
  return [secret, JSON.stringify(secret).slice(1, -1), encodeURIComponent(secret), Buffer.from(secret).toString("base64")];
}

describe("an OAuth token the server stops accepting (HTTP 401), also after it expired the session", () => {
  test("the call that meets the 401 gets a new token and goes through, sent once; the expired call before it is not re-sent", async () => {
    const { tokens, http, proxy, clock, toolkit } = await oauthBehindProxy();
    const revoked = new Set<string>();
    proxy.rule = (r) => {
      const auth = r.headers.authorization;
      // The server checks the token as a session starts: the expired session's call meets its 404 first.
      return r.rpcMethod === "initialize" && typeof auth === "string" && revoked.has(auth)
        ? { status: 401, body: JSON.stringify({ error: "invalid_token", error_description: `token ${auth} was revoked` }) }
        : undefined;
    };
    const graph = toolNodeGraph(await toolkit.getTools());
    expect((await callThroughGraph(graph, "remote_echo", { text: "one" })).content).toBe("one");
    expect(rawHeaderValues(findToolCall(http.requests, "one")!, "authorization")).toEqual(["Bearer access-1"]);

    // A minute later the server restarts with new keys: its sessions are gone and the token it issued no longer counts.
    clock.advance(60);
    revoked.add("Bearer access-1");
    await http.forgetSessions({ streams: "kept" });

    const expired = await callThroughGraph(graph, "remote_echo", { text: "two" });
    expect([expired.status, expired.content]).toEqual([
      "error",
      "MCP tool 'echo' on server 'remote' failed: the server no longer knows this MCP session (HTTP 404: it expired or the " +
        "server restarted). The call was not sent again; a new session serves the next call.",
    ]);
    // Its new session's initialize meets the 401: a new token, and the call goes through, sent once.
    const renewed = await callThroughGraph(graph, "remote_echo", { text: "three" });
    expect([renewed.status, renewed.content]).toEqual(["success", "three"]);
    expect(rawHeaderValues(findToolCall(http.requests, "three")!, "authorization")).toEqual(["Bearer access-2"]);
    expect(tokens.requests).toHaveLength(2);
    // Nothing was sent twice: "two" reached the server once (and is not re-sent), "three" once, with the new token.
    expect(http.requests.filter((r) => findToolCall([r], "two"))).toHaveLength(1);
    expect(http.requests.filter((r) => findToolCall([r], "three"))).toHaveLength(1);
    expect((await callThroughGraph(graph, "remote_echo", { text: "four" })).content).toBe("four");
    expect(tokens.requests).toHaveLength(2);
  });

  test("a 401 on a call in a live session: the call goes through with a new token, and the refused token's session is ended", async () => {
    const { tokens, http, proxy, clock, toolkit } = await oauthBehindProxy();
    const revoked = new Set<string>();
    // The server keeps its sessions but refuses the revoked token on every request that carries it, a DELETE aside.
    proxy.rule = (r) =>
      r.method === "POST" && typeof r.headers.authorization === "string" && revoked.has(r.headers.authorization)
        ? { status: 401, body: JSON.stringify({ error: "invalid_token" }) }
        : undefined;
    const graph = toolNodeGraph(await toolkit.getTools());
    expect((await callThroughGraph(graph, "remote_echo", { text: "one" })).content).toBe("one");
    const refusedSession = findToolCall(http.requests, "one")!.sessionId!;
    expect(http.activeSessionIds()).toContain(refusedSession);

    clock.advance(60);
    revoked.add("Bearer access-1");
    const renewed = await callThroughGraph(graph, "remote_echo", { text: "two" });
    expect([renewed.status, renewed.content]).toEqual(["success", "two"]);
    expect(rawHeaderValues(findToolCall(http.requests, "two")!, "authorization")).toEqual(["Bearer access-2"]);
    expect(tokens.requests).toHaveLength(2);
    // The session the refused token opened serves nobody any more: it is ended, not left to its idle timeout.
    expect(await waitUntil(() => !http.activeSessionIds().includes(refusedSession))).toBe(true);
  });

  test("a new token the server refuses too is not replaced again: the call fails with one clean line, no token in it", async () => {
    const { tokens, http, proxy, clock, toolkit } = await oauthBehindProxy();
    let refusing = false;
    proxy.rule = (r) =>
      refusing && r.rpcMethod === "initialize"
        ? { status: 401, body: JSON.stringify({ error: "invalid_token", error_description: `token ${String(r.headers.authorization)} was revoked` }) }
        : undefined;
    const graph = toolNodeGraph(await toolkit.getTools());
    clock.advance(60);
    refusing = true;
    await http.forgetSessions();
    await callThroughGraph(graph, "remote_echo", { text: "expired" });
    const refused = await callThroughGraph(graph, "remote_echo", { text: "refused" });
    expect(refused.status).toBe("error");
    expect(String(refused.content)).toMatch(/^MCP tool 'echo' on server 'remote' failed: .*invalid_token/);
    expect(String(refused.content)).not.toMatch(/\n|\s{2}at /);
    for (const leaked of [...forms("access-1"), ...forms("access-2")]) expect(JSON.stringify(refused)).not.toContain(leaked);
    // One new token for the refusal, none for the refusal of the new one.
    expect(tokens.requests).toHaveLength(2);
    expect(findToolCall(http.requests, "refused")).toBeUndefined();
  });
});

describe("SSE: an OAuth token the server stops accepting", () => {
  test("a call whose new session is refused (401) gets a new token and goes through", async () => {
    const [tokens, sse] = await Promise.all([startTokenFixture(), startSseFixture({ name: "legacy", toolNames: ["echo"] })]);
    cleanup.push(() => tokens.close(), () => sse.close());
    const proxy = await startProxy(sse.url);
    cleanup.push(() => proxy.close());
    const revoked = new Set<string>();
    proxy.rule = (r) =>
      r.method === "GET" && typeof r.headers.authorization === "string" && revoked.has(r.headers.authorization)
        ? { status: 401, body: "invalid_token", contentType: "text/plain" }
        : undefined;
    const clock = fakeClock();
    const toolkit = await toolkitFor(
      "legacy",
      {
        type: "sse",
        url: proxy.url(new URL(sse.url).pathname),
        oauth: { token_url: tokens.url, client_id: "client-1", client_secret: "client-secret-1" },
        headers_from_context: { headers: { "X-Api-Key": "api_key" } },
      },
      clock.now,
    );
    const graph = toolNodeGraph(await toolkit.getTools());
    const as = (key: string) => ({ context: { secrets: { api_key: key } } });
    expect((await callThroughGraph(graph, "legacy_echo", { text: "one" }, as("key-1"))).content).toBe("one");
    clock.advance(60);
    revoked.add("Bearer access-1");

    // Another user's first call: its session (a header set of its own) starts with the token the server now refuses,
    // and is started again with a new one.
    const renewed = await callThroughGraph(graph, "legacy_echo", { text: "two" }, as("key-2"));
    expect([renewed.status, renewed.content]).toEqual(["success", "two"]);
    expect(tokens.requests).toHaveLength(2);
    expect(sse.requests.filter((r) => findToolCall([r], "two"))).toHaveLength(1);
  });
});

describe("an OAuth token the server refuses at discovery", () => {
  test("is replaced once, and the listing asked again within the same load", async () => {
    const { tokens, http, proxy, clock, toolkit } = await oauthBehindProxy();
    const revoked = new Set<string>();
    proxy.rule = (r) =>
      r.rpcMethod === "initialize" && typeof r.headers.authorization === "string" && revoked.has(r.headers.authorization)
        ? { status: 401, body: JSON.stringify({ error: "invalid_token" }) }
        : undefined;
    expect((await toolkit.getTools()).map((t) => t.name)).toEqual(["remote_echo"]);
    clock.advance(60);
    revoked.add("Bearer access-1");
    await http.forgetSessions();
    await toolkit.reset();
    expect((await toolkit.getTools()).map((t) => t.name)).toEqual(["remote_echo"]);
    expect(toolkit.discoveryFailures.size).toBe(0);
    expect(tokens.requests).toHaveLength(2);
    expect(rawHeaderValues(http.requests.filter((r) => r.rpcMethods?.includes("tools/list")).at(-1)!, "authorization")).toEqual(["Bearer access-2"]);
  });

  test("a load whose new token is refused too fails, with one token asked for the refusal, however old the tokens look", async () => {
    const { tokens, http, proxy, clock, toolkit } = await oauthBehindProxy();
    let refusing = false;
    proxy.rule = (r) => {
      if (!refusing || r.rpcMethod !== "initialize") return undefined;
      // Each refusal comes a minute after the token was issued: only the one-renewal bound stops a loop.
      clock.advance(60);
      return { status: 401, body: JSON.stringify({ error: "invalid_token" }) };
    };
    expect((await toolkit.getTools()).map((t) => t.name)).toEqual(["remote_echo"]);
    refusing = true;
    await http.forgetSessions();
    await toolkit.reset();
    expect(await toolkit.getTools()).toEqual([]);
    expect(toolkit.discoveryFailures.get("remote")).toContain("invalid_token");
    expect(tokens.requests).toHaveLength(2);
  });

  test("a late 401 for a token already replaced, or one for a token just fetched, costs no token request", async () => {
    const tokens = await startTokenFixture();
    cleanup.push(() => tokens.close());
    const clock = fakeClock();
    const manager = new OAuthTokenManager({ now: clock.now });
    const config = McpOAuthSchema.parse({ token_url: tokens.url, client_id: "client-1", client_secret: "client-secret-1" });
    expect(await manager.getAuthorizationHeader("srv", config)).toBe("Bearer access-1");
    clock.advance(60);
    manager.rejected("srv", "Bearer access-1");
    expect(await manager.getAuthorizationHeader("srv", config)).toBe("Bearer access-2");
    // A 401 of a call still running with the old token, then one for the new token at once (another header's fault).
    manager.rejected("srv", "Bearer access-1");
    manager.rejected("srv", "Bearer access-2");
    expect(await manager.getAuthorizationHeader("srv", config)).toBe("Bearer access-2");
    expect(tokens.requests).toHaveLength(2);
  });
});
