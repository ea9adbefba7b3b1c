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
