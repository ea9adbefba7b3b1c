import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { adminTokenAuthorize, createGatewayApp, createMcpToolkit, type GatewayAppOptions, type GatewayUser } from "../../lib";
import { startTestMcpServer, type TestMcpHttpServer } from "../../lib/testing";
import { makeTempDir, writeConfig } from "../fixtures/config";

const SECRETS = ["rt-literal-secret", "alice-literal-secret", "literal-api-key", "nested-secret", "pw-in-list", "resolved-github-token", "hfc-extra-secret"];

/** A config with a secret in every place the API masks, placeholders, a disabled bad server and other top-level keys. */
const ORIGINAL = {
  mcpServers: {
    github: {
      command: "npx",
      args: ["-y", "@modelcontextprotocol/server-github"],
      env: { GITHUB_TOKEN: "$GITHUB_TOKEN", LOG_LEVEL: "debug" },
      x_custom: 1,
    },
    docs: {
      transport: "http",
      url: "https://docs.example.com/mcp",
      headers: { Authorization: "Bearer ${DOCS_TOKEN}", "X-Static": "static" },
      oauth: { token_url: "https://auth.example.com/token", client_id: "id", client_secret: "$OAUTH_SECRET", refresh_token: "rt-literal-secret" },
      user_auth: { header: "X-User-Token", users: { alice: "alice-literal-secret" } },
      headers_from_context: { headers: { "X-Api-Key": "search_api_key" }, api_key: "hfc-extra-secret" },
      apiKey: "literal-api-key",
      nested: { clientSecret: "nested-secret", list: [{ password: "pw-in-list" }, { name: "visible" }] },
      cwd: "./work",
    },
    off: { enabled: false, command: "/bin/sh", args: ["-c", "evil"] },
  },
  mcpInterceptors: ["./interceptors/audit.js:build"],
  customTopLevel: { keep: true },
  skills: { writer: { enabled: true } },
};

const ADMIN: GatewayUser = { userId: "root", admin: true };
const ENV = { GITHUB_TOKEN: "resolved-github-token" };

async function setup(options: Partial<GatewayAppOptions> = {}, config: object = ORIGINAL) {
  const dir = await makeTempDir("gateway-api-");
  const file = await writeConfig(dir, config);
  const resets: number[] = [];
  const app = createGatewayApp({
    configPath: file,
    env: ENV,
    authorize: () => ADMIN,
    toolkit: { reset: async () => void resets.push(Date.now()) },
    ...options,
  });
  const call = async (method: string, route: string, body?: unknown) => {
    const init: RequestInit = { method, headers: { "content-type": "application/json" } };
    if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
    const response = await app.request(route, init);
    const text = await response.text();
    return { status: response.status, text, json: text ? JSON.parse(text) : undefined };
  };
  return { dir, file, app, call, resets };
}

const readJson = async (file: string) => JSON.parse(await readFile(file, "utf8"));

describe("GET /api/mcp/config", () => {
  test("masks every env/headers value, user_auth.users values, OAuth secrets and sensitive keys at any depth; shows the rest", async () => {
    const { call } = await setup();
    const { status, json, text } = await call("GET", "/api/mcp/config");
    expect(status).toBe(200);
    const { github, docs, off } = json.mcp_servers;
    expect(github.env).toEqual({ GITHUB_TOKEN: "***", LOG_LEVEL: "***" });
    expect(github.args).toEqual(["-y", "@modelcontextprotocol/server-github"]);
    expect(github.x_custom).toBe(1);
    expect(docs.headers).toEqual({ Authorization: "***", "X-Static": "***" });
    expect(docs.oauth).toEqual({ token_url: "https://auth.example.com/token", client_id: "id", client_secret: null, refresh_token: null });
    expect(docs.user_auth).toEqual({ header: "X-User-Token", users: { alice: "***" } });
    expect(docs.headers_from_context).toEqual({ headers: { "X-Api-Key": "search_api_key" }, api_key: "***" });
    expect(docs.apiKey).toBe("***");
    expect(docs.nested).toEqual({ clientSecret: "***", list: [{ password: "***" }, { name: "visible" }] });
    expect(docs.cwd).toBe("./work");
    expect(docs.transport).toBe("http");
    expect(docs.type).toBeUndefined(); // the raw entry, not the schema's output
    expect(off).toEqual({ enabled: false, command: "/bin/sh", args: ["-c", "evil"] });
    for (const secret of [...SECRETS, "$GITHUB_TOKEN", "${DOCS_TOKEN}", "$OAUTH_SECRET"]) expect(text).not.toContain(secret);
  });

  test("a config file that is not valid: the answer names the problem, never the file's local path", async () => {
    const { call, dir, file } = await setup();
    await writeFile(file, '{"mcpServers": {');
    const broken = await call("GET", "/api/mcp/config");
    expect(broken.status).toBe(500);
    expect(broken.json.detail).toMatch(/^Invalid extensions config:/);
    expect(broken.text).not.toContain(dir);
    await writeFile(file, "[1]");
    const invalid = await call("GET", "/api/mcp/config");
    expect(invalid.status).toBe(500);
    expect(invalid.text).not.toContain(dir);
  });

  test("a file that is not UTF-8 is refused, never rewritten with its bytes replaced", async () => {
    const { call, app, file } = await setup();
    const latin1 = Buffer.concat([Buffer.from('{"mcpServers": {"a": {"command": "npx", "env": {"PASS": "caf'), Buffer.from([0xe9]), Buffer.from('"}}, "b": {"command": "npx"}}}')]);
    await writeFile(file, latin1);
    const read = await call("GET", "/api/mcp/config");
    expect(read.status).toBe(500);
    expect(read.json.detail).toContain("invalid UTF-8 at line 1 column 61 (position 60)");
    expect((await call("PATCH", "/api/mcp/config", { server_name: "b", enabled: false })).status).toBe(500);
    expect((await readFile(file)).equals(latin1)).toBe(true);
    const body = Buffer.concat([Buffer.from('{"mcp_servers": {"x": {"command": "npx", "args": ["'), Buffer.from([0xff]), Buffer.from('"]}}}')]);
    const put = await app.request("/api/mcp/config", { method: "PUT", body, headers: { "content-type": "application/json" } });
    expect(put.status).toBe(400);
    expect(((await put.json()) as { detail: string }).detail).toBe("request body is not valid JSON: invalid UTF-8 at line 1 column 52");
    expect((await readFile(file)).equals(latin1)).toBe(true);
  });

  test("no config file: an empty server list", async () => {
    const dir = await makeTempDir("gateway-none-");
    const app = createGatewayApp({ cwd: dir, env: {}, authorize: () => ADMIN });
    const response = await app.request("/api/mcp/config");
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ mcp_servers: {} });
  });
});

describe("PUT /api/mcp/config", () => {
  test("the masked body PUT back leaves the file's servers unchanged ($VAR placeholders intact) and every other top-level key kept", async () => {
    const { call, file, resets } = await setup();
    const masked = (await call("GET", "/api/mcp/config")).json;
    const put = await call("PUT", "/api/mcp/config", masked);
    expect(put.status).toBe(200);
    expect(put.json).toEqual(masked);
    expect(await readJson(file)).toEqual(ORIGINAL);
    expect((await readJson(file)).mcpServers.github.env.GITHUB_TOKEN).toBe("$GITHUB_TOKEN");
    expect(resets.length).toBe(1);
    for (const secret of SECRETS) expect(put.text).not.toContain(secret);
  });

  test("'***' where nothing is stored is a 400 naming the key; the file is untouched", async () => {
    const { call, file } = await setup();
    const before = await readFile(file);
    const masked = (await call("GET", "/api/mcp/config")).json;
    const cases: [(body: { mcp_servers: Record<string, Record<string, unknown>> }) => void, string][] = [
      [(b) => void (b.mcp_servers.github.env = { ...(b.mcp_servers.github.env as object), NEW_KEY: "***" }), "mcp_servers.github.env.NEW_KEY"],
      [(b) => void (b.mcp_servers.fresh = { url: "https://x.example/mcp", headers: { Authorization: "***" } }), "mcp_servers.fresh.headers.Authorization"],
      [(b) => void ((b.mcp_servers.docs.user_auth as { users: Record<string, string> }).users.bob = "***"), "mcp_servers.docs.user_auth.users.bob"],
      [(b) => void (b.mcp_servers.docs.password = "***"), "mcp_servers.docs.password"],
      [(b) => void (b.mcp_servers.github.env = { toString: "***" }), "mcp_servers.github.env.toString"],
      [(b) => void (b.mcp_servers.docs.constructor_token = "***"), "mcp_servers.docs.constructor_token"],
      [(b) => void ((b.mcp_servers.github as Record<string, unknown>).oauth = { token_url: "https://t", client_secret: "***" }), "mcp_servers.github.oauth.client_secret"],
    ];
    for (const [edit, field] of cases) {
      const body = structuredClone(masked);
      edit(body);
      const put = await call("PUT", "/api/mcp/config", body);
      expect(put.status).toBe(400);
      expect(put.json.detail).toContain(field);
      expect(put.json.detail).toContain("'***'");
    }
    expect((await readFile(file)).equals(before)).toBe(true);
  });

  test("'***' in a list restores by position only while the list keeps its length; otherwise it is a 400", async () => {
    const accounts = [
      { name: "alice", token: "alice-secret" },
      { name: "bob", token: "bob-secret" },
    ];
    const { call, file } = await setup({}, { mcpServers: { s: { url: "https://s.example/mcp", accounts } } });
    const masked = (await call("GET", "/api/mcp/config")).json;
    expect(masked.mcp_servers.s.accounts).toEqual([{ name: "alice", token: "***" }, { name: "bob", token: "***" }]);
    // The same list back: each entry keeps its own secret.
    expect((await call("PUT", "/api/mcp/config", masked)).status).toBe(200);
    expect((await readJson(file)).mcpServers.s.accounts).toEqual(accounts);
    // Alice removed, bob kept as shown: his "***" would have taken alice's secret by position.
    const before = await readFile(file);
    const body = structuredClone(masked);
    body.mcp_servers.s.accounts = [body.mcp_servers.s.accounts[1]];
    const put = await call("PUT", "/api/mcp/config", body);
    expect(put.status).toBe(400);
    expect(put.json.detail).toContain("mcp_servers.s.accounts[0].token");
    expect((await readFile(file)).equals(before)).toBe(true);
  });

  test("a full replace: omitted servers are dropped, new values written, OAuth '' clears a secret and null keeps it", async () => {
    const { call, file } = await setup();
    const masked = (await call("GET", "/api/mcp/config")).json;
    const body = {
      mcp_servers: {
        docs: { ...masked.mcp_servers.docs, oauth: { ...masked.mcp_servers.docs.oauth, refresh_token: "" }, headers: { Authorization: "***", "X-New": "v" } },
        uv: { command: "uvx", args: ["mcp-server-fetch"], env: { TOKEN: "${FETCH_TOKEN}" } },
      },
    };
    expect((await call("PUT", "/api/mcp/config", body)).status).toBe(200);
    const written = await readJson(file);
    expect(Object.keys(written.mcpServers)).toEqual(["docs", "uv"]);
    expect(written.mcpServers.docs.headers).toEqual({ Authorization: "Bearer ${DOCS_TOKEN}", "X-New": "v" });
    expect(written.mcpServers.docs.oauth.client_secret).toBe("$OAUTH_SECRET");
    expect(written.mcpServers.docs.oauth.refresh_token).toBeNull();
    expect(written.mcpServers.uv.env).toEqual({ TOKEN: "${FETCH_TOKEN}" });
    expect(written.customTopLevel).toEqual({ keep: true });
    expect(written.mcpInterceptors).toEqual(ORIGINAL.mcpInterceptors);
  });

  test("an invalid body is a 400 naming the field, never the value; the file is untouched", async () => {
    const { call, file } = await setup();
    const before = await readFile(file);
    const bad = await call("PUT", "/api/mcp/config", { mcp_servers: { github: { command: "npx", args: ["-y", 42], session_init_timeout: "secret-ish-value" } } });
    expect(bad.status).toBe(400);
    expect(bad.json.detail).toContain("mcp_servers.github.args[1]");
    expect(bad.json.detail).toContain("mcp_servers.github.session_init_timeout");
    expect(bad.text).not.toContain("secret-ish-value");
    const notJson = await call("PUT", "/api/mcp/config", '{"mcp_servers": {"x": "SECRET-IN-BROKEN-JSON"');
    expect(notJson.status).toBe(400);
    expect(notJson.json.detail).toMatch(/^request body is not valid JSON/);
    expect(notJson.text).not.toContain("SECRET-IN-BROKEN-JSON");
    expect((await call("PUT", "/api/mcp/config", { servers: {} })).status).toBe(400);
    expect((await call("PUT", "/api/mcp/config", [])).status).toBe(400);
    expect((await readFile(file)).equals(before)).toBe(true);
  });

  test("a body above maxBodyBytes is a 413, with or without a declared length; nothing is written", async () => {
    const { app, file } = await setup({ maxBodyBytes: 200 });
    const before = await readFile(file);
    const big = JSON.stringify({ mcp_servers: { a: { url: `https://x.example/${"p".repeat(400)}` } } });
    const declared = await app.request("/api/mcp/config", { method: "PUT", body: big, headers: { "content-length": String(big.length) } });
    expect(declared.status).toBe(413);
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(big));
        controller.close();
      },
    });
    const streamed = await app.request("/api/mcp/config", { method: "PUT", body: stream, duplex: "half" } as RequestInit);
    expect(streamed.status).toBe(413);
    expect((await readFile(file)).equals(before)).toBe(true);
  });

  test("every enabled stdio server is screened by the launch policy, as written and as its $VARs resolve here", async () => {
    const { call, file } = await setup({ env: { ...ENV, HIDDEN_FLAG: "-c" } });
    const before = await readFile(file);
    const refused = [
      { command: "bash", args: ["-c", "id"] },
      { command: "npx", args: ["-p", "pkg", "-c", "id"] },
      { command: "npx", args: ["-y", "pkg"], env: { node_options: "--require x" } },
      { command: "npx", args: ["$HIDDEN_FLAG", "id", "pkg"] },
      { command: "npx -y", args: ["pkg"] },
    ];
    for (const server of refused) {
      const put = await call("PUT", "/api/mcp/config", { mcp_servers: { bad: server } });
      expect(put.status).toBe(400);
      expect(put.json.detail).toMatch(/^MCP server 'bad' /);
    }
    const allowed = { enabled: false, command: "bash", args: ["-c", "id"] };
    expect((await call("PUT", "/api/mcp/config", { mcp_servers: { later: allowed, remote: { url: "https://x.example/mcp", command: "bash" , type: "http" } } })).status).toBe(200);
    expect(before.equals(await readFile(file))).toBe(false);
  });
});

describe("PATCH /api/mcp/config", () => {
  test("toggles one server's `enabled` only; 404 for an unknown server; validates only when enabling", async () => {
    const { call, file, resets } = await setup();
    const disable = await call("PATCH", "/api/mcp/config", { server_name: "docs", enabled: false });
    expect(disable.status).toBe(200);
    const written = await readJson(file);
    expect(written.mcpServers.docs).toEqual({ ...ORIGINAL.mcpServers.docs, enabled: false });
    expect(written.mcpServers.docs.type).toBeUndefined();
    expect(written.mcpServers.github).toEqual(ORIGINAL.mcpServers.github);
    expect(written.customTopLevel).toEqual({ keep: true });
    expect(resets.length).toBe(1);

    const missing = await call("PATCH", "/api/mcp/config", { server_name: "ghost", enabled: true });
    expect(missing.status).toBe(404);
    expect(missing.json.detail).toBe("MCP server 'ghost' not found");
    expect((await call("PATCH", "/api/mcp/config", { server_name: "__proto__", enabled: true })).status).toBe(404);
    expect((await call("PATCH", "/api/mcp/config", { server_name: "", enabled: true })).status).toBe(400);
    expect((await call("PATCH", "/api/mcp/config", { server_name: "docs", enabled: "yes" })).status).toBe(400);

    const before = await readFile(file);
    const enableBad = await call("PATCH", "/api/mcp/config", { server_name: "off", enabled: true });
    expect(enableBad.status).toBe(400);
    expect(enableBad.json.detail).toContain("MCP server 'off'");
    expect((await readFile(file)).equals(before)).toBe(true);
    expect((await call("PATCH", "/api/mcp/config", { server_name: "off", enabled: false })).status).toBe(200);
    expect(resets.length).toBe(2);
  });

  test("PATCH enables an entry whose numbers and booleans the file writes as strings, as the loader reads them", async () => {
    const { call, file } = await setup({}, { mcpServers: { lax: { enabled: "false", command: "npx", args: ["-y", "pkg"], session_init_timeout: "30" } } });
    expect((await call("PATCH", "/api/mcp/config", { server_name: "lax", enabled: true })).status).toBe(200);
    expect((await readJson(file)).mcpServers.lax).toEqual({ enabled: true, command: "npx", args: ["-y", "pkg"], session_init_timeout: "30" });
  });

  test("$VAR in a number or boolean field is judged as the loader reads it: resolved here, and not at all when unset", async () => {
    const server = { command: "npx", args: ["-y", "pkg"], session_init_timeout: "$GH_TIMEOUT", enabled: "${GH_ON}" };
    const env = { GH_TIMEOUT: "30", GH_ON: "true" };
    const { call, file } = await setup({ env }, { mcpServers: { github: server } });
    const body = (await call("GET", "/api/mcp/config")).json;
    expect((await call("PUT", "/api/mcp/config", body)).status).toBe(200);
    expect((await call("PATCH", "/api/mcp/config", { server_name: "github", enabled: true })).status).toBe(200);
    expect((await readJson(file)).mcpServers.github).toEqual({ ...server, enabled: true });
    // Unset here: the loader would not start it, so its settings cannot be judged; the rest still is.
    const unset = await setup({ env: {} }, { mcpServers: { github: server } });
    expect((await unset.call("PUT", "/api/mcp/config", body)).status).toBe(200);
    const badArgs = await unset.call("PUT", "/api/mcp/config", { mcp_servers: { github: { ...server, args: "-y" } } });
    expect(badArgs.status).toBe(400);
    // Set to what is not a number: a 400 naming the field, not the value.
    const wrong = await setup({ env: { GH_TIMEOUT: "soon-secret", GH_ON: "true" } }, { mcpServers: { github: server } });
    const refused = await wrong.call("PUT", "/api/mcp/config", body);
    expect(refused.status).toBe(400);
    expect(refused.json.detail).toContain("mcp_servers.github.session_init_timeout");
    expect(refused.text).not.toContain("soon-secret");
  });

  test("enabling a server the schema refuses is a 400 naming the field; no file is a 404", async () => {
    const { call } = await setup({}, { mcpServers: { broken: { enabled: false, command: "npx", args: ["-y", "pkg"], session_init_timeout: -1 } } });
    expect((await call("PATCH", "/api/mcp/config", { server_name: "broken", enabled: false })).status).toBe(200);
    const response = await call("PATCH", "/api/mcp/config", { server_name: "broken", enabled: true });
    expect(response.status).toBe(400);
    expect(response.json.detail).toContain("mcpServers.broken.session_init_timeout");
    const dir = await makeTempDir("gateway-none-");
    const app = createGatewayApp({ cwd: dir, env: {}, authorize: () => ADMIN });
    const none = await app.request("/api/mcp/config", { method: "PATCH", body: JSON.stringify({ server_name: "x", enabled: true }) });
    expect(none.status).toBe(404);
    const explicit = createGatewayApp({ configPath: path.join(dir, "sub", "x.json"), env: {}, authorize: () => ADMIN });
    const missing = await explicit.request("/api/mcp/config", { method: "PATCH", body: JSON.stringify({ server_name: "x", enabled: false }) });
    expect(missing.status).toBe(404);
    expect(await readdir(dir)).toEqual([]);
  });
});

describe("creating the file", () => {
  test("a PUT without a file creates the explicit path with mode 0600", async () => {
    const dir = await makeTempDir("gateway-create-");
    const file = path.join(dir, "sub", "mcp.json");
    const app = createGatewayApp({ configPath: file, env: {}, authorize: () => ADMIN });
    const response = await app.request("/api/mcp/config", { method: "PUT", body: JSON.stringify({ mcp_servers: { a: { url: "https://x.example/mcp" } } }) });
    expect(response.status).toBe(200);
    expect(await readJson(file)).toEqual({ mcpServers: { a: { url: "https://x.example/mcp" } } });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });
});

describe("authorization", () => {
  const routes: [string, string, unknown?][] = [
    ["GET", "/api/mcp/config"],
    ["PUT", "/api/mcp/config", { mcp_servers: {} }],
    ["PATCH", "/api/mcp/config", { server_name: "docs", enabled: false }],
    ["POST", "/api/mcp/cache/reset"],
  ];

  test("without an authorize hook every config endpoint answers 403 and nothing is written or reset", async () => {
    const { call, file, resets } = await setup({ authorize: undefined });
    const before = await readFile(file);
    for (const [method, route, body] of routes) expect((await call(method, route, body)).status).toBe(403);
    expect((await readFile(file)).equals(before)).toBe(true);
    expect(resets).toEqual([]);
  });

  test("a non-admin gets 403, an unauthenticated caller 401", async () => {
    const nonAdmin = await setup({ authorize: () => ({ userId: "bob", admin: false }) });
    for (const [method, route, body] of routes) {
      const response = await nonAdmin.call(method, route, body);
      expect(response.status).toBe(403);
      expect(response.json.detail).toBe("Admin privileges required to manage MCP configuration.");
    }
    const anonymous = await setup({ authorize: async () => null });
    for (const [method, route, body] of routes) expect((await anonymous.call(method, route, body)).status).toBe(401);
    expect(nonAdmin.resets.length + anonymous.resets.length).toBe(0);
  });

  test("adminTokenAuthorize: the bearer token of MCP_HARNESS_ADMIN_TOKEN is the admin; without the variable the endpoints are off", async () => {
    expect(adminTokenAuthorize({})).toBeUndefined();
    const { app } = await setup({ authorize: adminTokenAuthorize({ MCP_HARNESS_ADMIN_TOKEN: "tok-123" }) });
    expect((await app.request("/api/mcp/config", { headers: { authorization: "Bearer tok-123" } })).status).toBe(200);
    expect((await app.request("/api/mcp/config", { headers: { authorization: "Bearer tok-1234" } })).status).toBe(401);
    expect((await app.request("/api/mcp/config", { headers: { authorization: "tok-123" } })).status).toBe(401);
    expect((await app.request("/api/mcp/config")).status).toBe(401);
  });
});

describe("POST /api/mcp/cache/reset and the toolkit", () => {
  let one: TestMcpHttpServer;
  let two: TestMcpHttpServer;
  beforeAll(async () => {
    one = await startTestMcpServer({ name: "one" });
    two = await startTestMcpServer({ name: "two" });
  });
  afterAll(async () => {
    await one.close();
    await two.close();
  });

  test("reset answers as the original does; a PATCH through the API changes the tools of the next getTools()", async () => {
    const dir = await makeTempDir("gateway-toolkit-");
    const file = await writeConfig(dir, { mcpServers: { one: one.config, two: two.config } });
    const toolkit = createMcpToolkit({ configPath: file });
    try {
      const app = createGatewayApp({ configPath: file, env: {}, authorize: () => ADMIN, toolkit });
      const names = async () => (await toolkit.getTools()).map((t) => t.name).sort();
      expect(await names()).toEqual(["one_add", "one_echo", "one_fail", "one_whoami", "two_add", "two_echo", "two_fail", "two_whoami"]);
      const reset = await app.request("/api/mcp/cache/reset", { method: "POST" });
      expect(await reset.json()).toEqual({ success: true, message: "MCP tools cache reset. Tools will reload on next use." });
      const patch = await app.request("/api/mcp/config", { method: "PATCH", body: JSON.stringify({ server_name: "two", enabled: false }) });
      expect(patch.status).toBe(200);
      expect(await names()).toEqual(["one_add", "one_echo", "one_fail", "one_whoami"]);
    } finally {
      await toolkit.close();
    }
  });
});
