/**
 * npm's own reading of `npx <args>`, for cross-checking the launch policy: the option scan of npm's
 * `bin/npx-cli.js` (reproduced line for line, since that file runs npm when loaded), then `nopt` with
 * npm's real option definitions and shorthands, loaded from the npm installation at `npmRoot`.
 */
import * as path from "node:path";

interface NpmDefinitions {
  definitions: Record<string, { type: unknown }>;
  shorthands: Record<string, string[]>;
}
interface Nopt {
  nopt(args: string[], options: Record<string, unknown>): Record<string, unknown> & { argv: { remain: string[] } };
  typeDefs: unknown;
}

export interface NpxParse {
  /** The options npm exec would run code with: call, script-shell, node-options (when set to a non-empty value). */
  execOptions: string[];
  remain: string[];
}

export function npxAsNpmParsesIt(npmRoot: string, args: readonly string[]): NpxParse {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { definitions, shorthands } = require(path.join(npmRoot, "node_modules", "@npmcli", "config", "lib", "definitions")) as NpmDefinitions;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const nopt = require(path.join(npmRoot, "node_modules", "nopt", "lib", "nopt-lib.js")) as Nopt;

  const argv = ["node", "npm-cli", "exec", ...args];
  const removedSwitches = new Set(["always-spawn", "ignore-existing", "shell-auto-fallback"]);
  const removedOpts = new Set(["npm", "node-arg", "n"]);
  const removed = new Set([...removedSwitches, ...removedOpts]);
  const isBoolean = (type: unknown) => type === Boolean || (Array.isArray(type) && type.includes(Boolean));
  const npmSwitches = Object.entries(definitions)
    .filter(([, d]) => isBoolean(d.type))
    .map(([k]) => k);
  const switches = new Set([...removedSwitches, ...npmSwitches, "no-install", "quiet", "q", "version", "v", "help", "h"]);
  const opts = new Set([...removedOpts, "package", "p", "cache", "userconfig", "call", "c", "shell", "npm", "node-arg", "n"]);
  for (let i = 3; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") break;
    if (!/^-/.test(arg)) {
      argv.splice(i, 0, "--");
      break;
    }
    const [key, ...v] = arg.replace(/^-+/, "").split("=");
    if (key === "p") argv[i] = ["--package", ...v].join("=");
    else if (key === "shell") argv[i] = ["--script-shell", ...v].join("=");
    else if (key === "no-install") argv[i] = "--yes=false";
    else if (shorthands[key] && !removed.has(key)) {
      const expanded = [...shorthands[key]];
      if (v.length) expanded.push(v.join("="));
      argv.splice(i, 1, ...expanded);
      i--;
      continue;
    }
    if (removed.has(key)) {
      argv.splice(i, 1);
      i--;
    }
    if (v.length === 0 && !switches.has(key) && (opts.has(key) || !/^-/.test(argv[i + 1] ?? ""))) {
      if (removed.has(key)) argv.splice(i + 1, 1);
      else i++;
    }
  }
  const types = Object.fromEntries(Object.entries(definitions).map(([k, d]) => [k, d.type]));
  const parsed = nopt.nopt(argv.slice(2), {
    types,
    shorthands,
    typeDefs: nopt.typeDefs,
    unknownHandler: false,
    abbrevHandler: false,
    invalidHandler: false,
  });
  const execOptions = ["call", "script-shell", "node-options"].filter((name) => {
    const value = parsed[name];
    return value !== undefined && value !== "" && value !== false;
  });
  return { execOptions, remain: parsed.argv.remain.slice(1) };
}
