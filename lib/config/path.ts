import { statSync } from "node:fs";
import * as nodePath from "node:path";

export const CONFIG_PATH_ENV_VAR = "MCP_HARNESS_CONFIG";
export const CONFIG_FILE_NAMES = ["extensions_config.json", "mcp_config.json"] as const;

export type ConfigPathSource = "configPath" | typeof CONFIG_PATH_ENV_VAR;

/** An explicitly named config file (option or environment variable) does not exist. */
export class ConfigFileNotFoundError extends Error {
  readonly code = "ENOENT";
  constructor(
    readonly source: ConfigPathSource,
    readonly path: string,
  ) {
    super(
      source === "configPath"
        ? `Extensions config file specified by option \`configPath\` not found at ${path}`
        : `Extensions config file specified by environment variable \`${CONFIG_PATH_ENV_VAR}\` not found at ${path}`,
    );
    this.name = "ConfigFileNotFoundError";
  }
}

export interface ResolveConfigPathOptions {
  configPath?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

/**
 * SPEC §2.3: explicit `configPath`, then `MCP_HARNESS_CONFIG`, then `extensions_config.json` /
 * `mcp_config.json` in the working directory and then in the project root. `null` when nothing is found.
 * Runs on every `getTools()` call, so it only stats.
 */
export function resolveExtensionsConfigPath(opts: ResolveConfigPathOptions = {}): string | null {
  const cwd = opts.cwd ?? process.cwd();
  const env = opts.env ?? process.env;

  if (opts.configPath !== undefined && opts.configPath !== "") {
    const explicit = nodePath.resolve(cwd, opts.configPath);
    if (!exists(explicit)) throw new ConfigFileNotFoundError("configPath", explicit);
    return explicit;
  }

  const fromEnv = env[CONFIG_PATH_ENV_VAR];
  if (fromEnv !== undefined && fromEnv !== "") {
    const resolved = nodePath.resolve(cwd, fromEnv);
    if (!exists(resolved)) throw new ConfigFileNotFoundError(CONFIG_PATH_ENV_VAR, resolved);
    return resolved;
  }

  for (const dir of configSearchDirs(cwd)) {
    const found = findConfigIn(dir);
    if (found) return found;
  }
  return null;
}

/** The folders the search looks in, in order: the working directory, then the project root when it differs. */
export function configSearchDirs(cwd: string = process.cwd()): string[] {
  const dir = nodePath.resolve(cwd);
  const root = projectRootOf(dir);
  return root !== null && root !== dir ? [dir, root] : [dir];
}

function findConfigIn(dir: string): string | null {
  for (const name of CONFIG_FILE_NAMES) {
    const candidate = nodePath.join(dir, name);
    if (isFile(candidate)) return candidate;
  }
  return null;
}

/** Only "no such entry" counts as missing; any other stat failure is left for the read to report. */
function exists(file: string): boolean {
  try {
    return statSync(file, { throwIfNoEntry: false }) !== undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ENOTDIR";
  }
}

function isFile(file: string): boolean {
  try {
    return statSync(file, { throwIfNoEntry: false })?.isFile() ?? false;
  } catch {
    return false;
  }
}

const projectRootCache = new Map<string, string | null>();

/** The nearest directory at or above `dir` that holds a `package.json`; cached per directory. */
function projectRootOf(dir: string): string | null {
  const cached = projectRootCache.get(dir);
  if (cached !== undefined) return cached;
  let current = dir;
  let root: string | null = null;
  for (;;) {
    if (isFile(nodePath.join(current, "package.json"))) {
      root = current;
      break;
    }
    const parent = nodePath.dirname(current);
    if (parent === current) break;
    current = parent;
  }
  projectRootCache.set(dir, root);
  return root;
}
