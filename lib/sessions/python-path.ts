import * as nodePath from "node:path";

/** `python`, `python3`, `python3.12`, `pypy3`: an interpreter that puts the cwd on `sys.path` for `-m` and `-c`. */
const PYTHON = /^(?:python|pypy)(?:\d+(?:\.\d+)*)?(?:\.exe)?$/i;
/** Options of its own that take the next argument as their value (`-W error`, `-X utf8`). */
const WITH_VALUE = new Set(["W", "X"]);
const LONG_WITH_VALUE = new Set(["--check-hash-based-pycs"]);

/**
 * Whether a stdio launch is a Python interpreter run as `-m <module>` or `-c <code>`, which puts the working directory
 * first on `sys.path`: a `<module>.py` a tool wrote in the thread workspace would run instead. `python3 server.py`
 * puts the script's folder there instead (the operator's, and its sibling modules must keep importing), so it is not.
 * Single-letter options may be joined (`-um`, `-Bc`); reading stops at the script, `-` or `--`.
 */
export function putsCwdOnSysPath(command: string | undefined, args: readonly string[]): boolean {
  if (command === undefined || !PYTHON.test(nodePath.basename(command))) return false;
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i];
    if (!arg.startsWith("-") || arg === "-" || arg === "--") return false;
    if (arg.startsWith("--")) {
      if (LONG_WITH_VALUE.has(arg)) i += 1;
      continue;
    }
    for (let j = 1; j < arg.length; j += 1) {
      const flag = arg[j];
      if (flag === "m" || flag === "c") return true;
      if (WITH_VALUE.has(flag)) {
        // The value is the rest of this argument, or the next one.
        if (j === arg.length - 1) i += 1;
        break;
      }
    }
  }
  return false;
}
