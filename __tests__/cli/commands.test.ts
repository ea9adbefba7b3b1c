import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { execFile, spawnSync } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { runCli, type CliIo } from "../../lib/cli";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";
import { startListingServer } from "../fixtures/listing-server";
import { stdioFixture, TSX_CJS_REGISTER } from "../fixtures/stdio";

const REPO = path.resolve(__dirname, "..", "..");
const MAIN = path.join(REPO, "lib", "cli", "main.ts");
const SECRET = "cli-secret-command-9f3a";

let http: HttpFixture;
/** A URL nothing listens on: a fixture's, after it closed. */
let deadUrl: string;

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["echo", "add"] });
  const dead = await startHttpFixture({ name: "dead", toolNames: [] });
  deadUrl = dead.url;
  await dead.close();
});
afterAll(async () => {
  await http.close();
});

type TestIo = CliIo & { stdout: string[]; stderr: string[] };

function io(opts: { env?: NodeJS.ProcessEnv; cwd?: string; interactive?: boolean } = {}): TestIo {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return {
    stdout,
    stderr,
    out: (t) => stdout.push(t),
    err: (t) => stderr.push(t),
    env: opts.env ?? {},
    cwd: opts.cwd ?? process.cwd(),
    interactive: opts.interactive,
  };
}

const linesOf = (chunks: string[]) => chunks.join("\n").split("\n");
/** Fixture servers run node by path, which the HTTP API's launch policy refuses: check warns about them. */
const POLICY_WARNING = "warning: stdio launch policy of the HTTP API would refuse this entry: ";
const withoutPolicyWarnings = (lines: string[]) => lines.filter((l) => !l.startsWith(POLICY_WARNING));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The CLI as a user runs it: a child process (through tsx), its own cwd and environment, stdout/stderr pipes. */
function runChild(args: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--require", TSX_CJS_REGISTER, MAIN, ...args],
      { cwd: opts.cwd, env: { PATH: process.env.PATH, ...opts.env } },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A config whose enabled servers each fail in a different way, next to one that works. */
async function brokenConfig(dir: string): Promise<string> {
  await mkdir(path.join(dir, "interceptors"), { recursive: true });
  await writeFile(path.join(dir, "interceptors", "ok.js"), "exports.build = () => async (req, next) => next(req);\n");
  return writeConfig(
    dir,
    {
      mcpInterceptors: ["./interceptors/ok.js:build", "./interceptors/missing.js:build", "./interceptors/ok.js:nope"],
      mcpServers: {
        remote: { url: http.url },
        ghost: { command: "mcp-harness-no-such-command-xyz" },
        exits: { type: "stdio", ...stdioFixture({ name: "exits", mode: "crash" }) },
        unreachable: { url: deadUrl },
        hangs: { type: "stdio", ...stdioFixture({ name: "hangs", mode: "hang" }), session_init_timeout: 0.5 },
        off: { enabled: false, command: "mcp-harness-no-such-command-xyz" },
      },
    },
    "broken.json",
  );
}

describe("mcp-harness check", () => {
  test("a stdio server starts where the toolkit starts it: the default thread workspace of the data dir, with its temp folder", async () => {
    const dir = await makeTempDir("cli-check-where-");
    const dataDir = path.join(dir, "data");
    const seen = path.join(dir, "seen.txt");
    const launch = stdioFixture({ name: "local", toolNames: ["echo"] });
    const file = await writeConfig(dir, {
      mcpServers: {
        local: {
          type: "stdio",
          command: "sh",
          args: ["-c", `printf '%s\\n%s' "$PWD" "$TMPDIR" > '${seen}'; exec "$0" "$@"`, launch.command, ...launch.args],
          env: launch.env,
        },
      },
    });
    expect(await runCli(["check", file, "--json"], io({ env: { MCP_HARNESS_DATA_DIR: dataDir }, cwd: dir }))).toBe(0);
    const workspace = path.join(dataDir, "threads", "default", "user-data", "workspace");
    expect((await readFile(seen, "utf8")).split("\n")).toEqual([workspace, path.join(workspace, ".mcp", "tmp")]);
  });

  test("a server listing a tool that is not valid MCP passes with a warning naming the tool; its other tools count", async () => {
    const listing = await startListingServer(() => ({
      tools: [{ name: "good", inputSchema: { type: "object" } }, { name: "bad", inputSchema: {} } as Tool],
    }));
    try {
      const file = await writeConfig(await makeTempDir("cli-"), { mcpServers: { odd: { url: listing.url } } });
      const table = io();
      expect(await runCli(["check", file], table)).toBe(0);
      expect(table.stdout.join("\n")).toMatch(/odd\s+http\s+true\s+ok \(1 tool\)/);
      const warning = "Skipping MCP tool 'bad' of server 'odd': its definition is not a valid MCP tool (at 'inputSchema.type'); the server's other tools are kept";
      expect(table.stderr).toEqual([`warning: ${warning}`]);
      const json = io();
      expect(await runCli(["check", file, "--json"], json)).toBe(0);
      expect(JSON.parse(json.stdout.join("\n"))).toMatchObject({ ok: true, failures: [], warnings: [warning] });
    } finally {
      await listing.close();
    }
  });

  test("a valid config whose servers start passes; the report names tools and routing.mode", async () => {
    const dir = await makeTempDir("cli-");
    const file = await writeConfig(dir, {
      mcpServers: { remote: { url: http.url, routing: { mode: "prefer", priority: 10, keywords: ["sums"] } } },
    });
    const table = io();
    expect(await runCli(["check", file], table)).toBe(0);
    expect(table.stdout.join("\n")).toMatch(/remote\s+http\s+true\s+ok \(2 tools\)/);
    expect(linesOf(table.stdout).at(-1)).toBe("config OK");

    const json = io();
    expect(await runCli(["check", file, "--json"], json)).toBe(0);
    const report = JSON.parse(json.stdout.join("\n"));
    expect(report).toMatchObject({ ok: true, offline: false, failures: [], warnings: [] });
    expect(report.servers).toEqual([
      {
        name: "remote",
        transport: "http",
        enabled: true,
        status: "ok",
        tools: 2,
        routing: { mode: "prefer", priority: 10, keywords: ["sums"] },
      },
    ]);
  });

  test("servers that cannot start and interceptors that cannot load fail it: exit 1, one line per failure", async () => {
    const dir = await makeTempDir("cli-");
    const file = await brokenConfig(dir);
    const out = io();
    expect(await runCli(["check", file], out)).toBe(1);
    const errors = linesOf(out.stderr).filter((l) => l.startsWith("error: "));
    expect(errors).toEqual([
      "error: server 'ghost' (stdio) cannot start: spawn mcp-harness-no-such-command-xyz ENOENT",
      "error: server 'exits' (stdio) cannot start: the stdio MCP server 'exits' exited with code 1 before its MCP session started (its stderr lines are in the debug log)",
      expect.stringMatching(/^error: server 'unreachable' \(http\) cannot start: fetch failed \(.*ECONNREFUSED/),
      "error: server 'hangs' (stdio) cannot start: timed out after 0.5s",
      expect.stringMatching(/^error: interceptor '\.\/interceptors\/missing\.js:build' cannot be used: the module cannot be resolved: Cannot find module '\.\/interceptors\/missing\.js'/),
      "error: interceptor './interceptors/ok.js:nope' cannot be used: the module has no function export 'nope'",
    ]);
    const stdout = out.stdout.join("\n");
    expect(stdout).toMatch(/remote\s+http\s+true\s+ok \(2 tools\)/);
    expect(stdout).toMatch(/off\s+stdio\s+false\s+disabled/);
    expect(stdout).toMatch(/\.\/interceptors\/ok\.js:build\s+ok/);
    expect(stdout).not.toContain("config OK");
    expect(linesOf(out.stdout).at(-1)).toBe("check failed: 6 problem(s)");
    // The report's lines are the CLI's own: no stack, no "Require stack" of local paths.
    expect(out.stderr.join("\n")).not.toMatch(/^\s+at |Require stack/m);

    const json = io();
    expect(await runCli(["check", file, "--json"], json)).toBe(1);
    const report = JSON.parse(json.stdout.join("\n"));
    expect(report.ok).toBe(false);
    expect(report.failures).toHaveLength(6);
    expect(report.servers.map((s: { name: string; status: string }) => [s.name, s.status])).toEqual([
      ["remote", "ok"],
      ["ghost", "failed"],
      ["exits", "failed"],
      ["unreachable", "failed"],
      ["hangs", "failed"],
      ["off", "disabled"],
    ]);
    expect(report.interceptors.map((i: { status: string }) => i.status)).toEqual(["ok", "failed", "failed"]);
  });

  test("on a terminal, one progress line per server as it finishes; none when not interactive or with --json", async () => {
    const dir = await makeTempDir("cli-");
    const file = await brokenConfig(dir);
    const tty = io({ interactive: true });
    expect(await runCli(["check", file], tty)).toBe(1);
    // Not the failures, nor the stderr a failed stdio server wrote (its header line and its `  | ` lines).
    const progressOf = (stderr: string[]) => withoutPolicyWarnings(linesOf(stderr)).filter((l) => !l.startsWith("error: ") && !l.startsWith("server '") && !l.startsWith("  | "));
    const progress = progressOf(tty.stderr);
    expect(progress[0]).toBe("checking 5 enabled server(s)…");
    expect(progress.slice(1).map((l) => l.replace(/^ {2}\[\d\/5\] /, "")).sort()).toEqual([
      "exits (stdio): failed",
      "ghost (stdio): failed",
      "hangs (stdio): failed",
      "remote (http): ok, 2 tool(s)",
      "unreachable (http): failed",
    ]);
    expect(progress.slice(1).map((l) => l.slice(0, 8))).toEqual(["  [1/5] ", "  [2/5] ", "  [3/5] ", "  [4/5] ", "  [5/5] "]);

    const pipe = io({ interactive: false });
    await runCli(["check", file], pipe);
    expect(progressOf(pipe.stderr)).toEqual([]);
    const json = io({ interactive: true });
    await runCli(["check", file, "--json"], json);
    expect(json.stderr).toEqual([]);
  });

  test("a failure line never shows a value that came from $VAR expansion", async () => {
    const dir = await makeTempDir("cli-");
    const file = await writeConfig(dir, { mcpServers: { secretive: { command: "${CLI_TEST_SECRET_COMMAND}" } } });
    const env = { CLI_TEST_SECRET_COMMAND: SECRET };
    const out = io({ env });
    expect(await runCli(["check", file], out)).toBe(1);
    expect(withoutPolicyWarnings(out.stderr)).toEqual(["error: server 'secretive' (stdio) cannot start: spawn [redacted] ENOENT"]);
    expect(out.stderr.join("\n")).not.toContain(SECRET);
    const json = io({ env });
    await runCli(["check", file, "--json"], json);
    expect(json.stdout.join("\n")).not.toContain(SECRET);
  });

  test("--offline validates only: no server is contacted and no interceptor module is resolved", async () => {
    const dir = await makeTempDir("cli-");
    const file = await brokenConfig(dir);
    const before = http.requests.length;
    const out = io({ interactive: true });
    expect(await runCli(["check", file, "--offline"], out)).toBe(0);
    expect(http.requests.length).toBe(before);
    expect(withoutPolicyWarnings(out.stderr)).toEqual([]);
    expect(out.stdout.join("\n")).toMatch(/ghost\s+stdio\s+true\s+not checked \(--offline\)/);
    expect(out.stdout.join("\n")).toMatch(/\.\/interceptors\/missing\.js:build\s+not checked \(--offline\)/);
    expect(linesOf(out.stdout).at(-1)).toBe("config OK (offline: servers and interceptors were not tried)");
  });

  test("check warns (exit 0) about enabled file servers the HTTP API's stdio launch policy would refuse; remote and disabled entries are not screened", async () => {
    const dir = await makeTempDir("cli-");
    const file = await writeConfig(dir, {
      mcpServers: {
        good: { command: "npx", args: ["-y", "@scope/server"] },
        shell: { command: "bash", args: ["-c", "echo hi"] },
        exec: { command: "npx", args: ["-p", "pkg", "-c", "evil"] },
        injected: { command: "uvx", args: ["tool"], env: { node_options: "--require x" } },
        remote: { url: "http://127.0.0.1:9/mcp", args: ["-c"], env: { LD_PRELOAD: "x" } },
        off: { enabled: false, command: "/bin/sh" },
      },
    });
    const out = io();
    expect(await runCli(["check", file, "--offline"], out)).toBe(0);
    expect(out.stderr).toEqual([
      `${POLICY_WARNING}MCP server 'shell' uses a stdio command that is not allowed. Allowed commands: npx, uvx. Configure MCP_HARNESS_STDIO_ALLOWLIST to extend this list.`,
      `${POLICY_WARNING}MCP server 'exec' passes '-c' to 'npx', which would run arbitrary code. Point the server at a package or module instead.`,
      `${POLICY_WARNING}MCP server 'injected' sets environment variable 'NODE_OPTIONS', which would run arbitrary code at process startup.`,
    ]);
    const json = io({ env: { MCP_HARNESS_STDIO_ALLOWLIST: "bash" } });
    expect(await runCli(["check", file, "--offline", "--json"], json)).toBe(0);
    const report = JSON.parse(json.stdout.join("\n"));
    expect(report.warnings).toEqual([
      `stdio launch policy of the HTTP API would refuse this entry: MCP server 'shell' passes '-c' to 'bash', which would run arbitrary code. Point the server at a package or module instead.`,
      `stdio launch policy of the HTTP API would refuse this entry: MCP server 'exec' passes '-c' to 'npx', which would run arbitrary code. Point the server at a package or module instead.`,
      `stdio launch policy of the HTTP API would refuse this entry: MCP server 'injected' sets environment variable 'NODE_OPTIONS', which would run arbitrary code at process startup.`,
    ]);
  });

  test("the bundled example config passes check --offline", async () => {
    const out = io();
    expect(await runCli(["check", path.join(REPO, "extensions_config.example.json"), "--offline"], out)).toBe(0);
    expect(linesOf(out.stdout).at(-1)).toBe("config OK (offline: servers and interceptors were not tried)");
  });

  test("an enabled server with an unset variable is not started (offline too); skipped servers show their transport, in file order", async () => {
    const dir = await makeTempDir("cli-");
    const file = await writeConfig(
      dir,
      {
        mcpServers: {
          gh: { command: "npx", env: { TOKEN: "$CLI_TEST_UNSET_TOKEN" } },
          off: { enabled: false, command: "npx" },
          docs: { url: "https://docs.example/mcp", headers: { Authorization: "Bearer ${CLI_TEST_UNSET_DOCS}" } },
        },
      },
      "bad.json",
    );
    const table = io();
    expect(await runCli(["check", file, "--offline"], table)).toBe(1);
    expect(table.stdout.join("\n")).toMatch(/gh\s+stdio\s+true\s+skipped/);
    expect(table.stdout.join("\n")).toMatch(/docs\s+http\s+true\s+skipped/);
    expect(withoutPolicyWarnings(table.stderr)).toEqual([
      "error: server 'gh' (stdio) not started: references unset environment variable(s) CLI_TEST_UNSET_TOKEN",
      "error: server 'docs' (http) not started: references unset environment variable(s) CLI_TEST_UNSET_DOCS",
    ]);

    const badIo = io();
    expect(await runCli(["check", file, "--json"], badIo)).toBe(1);
    const report = JSON.parse(badIo.stdout.join("\n"));
    expect(report.ok).toBe(false);
    expect(report.skipped[0].reason).toContain("CLI_TEST_UNSET_TOKEN");
    // Rows in the file's order, skipped ones included.
    expect(report.servers.map((s: { name: string; status: string }) => [s.name, s.status])).toEqual([
      ["gh", "skipped"],
      ["off", "disabled"],
      ["docs", "skipped"],
    ]);
    expect(report.servers[0]).toMatchObject({ name: "gh", transport: "stdio", status: "skipped" });
  });

  test("a validation error names the JSON path and exits 1; warnings are in the --json report", async () => {
    const dir = await makeTempDir("cli-");
    const file = await writeConfig(dir, { mcpServers: { gh: { command: "npx", args: ["-y", 42] } } });
    const out = io();
    expect(await runCli(["check", file], out)).toBe(1);
    expect(out.stderr.join("\n")).toContain("mcpServers.gh.args[1]");

    const clamped = await writeConfig(dir, { mcpServers: { remote: { url: http.url, routing: { mode: "prefer", priority: 500, keywords: ["k"] } } } }, "clamped.json");
    const json = io();
    expect(await runCli(["check", clamped, "--json"], json)).toBe(0);
    expect(JSON.parse(json.stdout.join("\n")).warnings).toEqual([
      "MCP routing priority 500 for mcpServers.remote.routing.priority is above 100; clamping to 100.",
    ]);
  });

  test("a missing file given on the command line is reported as an argument", async () => {
    const dir = await makeTempDir("cli-");
    const out = io({ cwd: dir });
    expect(await runCli(["check", "nope.json"], out)).toBe(1);
    expect(out.stderr).toEqual([`config file given as argument not found at ${path.join(dir, "nope.json")}`]);
    const tools = io({ cwd: dir });
    expect(await runCli(["tools", "nope.json"], tools)).toBe(1);
    expect(tools.stderr).toEqual([`config file given as argument not found at ${path.join(dir, "nope.json")}`]);
  });

  test("a config that cannot be read (a folder) is one line, and a JSON report with --json", async () => {
    const dir = await makeTempDir("cli-");
    await mkdir(path.join(dir, "folder.json"));
    const out = io({ cwd: dir });
    expect(await runCli(["check", "folder.json"], out)).toBe(1);
    expect(out.stderr).toEqual([expect.stringMatching(/^Failed to read extensions config at .*folder\.json: EISDIR$/)]);
    const json = io({ cwd: dir });
    expect(await runCli(["check", "folder.json", "--json"], json)).toBe(1);
    expect(JSON.parse(json.stdout.join(""))).toMatchObject({ ok: false, error: expect.stringContaining("EISDIR") });
    const tools = io({ cwd: dir });
    expect(await runCli(["tools", "folder.json"], tools)).toBe(1);
  });

  test("no config found: exit 1 saying where it looked, exit 0 only with --allow-empty", async () => {
    const dir = await makeTempDir("cli-empty-");
    const out = io({ cwd: dir });
    expect(await runCli(["check"], out)).toBe(1);
    expect(out.stderr).toEqual([
      `no extensions config found: no config file given, MCP_HARNESS_CONFIG is not set, and no extensions_config.json or mcp_config.json in ${dir}. Give a file, set MCP_HARNESS_CONFIG, or pass --allow-empty`,
    ]);
    const allowed = io({ cwd: dir });
    expect(await runCli(["check", "--allow-empty"], allowed)).toBe(0);
    expect(allowed.stdout.join("\n")).toContain(`no extensions config found (no config file given, MCP_HARNESS_CONFIG is not set, and no extensions_config.json or mcp_config.json in ${dir})`);
  });
});

describe("mcp-harness tools", () => {
  test("lists visible name, source server, raw name, transport and routing (with mode); --json carries the warnings", async () => {
    const dir = await makeTempDir("cli-");
    const file = await writeConfig(dir, {
      mcpServers: {
        remote: { url: http.url, routing: { mode: "prefer", priority: 300, keywords: ["maths"] } },
        unreachable: { url: deadUrl },
      },
    });
    const out = io();
    expect(await runCli(["tools", file, "--json"], out)).toBe(0);
    const report = JSON.parse(out.stdout.join("\n"));
    expect(report.tools).toEqual(
      expect.arrayContaining([
        {
          name: "remote_add",
          server: "remote",
          rawName: "add",
          transport: "http",
          task: null,
          routing: { mode: "prefer", priority: 100, keywords: ["maths"], scope: "server" },
        },
      ]),
    );
    expect(report.warnings).toEqual(["MCP routing priority 300 for mcpServers.remote.routing.priority is above 100; clamping to 100."]);
    expect(Object.keys(report.failures)).toEqual(["unreachable"]);
    const table = io();
    expect(await runCli(["tools", file], table)).toBe(0);
    expect(table.stdout.join("\n")).toMatch(/remote_echo\s+remote\s+echo\s+http/);
  });

  test("exits 1 when every enabled server failed", async () => {
    const dir = await makeTempDir("cli-");
    const file = await writeConfig(dir, {
      mcpServers: { unreachable: { url: deadUrl }, gh: { command: "npx", env: { T: "$CLI_TEST_UNSET_TOKEN" } }, off: { enabled: false, url: http.url } },
    });
    const out = io();
    expect(await runCli(["tools", file], out)).toBe(1);
    expect(linesOf(out.stderr).at(-1)).toBe("error: every enabled server failed (2); no tools");
    const json = io();
    expect(await runCli(["tools", file, "--json"], json)).toBe(1);
    expect(Object.keys(JSON.parse(json.stdout.join("\n")).failures).sort()).toEqual(["gh", "unreachable"]);
  });
});

describe("the mcp-harness process", () => {
  test("exit codes and streams of real runs: 1 for a failing check, 0 for --offline, 2 for usage errors", async () => {
    const dir = await makeTempDir("cli-proc-");
    const file = await brokenConfig(dir);
    const [failing, offline, usage, empty] = await Promise.all([
      runChild(["check", file], { cwd: dir }),
      runChild(["check", file, "--offline"], { cwd: dir }),
      runChild(["check", "--frobnicate"], { cwd: dir }),
      runChild(["check"], { cwd: await makeTempDir("cli-proc-empty-") }),
    ]);
    expect(failing.code).toBe(1);
    expect(failing.stderr.split("\n").filter((l) => l.startsWith("error: "))).toHaveLength(6);
    expect(failing.stderr).toContain("error: interceptor './interceptors/missing.js:build' cannot be used: the module cannot be resolved: Cannot find module './interceptors/missing.js'\n");
    expect(failing.stderr).not.toMatch(/Require stack|^\s+at /m);
    // stderr is a pipe here: no progress lines.
    expect(failing.stderr).not.toContain("checking");
    expect(failing.stderr).not.toMatch(/\[\d\/\d\]/);
    expect(offline.code).toBe(0);
    expect(offline.stdout).toContain("config OK (offline");
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("unknown option '--frobnicate'");
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain("no extensions config found");
  });

  const haveScript = spawnSync("script", ["--version"]).status === 0;
  (haveScript ? test : test.skip)("on a terminal (a pseudo-terminal through `script`), progress lines appear", async () => {
    const dir = await makeTempDir("cli-tty-");
    const file = await writeConfig(dir, { mcpServers: { remote: { url: http.url }, unreachable: { url: deadUrl } } });
    const command = [process.execPath, "--require", TSX_CJS_REGISTER, MAIN, "check", file].map((a) => `'${a}'`).join(" ");
    const run = await new Promise<Run>((resolve) => {
      execFile("script", ["-qec", command, "/dev/null"], { cwd: dir, env: { PATH: process.env.PATH } }, (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
      );
    });
    expect(run.code).toBe(1);
    expect(run.stdout).toContain("checking 2 enabled server(s)…");
    expect(run.stdout).toMatch(/\[\d\/2\] remote \(http\): ok, 2 tool\(s\)/);
    expect(run.stdout).toMatch(/\[\d\/2\] unreachable \(http\): failed/);
  });
});

test("unknown commands exit 2 with the usage", async () => {
  const out = io();
  expect(await runCli(["frobnicate"], out)).toBe(2);
  expect(out.stderr.join("\n")).toContain("usage: mcp-harness");
});

test("a usage error names the option or the argument's place, never what was typed there", async () => {
  for (const [args, message] of [
    [["worker", "--api-key=sk-LIVE-abc"], "unknown option '--api-key'"],
    [["check", "--json=sk-LIVE-abc"], "option '--json' takes no value"],
    [["check", "a.json", "sk-LIVE-abc"], "unexpected argument (argument 2): this command takes at most 1"],
  ] as const) {
    const out = io();
    expect(await runCli([...args], out)).toBe(2);
    const stderr = out.stderr.join("\n");
    expect(stderr).toContain(message);
    expect(stderr).not.toContain("sk-LIVE");
  }
});
