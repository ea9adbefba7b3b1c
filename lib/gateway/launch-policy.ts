import { normalizeTransportName } from "../config/schema";
import { EXEC_FLAGS, isCodeRunnerName, scanNpxArgs, scanUvxArgs, type LauncherScan } from "./launcher-args";

/**
 * The stdio launch policy of the HTTP API (SPEC §8.3, inventory §R): defence in depth for servers
 * registered through the API, not a trust boundary (the config file itself may say anything).
 *
 * Rules, in order; the first that fails is the verdict:
 * 1. Remote transports (`http`, `sse`) are not screened at all.
 * 2. `command` is one bare executable name from the allowlist (`npx`, `uvx`, plus the comma-separated
 *    `MCP_HARNESS_STDIO_ALLOWLIST`; case-sensitive; the list can only grow). Whitespace, path separators,
 *    shell metacharacters, quotes, control characters: refused.
 * 3. No environment variable that makes the child (or npm, git or a shell it starts) run code:
 *    `CODE_INJECTING_ENV_VARS` plus the stricter additions below, names compared trimmed and upper-cased.
 * 4. `npx`/`uvx`: no exec option in the launcher's own option region, as the launcher really parses it
 *    (`launcher-args.ts`), no missing package, and no shell/interpreter/wrapper as the package
 *    (`npx sh -c …`, `uvx python -c …`). Arguments after the package are the package's.
 * 5. Any other allowlisted command is screened whole: the exec flags and `-p` anywhere, single-dash
 *    clusters split (`node -pe`, `python -Ic`, `perl -E`), and `data:` URLs given to Node's module-loading
 *    flags (`--import=data:text/javascript,…`).
 *
 * Messages name the server, the launcher and the flag or variable from this module's own lists, never a
 * value from the request.
 *
 * Stricter than the Python original:
 * - npx: unknown options no longer hide the next `-c`; nopt's dash stripping, clusters, `no-` prefixes and
 *   abbreviations are resolved (`-call`, `--c`, `-yc`, `--cal`); `--script-shell`/`--shell` and
 *   `--node-options` count as exec options; a lone `-` does not end the options; the package token is
 *   denylisted; an npx/uvx entry without a package is refused (npx would start an interactive shell on the
 *   MCP pipe).
 * - env: `BASH_FUNC_*` (exported bash functions), `SHELLOPTS`/`BASHOPTS` (xtrace + PS4), npm's
 *   `npm_config_call|script_shell|shell|node_options`, and git's command hooks (`GIT_SSH_COMMAND`,
 *   `GIT_CONFIG_KEY_*`, …) used when npm fetches a git dependency.
 * - Node: `data:` module URLs behind `--import`/`--loader`/`--experimental-loader`/`--require`/`-r`.
 *
 * Residuals accepted (see README "stdio launch policy"):
 * - The package itself: npx/uvx run whatever the named package does, including packages that evaluate
 *   their arguments (a REPL-like tool outside the denylist) or install scripts; package sources
 *   (registry, `--registry`, `UV_INDEX_URL`, git URLs) are trusted like the package.
 * - npx runs any program in npm's global bin folder by name; the denylist covers shells, interpreters,
 *   command wrappers and package managers, not every program that can be talked into running a command.
 * - Files already on disk: `NODE_PATH`, `LD_LIBRARY_PATH`, `DYLD_LIBRARY_PATH`, `PATH`, `PERL5LIB`,
 *   `PYTHONWARNINGS`, `--userconfig`/`npm_config_userconfig`, `uvx --python <path>`, `node script.js`.
 * - `$VAR` references are screened as written and as they resolve in the gateway's environment; a server
 *   started by another process with another environment may resolve them differently.
 * - Interpreters that take code through a subcommand (`deno eval`) once an operator allowlists them.
 */

export const STDIO_ALLOWLIST_ENV_VAR = "MCP_HARNESS_STDIO_ALLOWLIST";
export const DEFAULT_STDIO_ALLOWLIST: readonly string[] = ["npx", "uvx"];

/** Inventory §R `_CODE_INJECTING_ENV_VARS`, matched on the trimmed, upper-cased name. */
export const CODE_INJECTING_ENV_VARS: readonly string[] = [
  "BASH_ENV",
  "DYLD_INSERT_LIBRARIES",
  "ENV",
  "LD_AUDIT",
  "LD_PRELOAD",
  "NODE_OPTIONS",
  "PERL5OPT",
  "PYTHONHOME",
  "PYTHONPATH",
  "PYTHONSTARTUP",
  "RUBYOPT",
];
const EXTRA_ENV_VARS: readonly string[] = [
  "SHELLOPTS",
  "BASHOPTS",
  "GIT_SSH_COMMAND",
  "GIT_SSH",
  "GIT_PROXY_COMMAND",
  "GIT_ASKPASS",
  "SSH_ASKPASS",
  "GIT_EXEC_PATH",
  "GIT_EXTERNAL_DIFF",
  "GIT_CONFIG_PARAMETERS",
  "GIT_CONFIG_COUNT",
];
const DENIED_ENV = new Set([...CODE_INJECTING_ENV_VARS, ...EXTRA_ENV_VARS]);
const DENIED_ENV_PREFIXES: readonly string[] = ["BASH_FUNC_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"];
/** npm reads `npm_config_<key>` (any case, `_` for `-`) as its option `<key>`. */
const NPM_CONFIG_EXEC_KEYS = new Set(["call", "script-shell", "shell", "node-options"]);

/** Letters that run code inside a short cluster of a generic command (inventory §R). */
const CLUSTERED_EXEC_LETTERS = ["c", "e", "p"] as const;
const WHOLE_DENIED_FLAGS = new Set([...EXEC_FLAGS, "-p"]);
const NODE_MODULE_FLAGS = new Set(["--import", "--loader", "--experimental-loader", "--require", "-r"]);

/** One bare executable name: letters, digits and `._+-`, not starting with a dot or dash. */
const BARE_COMMAND = /^[A-Za-z0-9_][A-Za-z0-9._+-]*$/;

/** The fields of a server entry the policy reads (the raw JSON of a config entry fits). */
export interface StdioLaunchServer {
  type?: unknown;
  transport?: unknown;
  command?: unknown;
  args?: unknown;
  env?: unknown;
  url?: unknown;
}

export interface StdioLaunchOptions {
  /** The server's name, for the message. */
  name?: string;
  /** Where `MCP_HARNESS_STDIO_ALLOWLIST` is read; default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** `{npx, uvx}` plus the commands of `MCP_HARNESS_STDIO_ALLOWLIST`, sorted. */
export function stdioAllowlist(env: NodeJS.ProcessEnv = process.env): string[] {
  const extra = (env[STDIO_ALLOWLIST_ENV_VAR] ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  return [...new Set([...DEFAULT_STDIO_ALLOWLIST, ...extra])].sort();
}

/** Whether the entry runs as a stdio child: its declared transport, else stdio unless it has only a `url`. */
export function isStdioServer(server: StdioLaunchServer): boolean {
  const declaredType = typeof server.type === "string" && server.type.trim() !== "" ? server.type : undefined;
  const declaredTransport = typeof server.transport === "string" && server.transport.trim() !== "" ? server.transport : undefined;
  const declared = declaredType ?? declaredTransport;
  if (declared !== undefined) {
    // An unknown transport name is refused by the schema; screen it as stdio meanwhile.
    return (normalizeTransportName(declared) ?? "stdio") === "stdio";
  }
  return !(server.url !== undefined && server.url !== null && server.command === undefined);
}

/**
 * SPEC §8.3: `null` when the entry may be registered through the API, else the reason (one line naming
 * the server and the flag or variable, never a value).
 */
export function validateStdioLaunch(server: StdioLaunchServer, options: StdioLaunchOptions = {}): string | null {
  if (!isStdioServer(server)) return null;
  const who = serverLabel(options.name);
  const { command } = server;
  if (typeof command !== "string" || command.trim() === "") return `${who} with stdio transport requires a command.`;
  if (!BARE_COMMAND.test(command)) return `${who} command must be a single executable name; put parameters in args instead.`;
  const allowlist = stdioAllowlist(options.env ?? process.env);
  if (!allowlist.includes(command)) {
    return `${who} uses a stdio command that is not allowed. Allowed commands: ${allowlist.join(", ")}. Configure ${STDIO_ALLOWLIST_ENV_VAR} to extend this list.`;
  }

  const envName = deniedEnvName(server.env);
  if (envName !== null) return `${who} sets environment variable '${envName}', which would run arbitrary code at process startup.`;

  const args = server.args ?? [];
  if (!Array.isArray(args)) return `${who} args must be a list of strings.`;
  const index = args.findIndex((arg) => typeof arg !== "string");
  if (index !== -1) return `${who} args[${index}] must be a string.`;
  const tokens = args as string[];

  const launcher = command.toLowerCase();
  if (launcher === "npx" || launcher === "uvx") {
    const scan: LauncherScan = launcher === "npx" ? scanNpxArgs(tokens) : scanUvxArgs(tokens);
    if (scan.execFlag !== null) return execMessage(who, scan.execFlag, command);
    if (scan.command === null || scan.command === "") return `${who} runs '${command}' without a package; name the package in args.`;
    if (isCodeRunnerName(scan.command)) {
      return `${who} runs a shell, interpreter or command wrapper through '${command}', which would run arbitrary code. Point the server at a package instead.`;
    }
    return null;
  }
  const flag = wholeCommandExecFlag(tokens);
  return flag === null ? null : execMessage(who, flag, command);
}

function execMessage(who: string, flag: string, command: string): string {
  return `${who} passes '${flag}' to '${command}', which would run arbitrary code. Point the server at a package or module instead.`;
}

function serverLabel(name: string | undefined): string {
  if (name === undefined) return "MCP server";
  return /^[A-Za-z0-9_.-]{1,64}$/.test(name) ? `MCP server '${name}'` : "MCP server (name not shown)";
}

/** The policy's own name for a denied variable of `env`, or `null`. */
function deniedEnvName(env: unknown): string | null {
  if (typeof env !== "object" || env === null || Array.isArray(env)) return null;
  for (const key of Object.keys(env)) {
    const name = key.trim().toUpperCase();
    if (DENIED_ENV.has(name)) return name;
    const prefix = DENIED_ENV_PREFIXES.find((p) => name.startsWith(p));
    if (prefix !== undefined) return `${prefix}*`;
    if (name.startsWith("NPM_CONFIG_")) {
      const option = name.slice("NPM_CONFIG_".length).replace(/_/g, "-").toLowerCase();
      if (NPM_CONFIG_EXEC_KEYS.has(option)) return `npm_config_${option.replace(/-/g, "_")}`;
    }
  }
  return null;
}

/** Inventory §R rule 157 for commands other than the package launchers, plus Node's `data:` module URLs. */
function wholeCommandExecFlag(args: readonly string[]): string | null {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i].trim();
    const [head, ...valueParts] = arg.split("=");
    const flag = (head ?? "").trim().toLowerCase();
    if (WHOLE_DENIED_FLAGS.has(flag)) return flag;
    if (NODE_MODULE_FLAGS.has(flag)) {
      const value = valueParts.length > 0 ? valueParts.join("=") : (args[i + 1] ?? "");
      if (value.trim().toLowerCase().startsWith("data:")) return flag;
    }
    if (flag.startsWith("-") && !flag.startsWith("--") && flag.length > 2) {
      for (const letter of flag.slice(1)) {
        if ((CLUSTERED_EXEC_LETTERS as readonly string[]).includes(letter)) return `-${letter}`;
      }
    }
  }
  return null;
}
