import { afterEach, beforeEach, describe, expect, it } from "@jest/globals";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import {
  ConfigValidationError,
  ExtensionsConfigSchema,
  getConfigSignature,
  loadExtensionsConfig,
  type LoadedExtensionsConfig,
} from "../../lib/config";
import { RecordingLogger } from "../../lib/shared/logger";

const FIXTURES = path.join(__dirname, "..", "fixtures", "configs");
const EXAMPLE = path.join(__dirname, "..", "..", "extensions_config.example.json");
const SECRET = "ghp_SUPERSECRETVALUE0123456789";

let dir: string;
let logger: RecordingLogger;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "cfg-load-"));
  logger = new RecordingLogger();
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(config: unknown, env: NodeJS.ProcessEnv = {}): Promise<LoadedExtensionsConfig> {
  const file = path.join(dir, "extensions_config.json");
  await writeFile(file, JSON.stringify(config, null, 2));
  return loadExtensionsConfig({ configPath: file, env, logger });
}

async function loadError(config: unknown, env: NodeJS.ProcessEnv = {}): Promise<ConfigValidationError> {
  const error = await load(config, env).then(
    () => {
      throw new Error("expected a validation error");
    },
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(ConfigValidationError);
  return error as ConfigValidationError;
}

describe("loadExtensionsConfig", () => {
  it("returns the path, the signature of the parsed bytes and the raw JSON", async () => {
    const loaded = await load({ mcpServers: { a: { command: "npx", env: { T: "$TOKEN" } } } }, { TOKEN: "v" });
    expect(loaded.path).toBe(path.join(dir, "extensions_config.json"));
    expect(loaded.signature).toEqual(await getConfigSignature(loaded.path!));
    expect(loaded.raw).toEqual({ mcpServers: { a: { command: "npx", env: { T: "$TOKEN" } } } });
    expect(loaded.config.mcpServers.a?.env).toEqual({ T: "v" });
    expect(loaded.config.mcpServers.a?.type).toBe("stdio");
    expect(loaded.config.mcpServers.a?.session_init_timeout).toBe(60);
  });

  describe("validation errors", () => {
    it("name the JSON path and never the value", async () => {
      const error = await loadError({
        mcpServers: { github: { command: "npx", args: ["-y", [SECRET]], tool_call_timeout: SECRET } },
      });
      expect(error.message).toContain("mcpServers.github.args[1]: Invalid input: expected string, received array");
      expect(error.message).toContain("mcpServers.github.tool_call_timeout: Invalid input: expected number");
      expect(error.issues.map((i) => i.path)).toEqual(
        expect.arrayContaining(["mcpServers.github.args[1]", "mcpServers.github.tool_call_timeout"]),
      );
      expect(error.message).not.toContain(SECRET);
      expect(JSON.stringify(error.issues)).not.toContain(SECRET);
    });

    it("quote server names that are not identifiers", async () => {
      const error = await loadError({ mcpServers: { "my server": { url: 42 } } });
      expect(error.message).toContain('mcpServers["my server"].url');
    });

    it("show unrecognized keys and key paths escaped, bounded, and at most five keys per issue", async () => {
      const keys = ["line\nbreak", "\u001b[2J\u202e", "k".repeat(1000), "a", "b", "c", "d"];
      const error = await loadError({
        mcpServers: {
          a: { command: "npx", routing: Object.fromEntries(keys.map((key) => [key, 1])) },
          "evil\n  mcpServers.x: forged": { url: 42 },
        },
      });
      expect(error.issues).toEqual([
        {
          path: "mcpServers.a.routing",
          message: `Unrecognized keys: "line\\nbreak", "\\u001b[2J\\u202e", "${"k".repeat(64)}…", "a", "b" and 2 more`,
        },
        { path: 'mcpServers["evil\\n  mcpServers.x: forged"].url', message: expect.stringMatching(/^Invalid input/) },
      ]);
      // one line per issue: no key can start a line of its own
      expect(error.message.split("\n")).toHaveLength(3);
      expect(error.message).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f\u202e]/);
      const one = await loadError({ mcpServers: { a: { command: "npx", routing: { weight: 3 } } } });
      expect(one.issues).toEqual([{ path: "mcpServers.a.routing", message: 'Unrecognized key: "weight"' }]);
    });

    it("do not echo an unsupported transport or an invalid enum value", async () => {
      const error = await loadError({
        mcpServers: {
          a: { type: SECRET, url: "https://x" },
          b: { url: "https://x", oauth: { token_url: "https://t", grant_type: SECRET } },
        },
      });
      expect(error.message).toContain("mcpServers.a.type: unsupported transport type");
      expect(error.message).toContain("mcpServers.b.oauth.grant_type");
      expect(error.message).not.toContain(SECRET);
    });
  });

  it("a disabled server with a transport this version does not know is kept, and the others load", async () => {
    const loaded = await load({ mcpServers: { old: { enabled: false, type: "websocket", url: "ws://x" }, good: { command: "npx" } } });
    expect(Object.keys(loaded.config.mcpServers)).toEqual(["old", "good"]);
    expect(loaded.config.mcpServers.old?.enabled).toBe(false);
    expect(loaded.raw).toMatchObject({ mcpServers: { old: { type: "websocket" } } });
  });

  it("resolves $VARs in mcpInterceptors; an unset one stops the load (fail closed), naming the variable", async () => {
    const loaded = await load({ mcpInterceptors: ["$PLUG", "./${DIR}/x.js:build"], mcpServers: {} }, { PLUG: "./auth.js:build", DIR: "lib" });
    expect(loaded.config.mcpInterceptors).toEqual(["./auth.js:build", "./lib/x.js:build"]);
    expect(loaded.raw.mcpInterceptors).toEqual(["$PLUG", "./${DIR}/x.js:build"]);
    const error = await loadError({ mcpInterceptors: "${PLUG_MISSING}", mcpServers: { ok: { command: "npx" } } });
    expect(error.issues).toEqual([{ path: "mcpInterceptors", message: "references unset environment variable(s) PLUG_MISSING" }]);
  });

  it("reads numbers and booleans written as strings, or given by $VARs, as the Python original does; they are not secrets", async () => {
    const mcpTasks = { enabled: "true", poll_interval_seconds: "2.5" };
    const servers = {
      a: {
        url: "https://x/mcp",
        enabled: "Yes",
        tool_name_prefix: "false",
        session_init_timeout: " 30 ",
        tool_call_timeout: "$TIMEOUT",
        routing: { mode: "prefer", priority: "$PRIORITY" },
        tools: { t: { routing: { priority: "120" } } },
        oauth: { token_url: "https://t", refresh_skew_seconds: "$SKEW", enabled: "off" },
      },
      off: { enabled: "false", command: "npx", args: ["$UNSET_BUT_DISABLED"] },
    };
    const loaded = await load({ mcpTasks, mcpServers: servers }, { TIMEOUT: "90", PRIORITY: "7", SKEW: "5" });
    const a = loaded.config.mcpServers.a!;
    expect([a.enabled, a.tool_name_prefix, a.session_init_timeout, a.tool_call_timeout]).toEqual([true, false, 30, 90]);
    expect([a.routing.priority, a.tools.t?.routing?.priority, a.oauth?.refresh_skew_seconds, a.oauth?.enabled]).toEqual([7, 100, 5, false]);
    expect(loaded.config.mcpServers.off?.enabled).toBe(false);
    expect([loaded.config.mcpTasks.enabled, loaded.config.mcpTasks.poll_interval_seconds]).toEqual([true, 2.5]);
    expect(loaded.skipped).toEqual([]);
    expect(loaded.envSecrets).toEqual({});
    expect(loaded.raw).toMatchObject({ mcpServers: { a: { tool_call_timeout: "$TIMEOUT", enabled: "Yes" } } });
    const error = await loadError({ mcpServers: { ...servers, bad: { command: "npx", session_init_timeout: "soon" } } }, { TIMEOUT: "90", PRIORITY: "7", SKEW: "5" });
    expect(error.issues).toEqual([{ path: "mcpServers.bad.session_init_timeout", message: "Invalid input: expected number, received string" }]);
  });

  describe("transport", () => {
    it("accepts `transport` as an alias of `type`; `type` wins when both are set", async () => {
      const loaded = await load({
        mcpServers: {
          viaAlias: { transport: "sse", url: "https://a/sse" },
          streamable: { transport: "streamable_http", url: "https://a/mcp" },
          both: { type: "http", transport: "sse", url: "https://a/mcp" },
          blankType: { type: "", transport: "sse", url: "https://a/sse" },
        },
      });
      expect(loaded.config.mcpServers.viaAlias?.type).toBe("sse");
      expect(loaded.config.mcpServers.streamable?.type).toBe("http");
      expect(loaded.config.mcpServers.both?.type).toBe("http");
      expect(loaded.config.mcpServers.blankType?.type).toBe("sse");
    });

    it("skips enabled servers that lack the command or url their transport needs", async () => {
      const loaded = await load({
        mcpServers: {
          noCommand: { type: "stdio", args: ["x"] },
          noUrl: { type: "http" },
          sseNoUrl: { transport: "sse", url: "" },
          disabledNoUrl: { enabled: false, type: "http" },
          ok: { command: "npx" },
        },
      });
      expect(Object.keys(loaded.config.mcpServers).sort()).toEqual(["disabledNoUrl", "ok"]);
      expect(loaded.skipped).toEqual([
        { server: "noCommand", transport: "stdio", reason: "MCP server 'noCommand' with stdio transport requires 'command' field" },
        { server: "noUrl", transport: "http", reason: "MCP server 'noUrl' with http transport requires 'url' field" },
        { server: "sseNoUrl", transport: "sse", reason: "MCP server 'sseNoUrl' with sse transport requires 'url' field" },
      ]);
      expect(logger.messages("warn")).toEqual(loaded.skipped.map((s) => s.reason));
    });
  });

  it("reports an enabled server named __proto__ as skipped instead of losing it", async () => {
    const file = path.join(dir, "extensions_config.json");
    await writeFile(file, '{"mcpServers": {"__proto__": {"command": "npx"}, "ok": {"command": "npx"}}}');
    const loaded = await loadExtensionsConfig({ configPath: file, env: {}, logger });
    expect(Object.keys(loaded.config.mcpServers)).toEqual(["ok"]);
    expect(loaded.skipped).toEqual([{ server: "__proto__", transport: "stdio", reason: "MCP server name '__proto__' is reserved; not starting it" }]);
    expect(logger.messages("warn")).toEqual(["MCP server name '__proto__' is reserved; not starting it"]);
  });

  describe("routing", () => {
    it("clamps priorities outside 0..100 with a warning naming the JSON path", async () => {
      const loaded = await load({
        mcpServers: {
          high: { command: "npx", routing: { mode: "prefer", priority: 150, keywords: ["a"] } },
          low: { command: "npx", routing: { priority: -5 }, tools: { query: { routing: { priority: 101 } } } },
        },
      });
      expect(loaded.config.mcpServers.high?.routing).toEqual({ mode: "prefer", priority: 100, keywords: ["a"] });
      expect(loaded.config.mcpServers.low?.routing.priority).toBe(0);
      expect(loaded.config.mcpServers.low?.tools.query?.routing).toEqual({ priority: 100 });
      expect(loaded.warnings).toEqual([
        "MCP routing priority 150 for mcpServers.high.routing.priority is above 100; clamping to 100.",
        "MCP routing priority -5 for mcpServers.low.routing.priority is below 0; clamping to 0.",
        "MCP routing priority 101 for mcpServers.low.tools.query.routing.priority is above 100; clamping to 100.",
      ]);
      expect(logger.messages("warn")).toEqual(loaded.warnings);
    });

    it("keeps a per-tool override to the fields it sets", async () => {
      const loaded = await load({
        mcpServers: { a: { command: "npx", tools: { q: { routing: { keywords: ["k"] }, note: "kept" } } } },
      });
      expect(loaded.config.mcpServers.a?.tools.q).toEqual({ routing: { keywords: ["k"] }, note: "kept" });
    });

    it("rejects mode 'require' and unknown routing keys", async () => {
      const mode = await loadError({ mcpServers: { a: { command: "npx", routing: { mode: "require" } } } });
      expect(mode.message).toContain("mcpServers.a.routing.mode");
      const key = await loadError({ mcpServers: { a: { command: "npx", routing: { weight: 3 } } } });
      expect(key.message).toContain("mcpServers.a.routing");
      expect(key.message).toContain("weight");
      const tool = await loadError({
        mcpServers: { a: { command: "npx", tools: { q: { routing: { mode: "require" } } } } },
      });
      expect(tool.message).toContain("mcpServers.a.tools.q.routing.mode");
    });
  });

  describe("$VAR references", () => {
    it("skips an enabled server with an unset variable while the others load", async () => {
      const env = { PRESENT: SECRET };
      const loaded = await load(
        {
          mcpServers: {
            broken: {
              type: "http",
              url: "https://x/mcp",
              headers: { Authorization: "Bearer ${MISSING_TOKEN}", "X-Other": "$OTHER_MISSING", "X-Ok": "$PRESENT" },
            },
            fine: { command: "npx", env: { TOKEN: "$PRESENT" }, args: ["--auth", "Bearer ${PRESENT}"] },
          },
        },
        env,
      );
      expect(Object.keys(loaded.config.mcpServers)).toEqual(["fine"]);
      expect(loaded.config.mcpServers.fine?.env).toEqual({ TOKEN: SECRET });
      expect(loaded.config.mcpServers.fine?.args).toEqual(["--auth", `Bearer ${SECRET}`]);
      const reason =
        "MCP server 'broken' references unset environment variable(s) MISSING_TOKEN, OTHER_MISSING; not starting it";
      expect(loaded.skipped).toEqual([
        { server: "broken", transport: "http", reason, missingVariables: ["MISSING_TOKEN", "OTHER_MISSING"] },
      ]);
      expect(logger.messages("warn")).toEqual([reason]);
      expect(JSON.stringify(logger.lines)).not.toContain(SECRET);
      expect(loaded.raw).toEqual(JSON.parse(await readFile(loaded.path!, "utf8")));
    });

    it("does not resolve a disabled server", async () => {
      const loaded = await load({
        mcpServers: { off: { enabled: false, command: "npx", env: { TOKEN: "$NOT_SET_ANYWHERE" } } },
      });
      expect(loaded.skipped).toEqual([]);
      expect(loaded.config.mcpServers.off?.env).toEqual({ TOKEN: "$NOT_SET_ANYWHERE" });
      expect(loaded.config.mcpServers.off?.enabled).toBe(false);
    });

    describe("in a URL's user info", () => {
      const reason = (name: string, where: string, variable: string) =>
        `MCP server '${name}': ${where} puts \${${variable}} into a URL's user info, and the value holds '/', '?', '#', ` +
        "'\\' (in an http, ws, ftp or file URL) or '@' (in any other), which end the user info there (the rest would be read " +
        "as host, path or query); percent-encode the value; not starting it";

      it.each([
        ["a slash (in args)", "p@ss/w:rd%", "stdio", { command: "node", args: ["server.js", "postgresql://app:${DB_PASSWORD}@db:5432/app"] }, "mcpServers.db.args[1]"],
        ["a question mark (in env)", "q?x=1", "stdio", { command: "node", env: { DATABASE_URL: "postgres://app:${DB_PASSWORD}@db/app" } }, "mcpServers.db.env.DATABASE_URL"],
        ["a hash (in the url, as the user)", "ab#cd", "http", { type: "http", url: "https://${DB_PASSWORD}:x-oauth-basic@api.example.com/mcp" }, "mcpServers.db.url"],
        // libpq (psql, psycopg) takes the user info up to the first '@': `could not translate host name "ss@db"`.
        ["an '@' alone (in a postgresql URL)", "p@ss:word", "stdio", { command: "node", args: ["postgresql://app:${DB_PASSWORD}@db/app"] }, "mcpServers.db.args[0]"],
        // The WHATWG parser reads '\\' as '/' in http(s), ws(s), ftp and file URLs: the secret's start becomes the host.
        ["a backslash in an https URL", "ab\\cd", "http", { type: "http", url: "https://${DB_PASSWORD}:x-oauth-basic@api.example.com/mcp" }, "mcpServers.db.url"],
        ["a slash, in the second URL of a string", "ab/cd", "stdio", { command: "node", args: ["--urls=http://a.example,postgresql://app:${DB_PASSWORD}@db/app"] }, "mcpServers.db.args[0]"],
      ])("a value with %s is refused: the server is skipped naming field and variable, never the value", async (_what, value, transport, server, where) => {
        const loaded = await load({ mcpServers: { db: server, other: { command: "npx" } } }, { DB_PASSWORD: value });
        expect(Object.keys(loaded.config.mcpServers)).toEqual(["other"]);
        expect(loaded.skipped).toEqual([{ server: "db", transport, reason: reason("db", where, "DB_PASSWORD") }]);
        expect(logger.messages("warn")).toEqual([reason("db", where, "DB_PASSWORD")]);
        expect(JSON.stringify(logger.lines)).not.toContain(value);
      });

      it.each([
        ["percent-encoded", "p%40ss%2Fw%3Ard%25", "postgresql://app:${DB_PASSWORD}@db/app"],
        ["holding ':', which every URL parser takes as part of the password", "p:ss:word", "postgresql://app:${DB_PASSWORD}@db/app"],
        ["holding a backslash in a postgresql URL (only web URLs read it as '/')", "p\\ss", "postgresql://app:${DB_PASSWORD}@db/app"],
        ["holding '@' in an https URL, which web URL parsers take up to the last '@'", "me@corp.example", "https://${DB_PASSWORD}:x@git.example/repo"],
        ["in the path of a second URL", "a/b", "https://h.example,https://h.example/${DB_PASSWORD}@x"],
        ["in the path", "a/b?c#d", "https://api.example.com/${DB_PASSWORD}/x"],
        ["in the host, no user info", "a/b", "postgresql://${DB_PASSWORD}/app"],
        ["written as a literal $${…}", "a/b", "postgresql://app:$${DB_PASSWORD}@db/app"],
        ["the whole URL", "postgresql://app:p%2Fw@db/app", "${DB_PASSWORD}"],
      ])("a value %s loads", async (_what, value, url) => {
        const loaded = await load({ mcpServers: { db: { command: "node", args: [url] } } }, { DB_PASSWORD: value });
        expect(loaded.skipped).toEqual([]);
        expect(Object.keys(loaded.config.mcpServers)).toEqual(["db"]);
      });
    });

    describe("a URL taken whole from a variable, its user info not percent-encoded", () => {
      const reason = (where: string, variable: string) =>
        `MCP server 'db': ${where} takes a URL from \${${variable}} whose user info is not percent-encoded (an '@' after the ` +
        "end of its host, or a second '@' in a URL other than http, ws, ftp or file): the start of the user info would be " +
        "read as host, path or query; percent-encode the user info (an '@' in the path or query as %40); not starting it";
      const http = (url: string) => ({ type: "http", url });
      const stdio = (value: string) => ({ command: "node", env: { DATABASE_URL: value } });

      it.each([
        // `new URL` reads host "ss": fetch would fail with `getaddrinfo ENOTFOUND ss`, a piece of the password.
        ["a password holding '/' and '#'", "http", http("$DB_URL"), "mcpServers.db.url", "https://user:Sx9kQ@ss/w#rd-Kq9@api.example.com/mcp"],
        ["a token user holding '/'", "http", http("${DB_URL}"), "mcpServers.db.url", "https://Sx9kQ-tok/en-Kq9@api.example.com/mcp"],
        ["a token user holding '#'", "http", http("$DB_URL"), "mcpServers.db.url", "http://Sx9kQ-tok#en-Kq9@127.0.0.1:8080/mcp"],
        ["a token user holding '?'", "http", http("$DB_URL"), "mcpServers.db.url", "https://Sx9kQ-tok?en-Kq9@api.example.com/mcp"],
        ["a token user holding '\\' (read as '/' in a web URL)", "http", http("$DB_URL"), "mcpServers.db.url", "https://Sx9kQ-tok\\en-Kq9@api.example.com/mcp"],
        ["a URL that a longer value continues", "http", http("${DB_URL}/mcp"), "mcpServers.db.url", "https://Sx9kQ-tok/en-Kq9@api.example.com"],
        ["a connection string in env holding '/'", "stdio", stdio("$DB_URL"), "mcpServers.db.env.DATABASE_URL", "postgresql://app:Sx9kQ/w-Kq9@db:5432/app"],
        // libpq takes the user info up to the first '@': `could not translate host name "ss@db"`.
        ["a connection string in env holding '@'", "stdio", stdio("$DB_URL"), "mcpServers.db.env.DATABASE_URL", "postgresql://app:Sx9kQ@ss-Kq9@db/app"],
        // A web URL's parser skips the slashes: host "Sx9kQ-tok".
        ["a token user after a third '/'", "http", http("$DB_URL"), "mcpServers.db.url", "https:///Sx9kQ-tok/en-Kq9@api.example.com/mcp"],
      ])("%s is refused: the server is skipped naming field and variable, never the value", async (_what, transport, server, where, value) => {
        const loaded = await load({ mcpServers: { db: server, other: { command: "npx" } } }, { DB_URL: value });
        expect(Object.keys(loaded.config.mcpServers)).toEqual(["other"]);
        expect(loaded.skipped).toEqual([{ server: "db", transport, reason: reason(where, "DB_URL") }]);
        expect(logger.messages("warn")).toEqual([reason(where, "DB_URL")]);
        for (const piece of ["Sx9kQ", "Kq9"]) expect(JSON.stringify(logger.lines)).not.toContain(piece);
      });

      it.each([
        ["a URL with percent-encoded user info", http("$DB_URL"), "https://user:p%40ss%2Fw%23rd@api.example.com/mcp"],
        ["a web URL with an '@' in the user info, which its parsers take up to the last '@'", http("$DB_URL"), "https://me@corp.example:x@api.example.com/mcp"],
        ["a URL with an '@' starting a path segment (a Smithery server)", http("$DB_URL"), "https://server.smithery.ai/@owner/github/mcp?api_key=k"],
        ["a URL without user info", http("$DB_URL"), "https://api.example.com/mcp?x=a/b"],
        ["a connection string with percent-encoded user info", stdio("$DB_URL"), "postgresql://app:p%40ss%2Fw@db/app"],
        ["two URLs, the first with a path", stdio("$DB_URL"), "http://a.example/x,postgresql://app:pw@db/app"],
        ["a package pinned to a version, as an argument", { command: "uvx", args: ["--from", "$DB_URL", "tool"] }, "git+https://github.com/org/repo@v1.2"],
        // No parser reads user info in a file URL: the '@' is a pnpm store path's (`.pnpm/<package>@<version>`).
        [
          "a file URL with an '@' in its path (the host's NODE_OPTIONS)",
          { command: "node", env: { NODE_OPTIONS: "$DB_URL" } },
          "--import file:///app/node_modules/.pnpm/tsx@4.19.2/node_modules/tsx/dist/loader.mjs",
        ],
        // An empty authority holds no user info (only a web URL's parser skips the slashes after `://`).
        ["a connection string over a Unix socket, with no authority", stdio("$DB_URL"), "postgresql:///app?host=/var/run/postgresql&user=me@corp.example"],
      ])("%s loads", async (_what, server, value) => {
        const loaded = await load({ mcpServers: { db: server } }, { DB_URL: value });
        expect(loaded.skipped).toEqual([]);
        expect(Object.keys(loaded.config.mcpServers)).toEqual(["db"]);
      });
    });

    describe("a $NAME inside a longer value", () => {
      const warning = (where: string, variable: string) =>
        `MCP server 'db': ${where} holds $${variable} inside a longer value, where it is sent as written (only a whole value ` +
        `"$${variable}" is replaced); write \${${variable}} to use the variable, or $$${variable} to keep the text`;

      it.each([
        ["a header", "http", { type: "http", url: "https://api.example.com/mcp", headers: { Authorization: "Bearer $API_TOKEN" } }, "mcpServers.db.headers.Authorization"],
        ["the url", "http", { type: "http", url: "https://api.example.com/mcp?key=$API_TOKEN" }, "mcpServers.db.url"],
        ["an env value", "stdio", { command: "node", env: { AUTH: "token:$API_TOKEN" } }, "mcpServers.db.env.AUTH"],
        ["an argument holding a URL", "stdio", { command: "node", args: ["server.js", "postgresql://app:$API_TOKEN@db/app"] }, "mcpServers.db.args[1]"],
      ])("in %s of a set variable: sent as written, with a warning naming field and variable, never the value", async (_what, transport, server, where) => {
        const loaded = await load({ mcpServers: { db: server } }, { API_TOKEN: "tok-Secret-9" });
        expect(loaded.skipped).toEqual([]);
        expect(loaded.config.mcpServers.db.type).toBe(transport);
        expect(loaded.warnings).toEqual([warning(where, "API_TOKEN")]);
        expect(logger.messages("warn")).toEqual([warning(where, "API_TOKEN")]);
        expect(JSON.stringify(loaded.config)).not.toContain("tok-Secret-9");
        expect(JSON.stringify(logger.lines)).not.toContain("tok-Secret-9");
      });

      it.each([
        ["an unset variable", { command: "node", env: { AUTH: "token:$NOT_SET_ANYWHERE" } }],
        ["a shell's variable in an argument", { command: "sh", args: ["-c", "exec node server.js --token $API_TOKEN"] }],
        ["a shell's variable in a URL of a script argument", { command: "sh", args: ["-c", "exec npx mcp-remote https://api.example.com/mcp?key=$API_TOKEN"] }],
        ["a whole value", { command: "node", env: { AUTH: "$API_TOKEN" } }],
        ["braces", { command: "node", env: { AUTH: "token:${API_TOKEN}" } }],
        ["the $$ escape", { command: "node", env: { AUTH: "token:$$API_TOKEN" } }],
      ])("%s: no warning", async (_what, server) => {
        const loaded = await load({ mcpServers: { db: server } }, { API_TOKEN: "tok-Secret-9" });
        expect(loaded.warnings).toEqual([]);
      });
    });

    it("skips before validating, so a skipped server's other errors are not fatal", async () => {
      const loaded = await load({ mcpServers: { a: { command: "$UNSET_CMD", args: [1] }, b: { command: "npx" } } });
      expect(loaded.skipped.map((s) => s.server)).toEqual(["a"]);
      expect(Object.keys(loaded.config.mcpServers)).toEqual(["b"]);
    });
  });

  it("rejects headers_from_context naming one header in two spellings, naming both", async () => {
    const error = await loadError({
      mcpServers: {
        api: {
          type: "http",
          url: "https://x/mcp",
          headers_from_context: { headers: { "X-Api-Key": "key_a", "x-api-key": "key_b" } },
        },
      },
    });
    expect(error.message).toContain("mcpServers.api.headers_from_context.headers");
    expect(error.message).toContain("'X-Api-Key'");
    expect(error.message).toContain("'x-api-key'");
  });

  describe("static headers are checked at load", () => {
    it.each([
      ["a line break from a $VAR", { "X-Api-Key": "$BAD_HEADER_VALUE" }, "header 'X-Api-Key' from static headers contains a line break (CR or LF); the value is not shown"],
      ["leading whitespace", { Authorization: " Bearer t0ken" }, "header 'Authorization' from static headers has leading or trailing whitespace; the value is not shown"],
      ["a non-ASCII value", { "X-Name": "Jürgen" }, "header 'X-Name' from static headers contains a non-ASCII character; the value is not shown"],
      ["an invalid name", { "X Api Key": "v" }, "header 'X…' from static headers is not a valid HTTP header name; the value is not shown"],
      [
        "a value typed into the name",
        { "Authorization: Bearer secret-part": "v" },
        "header 'Authorization…' from static headers is not a valid HTTP header name; the value is not shown",
      ],
      ["a transport-owned name", { "mcp-session-id": "v" }, "header 'mcp-session-id' from static headers is managed by the MCP transport and cannot be set; the value is not shown"],
    ])("%s: the server is skipped with a message naming header and layer", async (_what, headers, problem) => {
      const env = { BAD_HEADER_VALUE: "secret-part\r\nX-Evil: 1" };
      const loaded = await load({ mcpServers: { api: { type: "http", url: "https://x/mcp", headers }, ok: { command: "npx" } } }, env);
      expect(loaded.skipped).toEqual([{ server: "api", transport: "http", reason: `MCP server 'api': ${problem}; not starting it` }]);
      expect(Object.keys(loaded.config.mcpServers)).toEqual(["ok"]);
      expect(JSON.stringify(loaded.skipped)).not.toContain("secret-part");
    });

    it("one header in two spellings skips the server", async () => {
      const loaded = await load({
        mcpServers: { api: { type: "sse", url: "https://x/sse", headers: { Authorization: "a", authorization: "b" } } },
      });
      expect(loaded.skipped.map((s) => s.reason)).toEqual([
        "MCP server 'api' names static header 'Authorization' twice (as 'Authorization' and 'authorization'); not starting it",
      ]);
    });

    it("stdio servers have no header layer: their headers are not checked", async () => {
      const loaded = await load({ mcpServers: { local: { command: "npx", headers: { "Bad Name": " x" } } } });
      expect(loaded.skipped).toEqual([]);
    });

    it("user_auth and headers_from_context header names are validated by the schema", async () => {
      const error = await loadError({
        mcpServers: {
          api: { type: "http", url: "https://x/mcp", user_auth: { header: "Mcp-Session-Id", users: {} } },
        },
      });
      expect(error.message).toContain("mcpServers.api.user_auth.header: header name is managed by the MCP transport and cannot be set");
    });
  });

  it("resolves a relative server cwd against the config file's folder", async () => {
    const loaded = await load({
      mcpServers: { rel: { command: "npx", cwd: "work/dir" }, abs: { command: "npx", cwd: "/opt/x" } },
    });
    expect(loaded.config.mcpServers.rel?.cwd).toBe(path.join(dir, "work", "dir"));
    expect(loaded.config.mcpServers.abs?.cwd).toBe("/opt/x");
  });

  it("keeps unknown per-server and top-level keys", async () => {
    const loaded = await load({
      myExtension: { keep: [1, 2] },
      mcpServers: { a: { command: "npx", customFlag: true, api_key: "$$literal" } },
    });
    expect((loaded.config as Record<string, unknown>).myExtension).toEqual({ keep: [1, 2] });
    const server = loaded.config.mcpServers.a as Record<string, unknown>;
    expect(server.customFlag).toBe(true);
    expect(server.api_key).toBe("$literal");
  });

  describe("files from elsewhere", () => {
    it("loads the Python original's example verbatim", async () => {
      const loaded = await loadExtensionsConfig({
        configPath: path.join(FIXTURES, "python-original.extensions_config.json"),
        env: {},
        logger,
      });
      const { mcpServers } = loaded.config;
      expect(Object.keys(mcpServers)).toEqual(["github", "openviking", "postgres", "long-running-reports"]);
      expect(Object.values(mcpServers).every((s) => s.enabled === false)).toBe(true);
      expect(loaded.config.mcpInterceptors).toEqual(["my_package.mcp.auth:build_auth_interceptor"]);
      expect(loaded.config.middlewares).toEqual([]);
      expect(mcpServers.github?.env).toEqual({ GITHUB_TOKEN: "$GITHUB_TOKEN" });
      expect(mcpServers.openviking?.type).toBe("http");
      expect(mcpServers.postgres?.routing).toEqual({
        mode: "prefer",
        priority: 50,
        keywords: ["database", "SQL", "table", "订单", "用户"],
      });
      expect(mcpServers.postgres?.tools.query?.routing?.priority).toBe(100);
      expect(mcpServers["long-running-reports"]?.task_toolsets).toHaveLength(1);
      expect(loaded.skipped).toEqual([]);
      expect(loaded.warnings).toEqual([]);
    });

    it("loads a Claude-Desktop file unchanged; a url-only server is http", async () => {
      const loaded = await loadExtensionsConfig({
        configPath: path.join(FIXTURES, "claude-desktop.json"),
        env: {},
        logger,
      });
      const { filesystem, remote } = loaded.config.mcpServers;
      expect(filesystem?.type).toBe("stdio");
      expect(filesystem?.command).toBe("npx");
      expect(filesystem?.args).toEqual(["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]);
      expect(remote?.type).toBe("http");
      expect(remote?.url).toBe("https://example.com/mcp");
      expect(remote?.headers).toEqual({ Authorization: "Bearer x" });
      expect(loaded.skipped).toEqual([]);
    });

    it("the shipped example validates and shows every server field", async () => {
      const loaded = await loadExtensionsConfig({ configPath: EXAMPLE, env: {}, logger });
      expect(loaded.skipped).toEqual([]);
      expect(loaded.warnings).toEqual([]);
      const servers = Object.values(loaded.raw.mcpServers as Record<string, Record<string, unknown>>);
      expect(servers.length).toBeGreaterThan(0);
      expect(servers.every((s) => s.enabled === false)).toBe(true);

      const used = new Set(servers.flatMap((s) => Object.keys(s)));
      const fields = Object.keys(ExtensionsConfigSchema.parse({ mcpServers: { x: { command: "c" } } }).mcpServers.x!);
      for (const field of [...fields, "cwd", "url", "oauth", "user_auth", "headers_from_context", "tool_call_timeout", "max_total_timeout"]) {
        expect(used.has(field) || field === "type" || field === "transport").toBe(true);
      }
      expect(used.has("type") && used.has("transport")).toBe(true);
      for (const key of ["mcpServers", "mcpInterceptors", "skills", "middlewares", "mcpTasks"]) {
        expect(Object.keys(loaded.raw)).toContain(key);
      }
      expect(ExtensionsConfigSchema.safeParse(JSON.parse(await readFile(EXAMPLE, "utf8"))).success).toBe(true);
    });
  });
});
