import { describe, expect, test } from "@jest/globals";
import { existsSync } from "node:fs";
import * as path from "node:path";
import { validateStdioLaunch, type StdioLaunchServer } from "../../lib";
import { npxAsNpmParsesIt } from "./npm-oracle";

type Verdict = "ok" | string; // "ok", else a fragment the reason must contain

interface Vector {
  server: StdioLaunchServer;
  verdict: Verdict;
  env?: NodeJS.ProcessEnv;
}

const npx = (...args: string[]): StdioLaunchServer => ({ command: "npx", args });
const uvx = (...args: string[]): StdioLaunchServer => ({ command: "uvx", args });
const cmd = (command: string, ...args: string[]): StdioLaunchServer => ({ command, args });
const withEnv = (env: Record<string, string>, command = "npx", args = ["-y", "pkg"]): StdioLaunchServer => ({ command, args, env });
const ALLOW_NODE = { MCP_HARNESS_STDIO_ALLOWLIST: "node, python ,perl,python3" };

const SINGLE = "must be a single executable name";
const DISALLOWED = "uses a stdio command that is not allowed";
const NO_COMMAND = "requires a command";
const RUNNER = "runs a shell, interpreter or command wrapper";
const NO_PACKAGE = "without a package";
const flag = (f: string, c = "npx") => `passes '${f}' to '${c}'`;
const envVar = (name: string) => `sets environment variable '${name}'`;

/** Every example of inventory §R, the acceptance cases of issue 14, and the stricter cases of this project. */
const VECTORS: [string, Vector][] = [
  // §R 151: command name
  ["missing command", { server: { args: [] }, verdict: NO_COMMAND }],
  ["blank command", { server: cmd("   "), verdict: NO_COMMAND }],
  ["/bin/bash", { server: cmd("/bin/bash"), verdict: SINGLE }],
  ["npx -y as one command string", { server: cmd("npx -y"), verdict: SINGLE }],
  ["/tmp/x/npx", { server: cmd("/tmp/x/npx"), verdict: SINGLE }],
  ["windows path", { server: cmd("C:\\tools\\npx"), verdict: SINGLE }],
  ["leading space", { server: cmd(" npx"), verdict: SINGLE }],
  ["trailing newline", { server: cmd("npx\n"), verdict: SINGLE }],
  ["$(…) in command", { server: cmd("$(id)"), verdict: SINGLE }],
  ["backticks in command", { server: cmd("`id`"), verdict: SINGLE }],
  ["; in command", { server: cmd("npx;id"), verdict: SINGLE }],
  ["| in command", { server: cmd("npx|sh"), verdict: SINGLE }],
  ["& in command", { server: cmd("npx&"), verdict: SINGLE }],
  ["redirect in command", { server: cmd("npx>out"), verdict: SINGLE }],
  ["$VAR command", { server: cmd("$CMD"), verdict: SINGLE }],
  ["quote in command", { server: cmd("np'x"), verdict: SINGLE }],
  ["NUL in command", { server: cmd("npx\u0000"), verdict: SINGLE }],
  // §R 152: allowlist
  ["bash is not allowlisted", { server: cmd("bash", "-c", "id"), verdict: DISALLOWED }],
  ["node is not allowlisted by default", { server: cmd("node", "server.js"), verdict: DISALLOWED }],
  ["membership is case-sensitive", { server: cmd("NPX", "-y", "pkg"), verdict: DISALLOWED }],
  ["the env list extends it", { server: cmd("node", "server.js"), verdict: "ok", env: ALLOW_NODE }],
  ["…and is trimmed", { server: cmd("python", "-m", "mod"), verdict: "ok", env: ALLOW_NODE }],
  // §R 155: npx
  ["npx -y @scope/server -c config.json", { server: npx("-y", "@scope/server", "-c", "config.json"), verdict: "ok" }],
  ["npx -p pkg -c cmd", { server: npx("-p", "pkg", "-c", "cmd"), verdict: flag("-c") }],
  ["npx --registry URL -c", { server: npx("--registry", "https://r.example", "-c", "x"), verdict: flag("-c") }],
  ["npx -w ws --call", { server: npx("-w", "ws", "--call", "x"), verdict: flag("--call") }],
  ["npx --loglevel silly -c", { server: npx("--loglevel", "silly", "-c", "x"), verdict: flag("-c") }],
  ["npx --not-an-npm-option value --call", { server: npx("--not-an-npm-option", "value", "--call", "x"), verdict: flag("--call") }],
  ["npx -- @scope/server --eval x", { server: npx("--", "@scope/server", "--eval", "x"), verdict: "ok" }],
  ["npx --parseable pkg -c x", { server: npx("--parseable", "pkg", "-c", "x"), verdict: "ok" }],
  ["npx -P pkg -c x (-P is boolean)", { server: npx("-P", "pkg", "-c", "x"), verdict: "ok" }],
  ["npx -C /prefix pkg", { server: npx("-C", "/prefix", "pkg"), verdict: "ok" }],
  ["npx -y pkg -name -exclude (no clusters after the package)", { server: npx("-y", "pkg", "-name", "-exclude"), verdict: "ok" }],
  ["npx --eval", { server: npx("--eval", "x", "pkg"), verdict: flag("--eval") }],
  ["npx -e", { server: npx("-e", "x", "pkg"), verdict: flag("-e") }],
  ["npx --print", { server: npx("--print", "x", "pkg"), verdict: flag("--print") }],
  ["npx --node-arg", { server: npx("--node-arg", "x", "pkg"), verdict: flag("--node-arg") }],
  ["npx --node-options=", { server: npx("--node-options=--require=x", "pkg"), verdict: flag("--node-options") }],
  ["npx --shell", { server: npx("--shell", "/bin/sh", "pkg"), verdict: flag("--shell") }],
  ["npx --call=code", { server: npx("--call=id", "pkg"), verdict: flag("--call") }],
  ["npx args with $(…) after the package are quoted by npm", { server: npx("-y", "pkg", "$(id)"), verdict: "ok" }],
  ["npx args with backticks after the package", { server: npx("-y", "pkg", "`id`"), verdict: "ok" }],
  // stricter than the original: npx as npm really parses it
  ["an unknown option does not swallow -c", { server: npx("--unknown", "-c", "evil", "pkg"), verdict: flag("-c") }],
  ["…nor -c=code", { server: npx("--unknown", "-c=evil", "pkg"), verdict: flag("-c") }],
  ["…nor the option that takes the package as its value", { server: npx("--unknown", "--registry", "pkg", "-c", "x"), verdict: flag("-c") }],
  ["cluster -yc", { server: npx("-yc", "evil", "pkg"), verdict: flag("-c") }],
  ["cluster with two dashes --yc", { server: npx("--yc", "evil", "pkg"), verdict: flag("-c") }],
  ["cluster -ac", { server: npx("-ac", "evil", "pkg"), verdict: flag("-c") }],
  ["one dash long name -call", { server: npx("-call", "evil", "pkg"), verdict: flag("--call") }],
  ["two dash short name --c", { server: npx("--c", "evil", "pkg"), verdict: flag("-c") }],
  ["abbreviation --cal=", { server: npx("--cal=evil", "pkg"), verdict: flag("-c") }],
  ["abbreviation --node-opt", { server: npx("--node-opt", "--require=x", "pkg"), verdict: flag("--node-options") }],
  ["abbreviation --scr (script-shell)", { server: npx("--scr", "/bin/sh", "pkg"), verdict: flag("--script-shell") }],
  ["--script-shell", { server: npx("--script-shell=/bin/sh", "pkg"), verdict: flag("--script-shell") }],
  ["upper-case --CALL (refused: lower-cased)", { server: npx("--CALL", "x", "pkg"), verdict: flag("--call") }],
  ["no- prefix --no-no-call", { server: npx("--no-no-call", "pkg"), verdict: flag("--call") }],
  ["a lone - does not end the options", { server: npx("-", "-c", "evil"), verdict: flag("-c") }],
  ["-dd then -c", { server: npx("-dd", "-c", "x", "pkg"), verdict: flag("-c") }],
  ["-p value that is -c", { server: npx("-p", "-c", "evil", "pkg"), verdict: flag("-c") }],
  ["--ca is npm's own option", { server: npx("--ca", "cert.pem", "pkg"), verdict: "ok" }],
  ["-E (save-exact) is not -e", { server: npx("-E", "pkg"), verdict: "ok" }],
  ["npx sh -c (npm runs programs from its global bin)", { server: npx("-y", "sh", "-c", "id"), verdict: RUNNER }],
  ["npx node -e", { server: npx("node", "-e", "x"), verdict: RUNNER }],
  ["npx node@20 -e", { server: npx("-y", "node@20", "-e", "x"), verdict: RUNNER }],
  ["npx python3 -c", { server: npx("python3", "-c", "x"), verdict: RUNNER }],
  ["npx -- bash", { server: npx("--", "bash"), verdict: RUNNER }],
  ["npx npx -c (nested launcher)", { server: npx("npx", "-c", "x"), verdict: RUNNER }],
  ["npx env", { server: npx("env", "sh"), verdict: RUNNER }],
  ["an unknown option's value is npm's command: --foo sh -- -c", { server: npx("--foo", "sh", "--", "-c", "id"), verdict: RUNNER }],
  ["…also with options between: --foo sh -y -- -c", { server: npx("--foo", "sh", "-y", "--", "-c", "id"), verdict: RUNNER }],
  ["-local false -c (--no-global takes the value false)", { server: npx("-local", "false", "-c", "touch x"), verdict: flag("-c") }],
  ["-no true -c (--no-yes)", { server: npx("-no", "true", "-c", "touch x"), verdict: flag("-c") }],
  ["--no false -c", { server: npx("--no", "false", "-c", "touch x"), verdict: flag("-c") }],
  ["npx without a package", { server: npx("-y"), verdict: NO_PACKAGE }],
  ["npx without args", { server: cmd("npx"), verdict: NO_PACKAGE }],
  ["npx @scope/node is a package", { server: npx("-y", "@scope/node", "-e", "x"), verdict: "ok" }],
  // §R 156: uvx
  ["uvx --eval x tool", { server: uvx("--eval", "x", "tool"), verdict: flag("--eval", "uvx") }],
  ["uvx --from pkg tool --print table", { server: uvx("--from", "pkg", "tool", "--print", "table"), verdict: "ok" }],
  ["uvx -c constraints.txt tool", { server: uvx("-c", "constraints.txt", "tool"), verdict: "ok" }],
  ["uvx -p 3.12 tool", { server: uvx("-p", "3.12", "tool"), verdict: "ok" }],
  ["uvx --call", { server: uvx("--call", "x", "tool"), verdict: flag("--call", "uvx") }],
  ["uvx --from --eval", { server: uvx("--from", "--eval", "tool"), verdict: flag("--eval", "uvx") }],
  ["uvx mcp-server-fetch", { server: uvx("mcp-server-fetch"), verdict: "ok" }],
  ["uvx python -c", { server: uvx("python", "-c", "x"), verdict: RUNNER }],
  ["uvx python@3.12", { server: uvx("python@3.12", "-c", "x"), verdict: RUNNER }],
  ["uvx --from x python3.12", { server: uvx("--from", "x", "python3.12"), verdict: RUNNER }],
  ["uvx without a package", { server: uvx("--with", "x"), verdict: NO_PACKAGE }],
  ["uvx -qp 3.12 python -c (a cluster ending in -p takes the next token)", { server: uvx("-qp", "3.12", "python", "-c", "x"), verdict: RUNNER }],
  ["uvx -qw x bash -c", { server: uvx("-qw", "x", "bash", "-c", "id"), verdict: RUNNER }],
  ["uvx -qp3.12 tool (the value attached)", { server: uvx("-qp3.12", "tool"), verdict: "ok" }],
  // §R 157: other commands, screened whole
  ["node -pe", { server: cmd("node", "-pe", "1"), verdict: flag("-p", "node"), env: ALLOW_NODE }],
  ["node -ep", { server: cmd("node", "-ep", "1"), verdict: flag("-e", "node"), env: ALLOW_NODE }],
  ["node -p", { server: cmd("node", "-p", "1"), verdict: flag("-p", "node"), env: ALLOW_NODE }],
  ["node --eval=", { server: cmd("node", "--eval=1"), verdict: flag("--eval", "node"), env: ALLOW_NODE }],
  ["node script.js --print (whole)", { server: cmd("node", "s.js", "--print"), verdict: flag("--print", "node"), env: ALLOW_NODE }],
  ["python -Ic", { server: cmd("python", "-Ic", "x"), verdict: flag("-c", "python"), env: ALLOW_NODE }],
  ["python -m mod", { server: cmd("python3", "-m", "mod"), verdict: "ok", env: ALLOW_NODE }],
  ["perl -we", { server: cmd("perl", "-we", "x"), verdict: flag("-e", "perl"), env: ALLOW_NODE }],
  ["perl -E", { server: cmd("perl", "-E", "x"), verdict: flag("-e", "perl"), env: ALLOW_NODE }],
  ["node --import data: URL", { server: cmd("node", "--import=data:text/javascript,0", "s.js"), verdict: flag("--import", "node"), env: ALLOW_NODE }],
  ["node --import module is fine", { server: cmd("node", "--import", "tsx/esm", "s.js"), verdict: "ok", env: ALLOW_NODE }],
  ["node -r data:", { server: cmd("node", "-r", "data:,0", "s.js"), verdict: flag("-r", "node"), env: ALLOW_NODE }],
  // §R 158: env
  ["NODE_OPTIONS", { server: withEnv({ NODE_OPTIONS: "--require x" }), verdict: envVar("NODE_OPTIONS") }],
  ["lower-case node_options", { server: withEnv({ node_options: "x" }), verdict: envVar("NODE_OPTIONS") }],
  ["lower-case pythonpath", { server: withEnv({ pythonpath: "x" }, "uvx", ["tool"]), verdict: envVar("PYTHONPATH") }],
  ["LD_PRELOAD", { server: withEnv({ LD_PRELOAD: "x" }), verdict: envVar("LD_PRELOAD") }],
  ["padded ' BASH_ENV '", { server: withEnv({ " BASH_ENV ": "x" }), verdict: envVar("BASH_ENV") }],
  ["ENV", { server: withEnv({ ENV: "x" }), verdict: envVar("ENV") }],
  ["DYLD_INSERT_LIBRARIES", { server: withEnv({ DYLD_INSERT_LIBRARIES: "x" }), verdict: envVar("DYLD_INSERT_LIBRARIES") }],
  ["LD_AUDIT", { server: withEnv({ LD_AUDIT: "x" }), verdict: envVar("LD_AUDIT") }],
  ["PERL5OPT", { server: withEnv({ PERL5OPT: "x" }), verdict: envVar("PERL5OPT") }],
  ["PYTHONHOME", { server: withEnv({ PYTHONHOME: "x" }), verdict: envVar("PYTHONHOME") }],
  ["PYTHONSTARTUP", { server: withEnv({ PYTHONSTARTUP: "x" }), verdict: envVar("PYTHONSTARTUP") }],
  ["RUBYOPT", { server: withEnv({ RUBYOPT: "x" }), verdict: envVar("RUBYOPT") }],
  ["env applies to other allowlisted commands", { server: withEnv({ NODE_OPTIONS: "x" }, "node", ["s.js"]), verdict: envVar("NODE_OPTIONS"), env: ALLOW_NODE }],
  ["NODE_PATH is an accepted residual", { server: withEnv({ NODE_PATH: "/x" }), verdict: "ok" }],
  ["LD_LIBRARY_PATH is an accepted residual", { server: withEnv({ LD_LIBRARY_PATH: "/x" }), verdict: "ok" }],
  ["DYLD_LIBRARY_PATH is an accepted residual", { server: withEnv({ DYLD_LIBRARY_PATH: "/x" }), verdict: "ok" }],
  ["GITHUB_TOKEN is fine", { server: withEnv({ GITHUB_TOKEN: "$GITHUB_TOKEN" }), verdict: "ok" }],
  // stricter env
  ["exported bash function", { server: withEnv({ "BASH_FUNC_npx%%": "() { id; }" }), verdict: envVar("BASH_FUNC_*") }],
  ["SHELLOPTS", { server: withEnv({ SHELLOPTS: "xtrace" }), verdict: envVar("SHELLOPTS") }],
  ["npm_config_call", { server: withEnv({ npm_config_call: "id" }), verdict: envVar("npm_config_call") }],
  ["NPM_CONFIG_SCRIPT_SHELL", { server: withEnv({ NPM_CONFIG_SCRIPT_SHELL: "/bin/sh" }), verdict: envVar("npm_config_script_shell") }],
  ["npm_config_node_options", { server: withEnv({ npm_config_node_options: "x" }), verdict: envVar("npm_config_node_options") }],
  ["npm_config_registry is fine", { server: withEnv({ npm_config_registry: "https://r.example" }), verdict: "ok" }],
  ["GIT_SSH_COMMAND", { server: withEnv({ GIT_SSH_COMMAND: "id" }), verdict: envVar("GIT_SSH_COMMAND") }],
  ["GIT_CONFIG_KEY_0", { server: withEnv({ GIT_CONFIG_KEY_0: "core.fsmonitor" }), verdict: envVar("GIT_CONFIG_KEY_*") }],
  // §R 150: scope
  ["http skips everything", { server: { type: "http", url: "http://x", command: "/bin/sh", args: ["-c"], env: { LD_PRELOAD: "x" } }, verdict: "ok" }],
  ["sse skips everything", { server: { type: "sse", url: "http://x", args: ["-c"] }, verdict: "ok" }],
  ["transport alias streamable_http", { server: { transport: "streamable_http", url: "http://x", command: "bash" }, verdict: "ok" }],
  ["url without command is http", { server: { url: "http://x", env: { NODE_OPTIONS: "x" } }, verdict: "ok" }],
  ["type wins over transport", { server: { type: "stdio", transport: "http", command: "bash" }, verdict: DISALLOWED }],
  ["type STDIO upper-case", { server: { type: "STDIO", command: "/bin/sh" }, verdict: SINGLE }],
  // argument shapes
  ["non-string arg", { server: { command: "npx", args: ["-y", 5] }, verdict: "args[1] must be a string" }],
  ["args not a list", { server: { command: "npx", args: "-c x" }, verdict: "args must be a list" }],
];

describe("validateStdioLaunch: the verdict table", () => {
  test("has at least 60 vectors", () => {
    expect(VECTORS.length).toBeGreaterThanOrEqual(60);
  });

  test.each(VECTORS)("%s", (_label, { server, verdict, env }) => {
    const reason = validateStdioLaunch(server, { name: "srv", env: env ?? {} });
    if (verdict === "ok") expect(reason).toBeNull();
    else {
      expect(reason).not.toBeNull();
      expect(reason).toContain(verdict);
      expect(reason).toMatch(/^MCP server 'srv' /);
    }
  });
});

describe("validateStdioLaunch: messages", () => {
  test("a reason names the flag or variable from the policy's own lists, never a value from the request", () => {
    const secret = "s3cr3t-value-77";
    const reasons = [
      validateStdioLaunch(npx("--unknown", `-c=${secret}`, "pkg"), { name: "a", env: {} }),
      validateStdioLaunch(npx(`--call=${secret}`, "pkg"), { name: "a", env: {} }),
      validateStdioLaunch(withEnv({ node_options: secret }), { name: "a", env: {} }),
      validateStdioLaunch(cmd(`${secret}-bin`), { name: "a", env: {} }),
      validateStdioLaunch(cmd(`/opt/${secret}`), { name: "a", env: {} }),
      validateStdioLaunch(npx("--flag", secret), { name: "a", env: {} }),
      validateStdioLaunch(npx("-y", "python3", secret), { name: "a", env: {} }),
    ];
    for (const reason of reasons) {
      expect(reason).not.toBeNull();
      expect(reason).not.toContain(secret);
    }
  });

  test("the allowlist comes from MCP_HARNESS_STDIO_ALLOWLIST and can only grow; an odd server name is not echoed", () => {
    expect(validateStdioLaunch(cmd("npx", "-y", "pkg"), { env: { MCP_HARNESS_STDIO_ALLOWLIST: "node" } })).toBeNull();
    expect(validateStdioLaunch(cmd("deno"), { env: { MCP_HARNESS_STDIO_ALLOWLIST: "node" } })).toContain("Allowed commands: node, npx, uvx.");
    expect(validateStdioLaunch(cmd("/bin/sh"), { name: "bad\nname" })).toMatch(/^MCP server \(name not shown\) /);
  });
});

/**
 * The npx vectors against npm's own argv handling (npx-cli.js's option scan, then nopt with npm's
 * definitions), where this machine's npm is installed: every vector the policy allows must leave npm
 * with no `call`, `script-shell` or `node-options`, and every "unknown option swallows -c" case the
 * original let through must really run code there.
 */
const NPM_ROOT = path.join(path.dirname(process.execPath), "..", "lib", "node_modules", "npm");
const describeWithNpm = existsSync(path.join(NPM_ROOT, "bin", "npx-cli.js")) ? describe : describe.skip;
if (!existsSync(path.join(NPM_ROOT, "bin", "npx-cli.js"))) {
  console.warn(`skipping the npm cross-check: no npm installation at ${NPM_ROOT}`);
}

describeWithNpm("validateStdioLaunch: npx vectors against npm's real parser", () => {
  test.each([
    ["--foo", "sh", "--", "-c", "id"],
    ["--foo", "sh", "-y", "--", "-c", "id"],
    ["-y", "sh", "-c", "id"],
  ])("npm runs a shell for %j, and the policy refuses it", (...args: string[]) => {
    expect(npxAsNpmParsesIt(NPM_ROOT, args).remain[0]).toBe("sh");
    expect(validateStdioLaunch(npx(...args), { env: {} })).toContain("runs a shell, interpreter or command wrapper");
  });

  const npxVectors = VECTORS.filter(([, v]) => v.server.command === "npx" && Array.isArray(v.server.args));

  test.each(npxVectors.filter(([, v]) => v.verdict === "ok"))("allowed, and npm runs no code option: %s", (_label, { server }) => {
    const parsed = npxAsNpmParsesIt(NPM_ROOT, server.args as string[]);
    expect(parsed.execOptions).toEqual([]);
  });

  test.each([
    ["--unknown", "-c", "evil", "pkg"],
    ["--unknown", "-c=evil", "pkg"],
    ["--unknown", "--registry", "pkg", "-c", "x"],
    ["-yc", "evil", "pkg"],
    ["--yc", "evil", "pkg"],
    ["-call", "evil", "pkg"],
    ["--c", "evil", "pkg"],
    ["-", "-c", "evil"],
    ["-dd", "-c", "x", "pkg"],
    ["--scr", "/bin/sh", "pkg"],
    ["--node-opt", "--require=x", "pkg"],
  ])("npm runs code for %j, and the policy refuses it", (...args: string[]) => {
    const parsed = npxAsNpmParsesIt(NPM_ROOT, args);
    expect(parsed.execOptions.length).toBeGreaterThan(0);
    expect(validateStdioLaunch(npx(...args), { env: {} })).not.toBeNull();
  });
});
