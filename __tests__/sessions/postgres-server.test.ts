/**
 * The official PostgreSQL MCP server (@modelcontextprotocol/server-postgres 0.6.2, built on MCP SDK 1.0.1, which speaks
 * protocol 2024-11-05 only), plugged in as a user would: over stdio, its connection URL in `args` with the password
 * from a `${VAR}`, driven through ToolNode and createAgent with the scripted model. SPEC §2.2 `$VAR`, §3.1 discovery,
 * §3.4 results, §4.3 secrets, §5.1 stdio sessions. Each run gets a database of its own, dropped afterwards.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { realpath } from "node:fs/promises";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createAgent } from "langchain";
import { Client } from "pg";
import { z } from "zod";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, cleanErrorLine, seenByModel, toolCalls, toolMessagesOf, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { freePort } from "../fixtures/ports";
import { alive, childrenOfThread, tcpPortsOf, waitUntil } from "../fixtures/processes";

const PG_URL = process.env.MCP_HARNESS_TEST_POSTGRES_URL;
if (!PG_URL) console.log("PostgreSQL MCP server tests skipped: MCP_HARNESS_TEST_POSTGRES_URL not set");
const describePg = PG_URL ? describe : describe.skip;
const PG = new URL(PG_URL ?? "postgres://127.0.0.1");
const PG_USER = PG.username || "postgres";
const PG_PORT = PG.port || "5432";

const SERVER = require.resolve("@modelcontextprotocol/server-postgres/dist/index.js");
/** A unique argument after the URL (the server reads only its first), so the test finds the server's processes. */
const MARKER = `pg-server-marker-${process.pid}-${Date.now()}`;
const DATABASE = `mcp_pg_server_${randomBytes(6).toString("hex")}`;
/** The operator's password, and the same percent-encoded, as a connection URL needs it (what `PG_PASSWORD` holds). */
const PASSWORD = "p@ss/w:rd%";
const PASSWORD_IN_URL = encodeURIComponent(PASSWORD);
const SHORT = "Zq";
/** Holding ', " and `, Node's util.inspect quotes it with ' and escapes that one: `'a"b\\'c`. */
const QUOTED = "a\"b'c`d-S3cret";

/** Every form a server might echo `secret` in: raw, URL-encoded, JSON-escaped (once and twice), base64, base64url. */
function formsOf(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  const bytes = Buffer.from(secret, "utf8");
  const forms = [secret, encodeURIComponent(secret), json, JSON.stringify(json).slice(1, -1), bytes.toString("base64"), bytes.toString("base64url")];
  return [...new Set(forms.map((form) => form.replace(/=+$/, "")))];
}
const LEAKS = [...formsOf(PASSWORD), ...formsOf(PASSWORD_IN_URL), ...formsOf(SHORT), ...formsOf(QUOTED), "a\"b\\'c`d-S3cret"];
const expectNoPassword = (text: string): void => {
  for (const form of LEAKS) expect(text).not.toContain(form);
};

/** A SQL literal (the values here hold no quote). */
const literal = (value: string) => `'${value}'`;

describePg("@modelcontextprotocol/server-postgres 0.6.2 (MCP SDK 1.0.1) over stdio", () => {
  const logger = new RecordingLogger();
  let admin: Client;
  let dataDir: string;
  let toolkit: McpToolkit;
  let tools: DynamicStructuredTool[];
  let graph: ToolNodeGraph;
  let refusedPort: number;

  beforeAll(async () => {
    admin = new Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${DATABASE}`);
    const hostPort = `${PG.hostname}:${PG_PORT}`;
    /** The server's launch: its URL (the password from `variable`) and a marker naming the entry. */
    const launch = (name: string, variable: string, host = hostPort, database = DATABASE) => ({
      type: "stdio",
      command: process.execPath,
      args: [SERVER, `postgresql://${PG_USER}:\${${variable}}@${host}/${database}`, `${MARKER}:${name}:`],
    });
    refusedPort = await freePort();
    dataDir = await realpath(await makeTempDir("mcp-pg-server-data-"));
    const configPath = await writeConfig(await makeTempDir("mcp-pg-server-"), {
      mcpServers: {
        pg: launch("pg", "PG_PASSWORD"),
        pg_short: launch("pg_short", "PG_SHORT"),
        pg_slow: { ...launch("pg_slow", "PG_PASSWORD"), tool_call_timeout: 1 },
        pg_nodb: launch("pg_nodb", "PG_PASSWORD", hostPort, `${DATABASE}_missing`),
        pg_refused: launch("pg_refused", "PG_PASSWORD", `127.0.0.1:${refusedPort}`),
        // A port no URL may hold: the server's `new URL(…)` throws at startup and Node prints the URL on stderr.
        pg_badurl: launch("pg_badurl", "PG_PASSWORD", "127.0.0.1:99999"),
        pg_badurl_quoted: launch("pg_badurl_quoted", "PG_QUOTED", "127.0.0.1:99999"),
        // The password as it is, not percent-encoded: its '/' would end the URL's user info, "ss/w:rd%" read as host.
        pg_unencoded: launch("pg_unencoded", "PG_RAW"),
      },
    });
    toolkit = createMcpToolkit({ configPath, env: { PG_PASSWORD: PASSWORD_IN_URL, PG_SHORT: SHORT, PG_QUOTED: QUOTED, PG_RAW: PASSWORD }, logger, dataDir });
    tools = await toolkit.getTools();
    graph = toolNodeGraph(tools);
  });

  afterAll(async () => {
    await toolkit?.close();
    // FORCE ends the backends the killed or timed-out calls left sleeping.
    await admin?.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
    await admin?.end();
  });

  const query = (sql: string, thread = "pg-main", server = "pg", user = "alice") =>
    callThroughGraph(graph, `${server}_query`, { sql }, { context: { user_id: user }, configurable: { thread_id: thread } });
  const rows = (message: ToolMessage) => JSON.parse(String(message.content)) as Record<string, unknown>[];
  /** Backends of the test database running a query that holds `tag`. */
  const runningWith = async (tag: string): Promise<number[]> => {
    const result = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND position($2 in query) > 0 AND pid <> pg_backend_pid() ORDER BY pid",
      [DATABASE, tag],
    );
    return result.rows.map((row) => row.pid);
  };
  const childrenOf = (server: string, thread: string) => childrenOfThread(`${MARKER}:${server}:`, dataDir, thread);

  describe("discovery and calls on the old SDK", () => {
    test("its one tool is listed under each working server's prefix, with the schema it declares; the broken URL's server is skipped", () => {
      expect(tools.map((t) => t.name).sort()).toEqual(["pg_nodb_query", "pg_query", "pg_refused_query", "pg_short_query", "pg_slow_query"]);
      const tool = tools.find((t) => t.name === "pg_query")!;
      expect(tool.description).toBe("Run a read-only SQL query");
      expect(tool.schema).toEqual({ type: "object", properties: { sql: { type: "string" } } });
      expect(tool.metadata?.mcp).toEqual({ server: "pg", rawName: "query", transport: "stdio" });
      for (const name of ["pg_badurl", "pg_badurl_quoted"]) {
        expect(logger.messages("warn")).toContain(
          `Skipping MCP server '${name}' after tool discovery failed: the stdio MCP server '${name}' exited with code 1 before its MCP session ` +
            "started (its stderr lines are in the debug log)",
        );
      }
    });

    test("a query through ToolNode answers the server's JSON rows", async () => {
      const message = await query("SELECT 1 + 1 AS two, current_database() AS db");
      expect(message.status).toBe("success");
      expect(rows(message)).toEqual([{ two: 2, db: DATABASE }]);
    });

    test("through createAgent, with the run's user and thread", async () => {
      const model = new ScriptedChatModel([
        ScriptedChatModel.toolCall("pg_query", { sql: "SELECT 'hello' AS greeting" }, "q1"),
        ScriptedChatModel.toolCall("pg_query", { sql: "SELECT * FROM no_such_table" }, "q2"),
        { content: "done" },
      ]);
      const agent = createAgent({ model, tools, contextSchema: z.object({ user_id: z.string() }) });
      const result = await agent.invoke({ messages: [new HumanMessage("query")] }, { context: { user_id: "carol" }, configurable: { thread_id: "pg-agent" } });
      const messages = (result.messages as BaseMessage[]).filter((m): m is ToolMessage => ToolMessage.isInstance(m));
      expect(messages.map((m) => [m.tool_call_id, m.status, String(m.content)])).toEqual([
        ["q1", "success", JSON.stringify([{ greeting: "hello" }], null, 2)],
        ["q2", "error", `MCP tool 'query' on server 'pg' failed: MCP error -32603: relation "no_such_table" does not exist`],
      ]);
      expect(childrenOf("pg", "pg-agent")).toHaveLength(1);
    });

    test("the server's read-only transaction holds: a write is its SQL error, one clean line", async () => {
      const message = await query("CREATE TABLE t (x int)");
      expect(cleanErrorLine(message)).toBe("MCP tool 'query' on server 'pg' failed: MCP error -32603: cannot execute CREATE TABLE in a read-only transaction");
    });
  });

  describe("the password from ${PG_PASSWORD} never reaches the model", () => {
    test("echoed by a query in every form (raw, URL-encoded, JSON, base64): blanked, the rest of the rows kept", async () => {
      const sql = [
        `SELECT ${literal(PASSWORD)} AS raw, ${literal(PASSWORD_IN_URL)} AS encoded,`,
        `to_json(${literal(PASSWORD)}::text)::text AS json, encode(convert_to(${literal(PASSWORD)}, 'UTF8'), 'base64') AS b64,`,
        `encode(convert_to(${literal(PASSWORD_IN_URL)}, 'UTF8'), 'base64') AS b64_encoded, 'kept' AS other`,
      ].join(" ");
      const message = await query(sql);
      expect(message.status).toBe("success");
      expectNoPassword(seenByModel(message));
      const [row] = rows(message);
      expect(row).toEqual({
        raw: "[redacted]",
        encoded: "[redacted]",
        json: expect.stringContaining("[redacted]"),
        b64: expect.stringContaining("[redacted]"),
        b64_encoded: expect.stringContaining("[redacted]"),
        other: "kept",
      });
    });

    test("quoted by a SQL error: blanked in the error line", async () => {
      const message = await query(`SELECT * FROM "${PASSWORD}"`);
      expect(cleanErrorLine(message)).toBe(`MCP tool 'query' on server 'pg' failed: MCP error -32603: relation "[redacted]" does not exist`);
    });

    test("what the server and session report about themselves holds no password, and is shown unblanked", async () => {
      const message = await query(
        "SELECT current_setting('port') AS port, host(inet_server_addr()) AS server, current_user AS who, " +
          "(SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()) AS app",
      );
      expectNoPassword(seenByModel(message));
      expect(rows(message)).toEqual([{ port: PG_PORT, server: expect.any(String), who: PG_USER, app: "" }]);
    });

    test("a database that does not exist: the server's error, one clean line, no password", async () => {
      const message = await query("SELECT 1", "pg-main", "pg_nodb");
      expect(cleanErrorLine(message)).toBe(`MCP tool 'query' on server 'pg_nodb' failed: MCP error -32603: database "${DATABASE}_missing" does not exist`);
    });

    test("a port nobody listens on: connection refused, one clean line, no password", async () => {
      const message = await query("SELECT 1", "pg-main", "pg_refused");
      expect(cleanErrorLine(message)).toBe(`MCP tool 'query' on server 'pg_refused' failed: MCP error -32603: connect ECONNREFUSED 127.0.0.1:${refusedPort}`);
    });

    test.each(["pg_badurl", "pg_badurl_quoted"])(
      "a URL the server cannot parse (%s): Node's report of its crash, quoting the URL, reaches the debug log with the password blanked",
      async (server) => {
        const input = () => logger.messages().find((m) => m.startsWith(`MCP server '${server}' stderr:`) && m.includes("input:"));
        expect(await waitUntil(() => input() !== undefined)).toBe(true);
        expect(input()).toBe(`MCP server '${server}' stderr:   input: 'postgresql://${PG_USER}:[redacted]@127.0.0.1:99999/${DATABASE}'`);
      },
    );

    test("put into the URL unencoded (its '/' would end the user info, the rest read as the host): the server is not started, the warning says why", async () => {
      expect(tools.map((t) => t.name)).not.toContain("pg_unencoded_query");
      expect(logger.messages("warn")).toContain(
        "MCP server 'pg_unencoded': mcpServers.pg_unencoded.args[1] puts ${PG_RAW} into a URL's user info, and the value holds '/', '?', '#', " +
          "'\\' (in an http, ws, ftp or file URL) or '@' (in any other), which end the user info there (the rest would be read " +
          "as host, path or query); percent-encode the value; not starting it",
      );
      // Started anyway, the server would connect to host "ss" and the model would read `getaddrinfo ENOTFOUND ss`.
      expect(childrenOf("pg_unencoded", "default")).toEqual([]);
    });

    test("a short password (2 characters) is blanked as well, raw and in base64", async () => {
      const message = await query(`SELECT ${literal(SHORT)} AS pw, encode(${literal(SHORT)}::bytea, 'base64') AS b64, 'other' AS other`, "pg-main", "pg_short");
      expect(rows(message)).toEqual([{ pw: "[redacted]", b64: "[redacted]", other: "other" }]);
    });
  });

  describe("one child per user and thread", () => {
    test("two threads: two children, each on a backend of its own, reached through its own socket", async () => {
      const sql = "SELECT pg_backend_pid() AS backend, inet_client_port() AS port";
      const [a] = rows(await query(sql, "pg-thread-a")) as { backend: number; port: number }[];
      const [b] = rows(await query(sql, "pg-thread-b")) as { backend: number; port: number }[];
      const [childA, ...moreA] = childrenOf("pg", "pg-thread-a");
      const [childB, ...moreB] = childrenOf("pg", "pg-thread-b");
      expect([moreA, moreB]).toEqual([[], []]);
      expect(childA).not.toBe(childB);
      expect(a.backend).not.toBe(b.backend);
      expect(tcpPortsOf(childA)).toContain(a.port);
      expect(tcpPortsOf(childB)).toContain(b.port);
      expect(tcpPortsOf(childA)).not.toContain(b.port);
    });

    test("two users on one thread: a child each; two calls of one step in a thread: one child serves both", async () => {
      const sql = "SELECT pg_backend_pid() AS backend";
      expect((await query(sql, "pg-users", "pg", "alice")).status).toBe("success");
      expect((await query(sql, "pg-users", "pg", "bob")).status).toBe("success");
      expect(childrenOf("pg", "pg-users")).toHaveLength(2);

      const step = await graph.invoke(
        {
          messages: [
            toolCalls([
              { name: "pg_query", args: { sql: "SELECT 'first' AS x, pg_sleep(0.1)::text AS s" }, id: "p1" },
              { name: "pg_query", args: { sql: "SELECT 'second' AS x, pg_sleep(0.1)::text AS s" }, id: "p2" },
            ]),
          ],
        },
        { context: { user_id: "alice" }, configurable: { thread_id: "pg-step" } },
      );
      expect(toolMessagesOf(step.messages).map((m) => [m.tool_call_id, rows(m)[0].x])).toEqual([
        ["p1", "first"],
        ["p2", "second"],
      ]);
      expect(childrenOf("pg", "pg-step")).toHaveLength(1);
    });

    test("a child killed mid-query: our clear error, the query not sent again, the thread's next call on a new child", async () => {
      expect((await query("SELECT 1", "pg-kill")).status).toBe("success");
      const [child] = childrenOf("pg", "pg-kill");
      const tag = `kill-${randomBytes(4).toString("hex")}`;
      const pending = query(`SELECT pg_sleep(60) /* ${tag} */`, "pg-kill");
      expect(await waitUntil(async () => (await runningWith(tag)).length > 0)).toBe(true);
      const [backend, ...others] = await runningWith(tag);
      expect(others).toEqual([]);
      process.kill(child, "SIGKILL");
      const message = await pending;
      expect(cleanErrorLine(message)).toBe(
        "MCP tool 'query' on server 'pg' failed: the connection to the server closed before it answered (its process ended or closed its output). The call was not sent again; a new session serves the next call.",
      );
      expect(await waitUntil(() => !alive(child))).toBe(true);
      // The killed child's backend may sleep on (PostgreSQL notices a gone client when it writes); no other runs it.
      expect((await runningWith(tag)).filter((pid) => pid !== backend)).toEqual([]);
      await admin.query("SELECT pg_terminate_backend($1)", [backend]);
      const next = await query("SELECT pg_backend_pid() AS backend", "pg-kill");
      expect(next.status).toBe("success");
      const [fresh, ...more] = childrenOf("pg", "pg-kill");
      expect(more).toEqual([]);
      expect(fresh).not.toBe(child);
      expect(await runningWith(tag)).toEqual([]);
    });

    test("its backend ended mid-query: the server's error line; the server then dies of its pool's unhandled error, and the next call gets a new child", async () => {
      expect((await query("SELECT 1", "pg-ended")).status).toBe("success");
      const [child] = childrenOf("pg", "pg-ended");
      const tag = `ended-${randomBytes(4).toString("hex")}`;
      const pending = query(`SELECT pg_sleep(60) /* ${tag} */`, "pg-ended");
      expect(await waitUntil(async () => (await runningWith(tag)).length > 0)).toBe(true);
      await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND position($2 in query) > 0 AND pid <> pg_backend_pid()", [
        DATABASE,
        tag,
      ]);
      expect(cleanErrorLine(await pending)).toBe("MCP tool 'query' on server 'pg' failed: MCP error -32603: terminating connection due to administrator command");
      expect(await waitUntil(() => !alive(child))).toBe(true);
      expect(await waitUntil(() => logger.messages().some((m) => m.includes("stderr: Error: Connection terminated unexpectedly")))).toBe(true);
      const next = await query("SELECT 'again' AS x", "pg-ended");
      expect(rows(next)).toEqual([{ x: "again" }]);
      const [fresh] = childrenOf("pg", "pg-ended");
      expect(fresh).not.toBe(child);
    });

    test("a query past tool_call_timeout (1 s): one clean line naming it; the same child serves the next call", async () => {
      expect((await query("SELECT 1", "pg-slow", "pg_slow")).status).toBe("success");
      const [child] = childrenOf("pg_slow", "pg-slow");
      const tag = `slow-${randomBytes(4).toString("hex")}`;
      const message = await query(`SELECT pg_sleep(60) /* ${tag} */`, "pg-slow", "pg_slow");
      expect(cleanErrorLine(message)).toContain("tool_call_timeout");
      // SDK 1.0.1 has no handler for the cancellation sent: the server's query runs on (the database's drop ends it).
      expect(await runningWith(tag)).toHaveLength(1);
      const after = await query("SELECT 'after' AS x", "pg-slow", "pg_slow");
      expect(rows(after)).toEqual([{ x: "after" }]);
      expect(childrenOf("pg_slow", "pg-slow")).toEqual([child]);
      expect(alive(child)).toBe(true);
    });
  });

  describe("the log, once every call above ran", () => {
    test("no line holds a password in any form", () => {
      expect(logger.lines.length).toBeGreaterThan(0);
      for (const line of logger.messages()) expectNoPassword(line);
    });
  });
});
