/**
 * A stdio child that ends before its MCP handshake does (a server that cannot run with its configuration prints why on
 * stderr and exits): discovery's warning, a call's line and `mcp-harness check` say how it ended, where the SDK says
 * only `Connection closed`; `check` shows its last stderr lines, its secrets redacted.
 */
import { afterAll, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { runCli } from "../../lib/cli";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { pidsWithMarker } from "../fixtures/processes";
import { STDIO_SERVER_PATH, stdioFixture, TSX_CJS_REGISTER } from "../fixtures/stdio";

const toolkits: McpToolkit[] = [];
afterAll(async () => {
  await Promise.all(toolkits.map((t) => t.close()));
});

const SECRET = "pw-Kx7";

/** A node child running `script` before (unless it ended) the fixture server with the `pid` tool. */
function scripted(name: string, script: string): Record<string, unknown> {
  const fixture = stdioFixture({ name, toolNames: ["pid"] });
  const server = `require(${JSON.stringify(TSX_CJS_REGISTER)}); require(${JSON.stringify(STDIO_SERVER_PATH)});`;
  return { type: "stdio", command: process.execPath, args: ["-e", `${script}\n${server}`], env: { ...fixture.env, DB_PASSWORD: "$DB_PASSWORD" } };
}

/** Ends in a thread whose workspace path holds "doomed", after telling stderr why (quoting its password). */
const DOOMED = `if (process.cwd().includes("doomed")) { process.stderr.write("cannot open database with password " + process.env.DB_PASSWORD + "\\n");`;

describe("a stdio child that ends before its MCP session started", () => {
  test("a call's line says how it ended (exit code, signal, output closed), never 'Connection closed'; the next thread still works", async () => {
    const logger = new RecordingLogger();
    const configPath = await writeConfig(await makeTempDir("mcp-start-exit-cfg-"), {
      mcpServers: {
        coded: scripted("coded", `${DOOMED} process.exit(4); }`),
        signalled: scripted("signalled", `${DOOMED} process.kill(process.pid, "SIGTERM"); setInterval(() => {}, 1000); }`),
        // Closes its stdout and runs on, until the session's cleanup ends it.
        mute: scripted("mute", `${DOOMED} require("fs").closeSync(1); setInterval(() => {}, 1000); }`),
      },
    });
    const toolkit = createMcpToolkit({ configPath, env: { DB_PASSWORD: SECRET }, logger, dataDir: await makeTempDir("mcp-start-exit-data-") });
    toolkits.push(toolkit);
    const graph = toolNodeGraph(await toolkit.getTools());
    const doomed = { configurable: { thread_id: "doomed" } };

    const coded = await callThroughGraph(graph, "coded_pid", {}, doomed);
    expect(coded.status).toBe("error");
    expect(coded.content).toBe(
      "MCP tool 'pid' on server 'coded' failed: the stdio MCP server 'coded' exited with code 4 before its MCP session started " +
        "(its stderr lines are in the debug log)",
    );
    const signalled = await callThroughGraph(graph, "signalled_pid", {}, doomed);
    expect(signalled.content).toBe(
      "MCP tool 'pid' on server 'signalled' failed: the stdio MCP server 'signalled' was ended by SIGTERM before its MCP session " +
        "started (its stderr lines are in the debug log)",
    );
    const mute = await callThroughGraph(graph, "mute_pid", {}, doomed);
    expect(mute.content).toBe(
      "MCP tool 'pid' on server 'mute' failed: the stdio MCP server 'mute' closed its output before its MCP session started " +
        "(its stderr lines are in the debug log)",
    );
    expect(logger.messages("debug")).toContain(`MCP server 'coded' stderr: cannot open database with password [redacted]`);
    expect(JSON.stringify(logger.lines)).not.toContain(SECRET);

    const fine = await callThroughGraph(graph, "coded_pid", {}, { configurable: { thread_id: "fine" } });
    expect(fine.status).toBe("success");
  });

  test("a single-threaded child that exits is told by its exit code, though its output ends before it is a zombie", async () => {
    // Python's pipes close as it exits, before the kernel makes it a zombie: /proc then still shows it running (state R,
    // with the kernel's "exiting" flag), seen at more than half of such ends.
    const fixture = stdioFixture({ name: "py", toolNames: ["pid"] });
    const run = `import os, sys\nif "doomed" in os.getcwd(): sys.exit(3)\nos.execvp(${JSON.stringify(fixture.command)}, ${JSON.stringify([fixture.command, ...fixture.args])})`;
    const configPath = await writeConfig(await makeTempDir("mcp-start-exit-cfg-"), {
      mcpServers: { py: { type: "stdio", command: "python3", args: ["-c", run], env: fixture.env } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-start-exit-data-") });
    toolkits.push(toolkit);
    const graph = toolNodeGraph(await toolkit.getTools());
    const lines = new Set<unknown>();
    for (let i = 0; i < 8; i += 1) lines.add((await callThroughGraph(graph, "py_pid", {}, { configurable: { thread_id: `doomed-${i}` } })).content);
    expect([...lines]).toEqual([
      "MCP tool 'pid' on server 'py' failed: the stdio MCP server 'py' exited with code 3 before its MCP session started " +
        "(its stderr lines are in the debug log)",
    ]);
  });

  test("discovery's warning says how it ended", async () => {
    const logger = new RecordingLogger();
    const configPath = await writeConfig(await makeTempDir("mcp-start-exit-cfg-"), {
      mcpServers: { exits: { type: "stdio", ...stdioFixture({ name: "exits", mode: "crash" }) } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir: await makeTempDir("mcp-start-exit-data-") });
    toolkits.push(toolkit);
    expect(await toolkit.getTools()).toEqual([]);
    expect(logger.messages("warn")).toEqual([
      "Skipping MCP server 'exits' after tool discovery failed: the stdio MCP server 'exits' exited with code 1 before its MCP " +
        "session started (its stderr lines are in the debug log)",
    ]);
  });

  test("check shows the exit and the server's last stderr lines, its secrets redacted, in text and in --json", async () => {
    const dir = await makeTempDir("mcp-start-exit-check-");
    const chatty = `for (let i = 1; i <= 12; i++) process.stderr.write("line " + i + "\\n"); process.stderr.write("password " + process.env.DB_PASSWORD + "\\n"); process.exit(2);`;
    const configPath = await writeConfig(dir, { mcpServers: { db: scripted("db", chatty) } });
    const env = { DB_PASSWORD: SECRET, MCP_HARNESS_DATA_DIR: await makeTempDir("mcp-start-exit-check-data-") };
    const text = { out: [] as string[], err: [] as string[] };
    const io = (sink: { out: string[]; err: string[] }) => ({ out: (l: string) => sink.out.push(l), err: (l: string) => sink.err.push(l), env, cwd: dir });
    expect(await runCli(["check", configPath], io(text))).toBe(1);
    // (The launch policy warns of the command's absolute path.)
    expect(text.err.filter((line) => !line.startsWith("warning: "))).toEqual([
      "error: server 'db' (stdio) cannot start: the stdio MCP server 'db' exited with code 2 before its MCP session started (its stderr lines are in the debug log)",
      "server 'db' wrote to stderr (last 10 line(s)):",
      ...[4, 5, 6, 7, 8, 9, 10, 11, 12].map((n) => `  | line ${n}`),
      "  | password [redacted]",
    ]);
    const json = { out: [] as string[], err: [] as string[] };
    expect(await runCli(["check", configPath, "--json"], io(json))).toBe(1);
    const report = JSON.parse(json.out.join("\n")) as { servers: { name: string; stderr?: string[] }[] };
    expect(report.servers.find((s) => s.name === "db")?.stderr?.slice(-2)).toEqual(["line 12", "password [redacted]"]);
    expect([...text.out, ...text.err, ...json.out, ...json.err].join("\n")).not.toContain(SECRET);
  });

  test("check shows no first words of a passphrase the server was writing when it ended, a process it started holding its stderr", async () => {
    const dir = await makeTempDir("mcp-start-exit-cut-");
    const passphrase = "correct horse battery staple";
    const sleeper = `34${process.pid}.7`;
    // The sleeper keeps the stderr pipe open: the child's last line, without its newline, is cut under its writer.
    const cut = `require("child_process").spawn("sleep", [${JSON.stringify(sleeper)}], { stdio: ["ignore", "ignore", "inherit"] }).unref(); process.stderr.write("starting\\nlogin with " + process.env.DB_PASSWORD.split(" ").slice(0, 3).join(" ")); process.exit(2);`;
    const configPath = await writeConfig(dir, { mcpServers: { db: scripted("db", cut) } });
    const env = { DB_PASSWORD: passphrase, MCP_HARNESS_DATA_DIR: await makeTempDir("mcp-start-exit-cut-data-") };
    const text = { out: [] as string[], err: [] as string[] };
    expect(await runCli(["check", configPath], { out: (l: string) => text.out.push(l), err: (l: string) => text.err.push(l), env, cwd: dir })).toBe(1);
    expect(pidsWithMarker(sleeper)).toEqual([]);
    expect(text.err.filter((line) => line.startsWith("  | "))).toEqual(["  | starting", "  | login with [cut]"]);
    for (const word of ["correct", "horse", "battery"]) expect([...text.out, ...text.err].join("\n")).not.toContain(word);
  });
});
