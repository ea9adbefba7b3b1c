/**
 * Whether a stdio command line has Python put its working directory first on `sys.path`: `-m <module>` and
 * `-c <code>` do; `python3 /path/server.py` puts the script's folder there instead, which `PYTHONSAFEPATH` would
 * drop (the server's own sibling modules would no longer import).
 */
import * as path from "node:path";

const PYTHON = /^(python|pypy)(\d+(\.\d+)*)?$/;
/** Options of Python's that take a value: `-W arg`, `-X opt`, `--check-hash-based-pycs mode`. */
const VALUE_FLAGS = "WX";
const VALUE_LONG_OPTIONS = new Set(["--check-hash-based-pycs"]);

const isPython = (word: string): boolean => PYTHON.test(path.basename(word).replace(/\.exe$/i, ""));

/** Reads Python's options after the interpreter: true at `-m` or `-c` (alone or in a cluster, `-um`), false at the script. */
function pythonRunsFromCwd(args: readonly string[]): boolean {
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index];
    if (arg === "--" || arg === "-" || !arg.startsWith("-")) return false;
    if (arg.startsWith("--")) {
      if (VALUE_LONG_OPTIONS.has(arg)) index += 1;
      continue;
    }
    for (let at = 1; at < arg.length; at += 1) {
      const flag = arg[at];
      if (flag === "m" || flag === "c") return true;
      if (VALUE_FLAGS.includes(flag)) {
        if (at === arg.length - 1) index += 1;
        break;
      }
    }
  }
  return false;
}

/**
 * True for `python3 -m x` (any interpreter named python/pypy, by path or not), for a launcher that starts one
 * (`uv run python -m x`, `env python3 -c ...`), and for `uv run -m x` / `uv run --module x`.
 */
export function startsPythonFromCwd(command: string, args: readonly string[]): boolean {
  if (isPython(command)) return pythonRunsFromCwd(args);
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index];
    if (isPython(arg)) return pythonRunsFromCwd(args.slice(index + 1));
    if (arg.endsWith(".py")) return false;
    if (path.basename(command) === "uv" && (arg === "-m" || arg === "--module")) return true;
  }
  return false;
}
