import { realpathSync } from "node:fs";
import * as nodePath from "node:path";

export const DATA_DIR_ENV_VAR = "MCP_HARNESS_DATA_DIR";
export const DEFAULT_DATA_DIR = ".mcp-harness";

/**
 * The base folder of thread workspaces and of the default task database: an explicit option, else
 * `MCP_HARNESS_DATA_DIR`, else `./.mcp-harness`; absolute, resolved from `cwd`.
 */
export function resolveDataDir(opts: { dataDir?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {}): string {
  const env = opts.env ?? process.env;
  const chosen = opts.dataDir?.trim() || env[DATA_DIR_ENV_VAR]?.trim() || DEFAULT_DATA_DIR;
  return nodePath.resolve(opts.cwd ?? process.cwd(), chosen);
}

/**
 * `dir` with the symbolic links of its existing part resolved (a part not created yet stays as written). A stdio child's
 * working folder is its real path (`process.cwd()`), and a server that confines itself to that folder (the official
 * filesystem server) refuses every path it is sent in another spelling: thread folders are worked on by their real path.
 */
export function realFolderPath(dir: string): string {
  const missing: string[] = [];
  for (let existing = dir; ; ) {
    try {
      return nodePath.join(realpathSync.native(existing), ...missing.reverse());
    } catch {
      const parent = nodePath.dirname(existing);
      if (parent === existing) return dir;
      missing.push(nodePath.basename(existing));
      existing = parent;
    }
  }
}
