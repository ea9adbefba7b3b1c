/**
 * How the two package launchers of the stdio allowlist read their own options, so the launch policy
 * screens exactly the tokens the launcher itself interprets (SPEC §8.3, inventory §R), and is stricter
 * than the Python original where the launchers' real parsers let code execution through.
 *
 * npx (npm ≥ 7: `bin/npx-cli.js`, then nopt inside `npm exec`), checked against npm 11.19:
 * - npx-cli walks the tokens: `--` ends the options; a token starting with `-` is an option (a lone `-`
 *   too: it does not end them); the first other token is the package, before which npx inserts `--`.
 *   An option consumes the next token as its value when it has no `=value`, is not a boolean switch, and
 *   either is one of npx's value options (`package p cache userconfig call c shell npm node-arg n`) or
 *   the next token does not start with `-`. So an unknown option never swallows `-c`: the original's
 *   "unknown options consume a value" let `npx --unknown -c CODE pkg` through; here `-c` is screened.
 * - Every `-`-token of that region reaches nopt, which strips ALL leading dashes (`-call` and `--c` are
 *   `--call`), expands clusters of one-letter shorthands (`-yc` is `--yes --call`), strips `no-`
 *   prefixes and expands unique abbreviations of long names (`--cal` is `--call`, `--scr` is
 *   `--script-shell`, `--node-opt` is `--node-options`). The original compared tokens verbatim.
 * - `--shell` becomes `--script-shell`: the shell npm runs the package's bin (and `--call`) with.
 *   `--node-options` sets NODE_OPTIONS for it. Both run code, so both are exec options here.
 * - Every `-`-token of the region is screened, also one taken as an option's value: whether nopt then
 *   reads it as an option depends on the value's type, so it is refused rather than guessed. Likewise a
 *   value npx-cli skipped is a positional for nopt when the option is unknown or boolean, and the first
 *   positional is what npm runs (`npx --foo sh -- -c CODE` runs `sh -c CODE`): such a value is checked
 *   against the command denylist too.
 * - The token after the options is not always a package: when no package in the tree has that bin,
 *   npx runs a program of that name from npm's global bin folder through `sh -c` (`npx sh -c CODE`,
 *   `npx node -e CODE` and `npx python3 -c CODE` all run code; verified with npm 11.19 --offline). So
 *   the command token is checked against a denylist of shells, interpreters, command wrappers and
 *   package managers (`isCodeRunnerName`). Arguments after it are the package's and npm quotes them for
 *   the shell (`$(…)` and backticks there are literal).
 *
 * uvx (uv ≥ 0.4, clap): options end at `--` or the first non-option token; value options (the
 * 47 of `UVX_VALUE_OPTIONS`) take the next token; no abbreviations. uvx has no option that runs code,
 * so its long exec spellings are a tripwire only (`-c` is `--constraints`, `-p` is `--python`). Its
 * command token is denylisted like npx's (`uvx python -c CODE` runs the interpreter).
 */

/** The exec options of SPEC §8.3 / inventory §R (`_ARBITRARY_EXEC_ARGS`). */
export const EXEC_FLAGS: readonly string[] = ["-c", "--call", "-e", "--eval", "--print", "--shell", "--node-arg", "--node-options"];

/** npm long options that run code (after nopt's resolution), with the shortest unique abbreviation in npm 11. */
const NPM_EXEC_OPTIONS: readonly { name: string; flag: string; minPrefix: number }[] = [
  { name: "call", flag: "--call", minPrefix: 3 },
  { name: "script-shell", flag: "--script-shell", minPrefix: 2 },
  { name: "shell", flag: "--shell", minPrefix: 2 },
  { name: "node-options", flag: "--node-options", minPrefix: 3 },
];
/** Long spellings of the original's exec set that are not npm options (npx still refuses them). */
const NPX_TRIPWIRE_KEYS: ReadonlyMap<string, string> = new Map([
  ["e", "-e"],
  ["eval", "--eval"],
  ["print", "--print"],
  ["node-arg", "--node-arg"],
]);
/**
 * Real npm options that are prefixes of an exec option's name, or spelled with one-letter shorthands only
 * (npm 11: `ca`): exact names, so nopt neither expands nor splits them.
 */
const NPM_EXACT_NON_EXEC = new Set(["ca"]);

/** npm 11 one-letter shorthands (`@npmcli/config` definitions); a cluster of these is expanded letter by letter. */
const NPM_SINGLE_SHORTHANDS = new Set("dqsnacfgLlmpCSBDEOP?Hhvwy".split(""));

/** npm 11 shorthands as npx-cli expands them before its own scan (value-bearing ones carry their value). */
const NPM_SHORTHANDS: ReadonlyMap<string, readonly string[]> = new Map([
  ["d", ["--loglevel", "info"]],
  ["q", ["--loglevel", "warn"]],
  ["s", ["--loglevel", "silent"]],
  ["a", ["--all"]],
  ["c", ["--call"]],
  ["f", ["--force"]],
  ["g", ["--global"]],
  ["L", ["--location"]],
  ["l", ["--long"]],
  ["m", ["--message"]],
  ["C", ["--prefix"]],
  ["S", ["--save"]],
  ["B", ["--save-bundle"]],
  ["D", ["--save-dev"]],
  ["E", ["--save-exact"]],
  ["O", ["--save-optional"]],
  ["P", ["--save-prod"]],
  ["?", ["--usage"]],
  ["H", ["--usage"]],
  ["h", ["--usage"]],
  ["v", ["--version"]],
  ["w", ["--workspace"]],
  ["y", ["--yes"]],
  ["enjoy-by", ["--before"]],
  ["dd", ["--loglevel", "verbose"]],
  ["ddd", ["--loglevel", "silly"]],
  ["quiet", ["--loglevel", "warn"]],
  ["silent", ["--loglevel", "silent"]],
  ["verbose", ["--loglevel", "verbose"]],
  ["desc", ["--description"]],
  ["help", ["--usage"]],
  ["local", ["--no-global"]],
  ["no", ["--no-yes"]],
  ["porcelain", ["--parseable"]],
  ["readonly", ["--read-only"]],
  ["reg", ["--registry"]],
  ["iwr", ["--include-workspace-root"]],
  ["ws", ["--workspaces"]],
]);

/**
 * Boolean npm options (inventory §R, npm 10.9.4; every one is boolean in npm 11.19 as well) plus
 * npx-cli's own switches. A name boolean in only one of those versions counts as value-taking, which
 * can only extend the screened region.
 */
const NPX_SWITCHES = new Set([
  ..."all allow-same-version audit bin-links commit-hooks description dev diff-ignore-all-space diff-name-only diff-no-prefix diff-text dry-run engine-strict expect-results force foreground-scripts format-package-lock fund git-tag-version global global-style if-present ignore-scripts include-staged include-workspace-root install-links json legacy-bundling legacy-peer-deps link long offline omit-lockfile-registry-resolved optional package-lock package-lock-only parseable prefer-dedupe prefer-offline prefer-online production progress provenance read-only rebuild-bundle save save-bundle save-dev save-exact save-optional save-peer save-prod shrinkwrap sign-git-commit sign-git-tag strict-peer-deps strict-ssl timing unicode update-notifier usage version versions workspaces workspaces-update yes".split(
    " ",
  ),
  "always-spawn",
  "ignore-existing",
  "shell-auto-fallback",
  "no-install",
  "quiet",
  "q",
  "version",
  "v",
  "help",
  "h",
]);
const NPX_VALUE_OPTIONS = new Set(["package", "p", "cache", "userconfig", "call", "c", "shell", "npm", "node-arg", "n"]);
const NPX_REMOVED = new Set(["always-spawn", "ignore-existing", "shell-auto-fallback", "npm", "node-arg", "n"]);

/** uv 0.11.1 options of `uvx` that take a value (inventory §R `_UVX_VALUE_ARGS`). */
const UVX_VALUE_OPTIONS = new Set(
  "--allow-insecure-host --build-constraints --cache-dir --color --config-file --config-setting --config-settings-package --constraints --default-index --directory --env-file --exclude-newer --exclude-newer-package --extra-index-url --find-links --fork-strategy --from --index --index-strategy --index-url --keyring-provider --link-mode --no-binary-package --no-build-isolation-package --no-build-package --no-sources-package --overrides --prerelease --project --python --python-platform --refresh-package --reinstall-package --resolution --torch-backend --upgrade-package --with --with-editable --with-requirements -C -P -b -c -f -i -p -w".split(
    " ",
  ),
);
const UVX_EXEC_FLAGS = new Set(["--call", "--eval", "--print", "--shell", "--node-arg", "--node-options"]);

/** What a launcher scan found: the exec flag it hit, else the command token (package) it stopped at. */
export interface LauncherScan {
  execFlag: string | null;
  /** The first token after the launcher's options (the package or program), `null` when there is none. */
  command: string | null;
  /** The tokens after `command`. */
  rest: readonly string[];
}

/** The exec flag an npx option token resolves to under nopt, or `null`. */
export function npxExecFlag(token: string): string | null {
  const key = token.replace(/^-+/, "").split("=")[0] ?? "";
  if (key === "") return null;
  const tripwire = NPX_TRIPWIRE_KEYS.get(key.toLowerCase());
  if (tripwire !== undefined && (key.length > 1 || key === "e")) return tripwire;
  if (key === "shell") return "--shell";
  if (key === "c") return "-c";
  const exact = NPM_EXEC_OPTIONS.find((option) => option.name === key);
  if (exact !== undefined) return exact.flag;
  if (NPM_EXACT_NON_EXEC.has(key)) return null;
  const shorthand = NPM_SHORTHANDS.get(key);
  if (shorthand !== undefined) return execOfLongNames(shorthand);
  if (key.length > 1 && [...key].every((ch) => NPM_SINGLE_SHORTHANDS.has(ch))) {
    return key.includes("c") ? "-c" : null;
  }
  let name = key.toLowerCase();
  while (name.startsWith("no-")) name = name.slice(3);
  if (NPM_EXACT_NON_EXEC.has(name)) return null;
  for (const exec of NPM_EXEC_OPTIONS) {
    if (name.length >= exec.minPrefix && exec.name.startsWith(name)) return exec.flag;
  }
  return null;
}

function execOfLongNames(tokens: readonly string[]): string | null {
  for (const token of tokens) {
    if (!token.startsWith("--")) continue;
    const name = token.slice(2);
    const exec = NPM_EXEC_OPTIONS.find((option) => option.name === name);
    if (exec !== undefined) return exec.flag;
  }
  return null;
}

/** npx-cli's option scan (see the header), screening every `-`-token of the region. */
export function scanNpxArgs(args: readonly string[]): LauncherScan {
  const tokens = args.map((arg) => arg.trim());
  let i = 0;
  while (i < tokens.length) {
    const token = tokens[i];
    if (token === "--") {
      i += 1;
      break;
    }
    if (!token.startsWith("-")) break;
    const exec = npxExecFlag(token);
    if (exec !== null) return { execFlag: exec, command: null, rest: [] };
    const [rawKey, ...value] = token.replace(/^-+/, "").split("=");
    const key = rawKey ?? "";
    // Shorthands expand before npx-cli decides about a value; a value-bearing expansion brings its own.
    const expanded = NPM_SHORTHANDS.get(key);
    let consumes: boolean;
    if (key === "p") consumes = value.length === 0;
    else if (expanded !== undefined && !NPX_REMOVED.has(key)) consumes = value.length === 0 && expandedTakesNext(expanded, tokens[i + 1]);
    else consumes = value.length === 0 && !NPX_SWITCHES.has(key) && (NPX_VALUE_OPTIONS.has(key) || !startsWithDash(tokens[i + 1]));
    if (consumes && i + 1 < tokens.length) {
      const taken = tokens[i + 1];
      if (taken.startsWith("-")) {
        const hidden = npxExecFlag(taken);
        if (hidden !== null) return { execFlag: hidden, command: null, rest: [] };
      } else if (isCodeRunnerName(taken)) {
        // nopt reads an unknown or boolean option without its value, so this token can be npm's command.
        return { execFlag: null, command: taken, rest: tokens.slice(i + 2) };
      }
      i += 2;
    } else {
      i += 1;
    }
  }
  return { execFlag: null, command: tokens[i] ?? null, rest: tokens.slice(i + 1) };
}

/** After `-d` → `--loglevel info` the value is already there; after `-C` → `--prefix` the next token is taken. */
function expandedTakesNext(expanded: readonly string[], next: string | undefined): boolean {
  if (expanded.length > 1) return false;
  const key = (expanded[0] ?? "").replace(/^-+/, "");
  // No `no-` exception: npx-cli takes the next token as the value of any option not among its switches, so
  // `-local false -c CODE` (`--no-global false`) leaves `-c` an option.
  if (NPX_SWITCHES.has(key)) return false;
  return NPX_VALUE_OPTIONS.has(key) || !startsWithDash(next);
}

function startsWithDash(token: string | undefined): boolean {
  return token !== undefined && token.startsWith("-");
}

/** uvx (clap): value options take the next token; unknown options take none; long exec spellings are refused. */
export function scanUvxArgs(args: readonly string[]): LauncherScan {
  const tokens = args.map((arg) => arg.trim());
  let i = 0;
  while (i < tokens.length) {
    const token = tokens[i];
    if (token === "--") {
      i += 1;
      break;
    }
    if (!token.startsWith("-") || token === "-") break;
    const flag = uvxFlag(token);
    if (UVX_EXEC_FLAGS.has(flag)) return { execFlag: flag, command: null, rest: [] };
    if (!token.includes("=") && (UVX_VALUE_OPTIONS.has(flag) || clusterTakesNext(token)) && i + 1 < tokens.length) {
      const taken = tokens[i + 1];
      if (taken.startsWith("--") && UVX_EXEC_FLAGS.has(uvxFlag(taken))) return { execFlag: uvxFlag(taken), command: null, rest: [] };
      i += 2;
    } else {
      i += 1;
    }
  }
  return { execFlag: null, command: tokens[i] ?? null, rest: tokens.slice(i + 1) };
}

/**
 * Whether a cluster of short uvx flags (`-qp`) ends with an option that takes a value, which is then the next token
 * (clap: `-qp 3.12` is `--quiet --python 3.12`; in `-qp3.12` the value is attached).
 */
function clusterTakesNext(token: string): boolean {
  if (token.startsWith("--") || token.length <= 2) return false;
  for (let i = 1; i < token.length; i += 1) {
    if (UVX_VALUE_OPTIONS.has(`-${token[i]}`)) return i === token.length - 1;
  }
  return false;
}

/** Long flags compare lower-cased; short ones keep their case (`-C` is not `-c`). */
function uvxFlag(token: string): string {
  const flag = token.split("=")[0] ?? "";
  return flag.startsWith("--") ? flag.toLowerCase() : flag;
}

const CODE_RUNNER_NAMES = new Set(
  (
    "sh bash dash zsh ksh mksh pdksh oksh loksh yash ash rbash fish csh tcsh es rc xonsh nu elvish busybox toybox " +
    "env xargs nohup nice ionice timeout stdbuf setsid sudo su doas runuser chroot unshare nsenter script watch flock " +
    "strace ltrace gdb lldb valgrind find time exec eval command builtin parallel expect " +
    "node nodejs deno bun bunx tsx ts-node ts-node-esm zx jiti esno esrun vite-node " +
    "npx npm pnpm pnpx yarn yarnpkg corepack uv uvx pip pip3 pipx poetry pdm hatch conda mamba micromamba " +
    "perl ruby irb php lua luajit tclsh wish awk gawk mawk nawk sed ed ex vi vim nvim emacs " +
    "make gmake cmake ninja git ssh socat nc ncat netcat telnet " +
    "ipython bpython hy rscript r julia ghci runghc swift scala kotlin jshell jrunscript java osascript pwsh powershell cmd"
  ).split(" "),
);
/** Interpreter names, bare or with a version suffix: python, python3, python3.12, pypy3.10, cpython3.12, perl5.36, ruby3.2, php8.2, lua5.4. */
const VERSIONED_RUNNER = /^(?:python|pypy|cpython|graalpy|perl|ruby|php|lua|node|tclsh|wish)(?:[0-9][0-9.]*[a-z]?)?$/;

/**
 * Whether a launcher's command token names a program that runs code given in its arguments. The token
 * is a package spec: its version (`node@20`, `python==3.12`, `python@3.12`) and extras are ignored; a
 * scoped npm package (`@scope/x`) or a path-like spec is never a runner.
 */
export function isCodeRunnerName(token: string): boolean {
  if (token.startsWith("@")) return false;
  const name = token.split(/[@=<>~!\[;]/)[0]?.trim().toLowerCase() ?? "";
  if (name === "" || name.includes("/") || name.includes("\\") || name.includes(":")) return false;
  return CODE_RUNNER_NAMES.has(name) || VERSIONED_RUNNER.test(name);
}
