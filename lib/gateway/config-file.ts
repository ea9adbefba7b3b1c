import { existsSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import * as nodePath from "node:path";
import { parseJsonBytes } from "../config/json";
import { CONFIG_FILE_NAMES, CONFIG_PATH_ENV_VAR, configSearchDirs, resolveExtensionsConfigPath } from "../config/path";
import { ConfigValidationError, formatIssuePath } from "../config/errors";
import { withConfigWriteLock, type FileLockOptions } from "./file-lock";
import { isRecord } from "./masking";
import { atomicWriteFile, resolveWriteTarget, type WriteStep } from "./write";

/**
 * The config file as the HTTP API reads and rewrites it: the raw JSON (placeholders intact), found as
 * SPEC §2.3 says, and replaced only under both write locks with a fresh read of the file inside them.
 */

export interface ConfigFileOptions {
  configPath?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  lock?: FileLockOptions;
  onWriteStep?: (step: WriteStep) => void | Promise<void>;
}

export interface RawConfig {
  /** `null` when no file exists (yet). */
  path: string | null;
  raw: Record<string, unknown>;
}

export class ConfigFile {
  constructor(private readonly options: ConfigFileOptions = {}) {}

  /** The existing file (SPEC §2.3), or `null` (an explicit path that does not exist yet counts as none here). */
  locate(): string | null {
    const explicit = this.explicitPath();
    if (explicit !== null) return existsSync(explicit) ? explicit : null;
    return resolveExtensionsConfigPath({ env: {}, cwd: this.options.cwd });
  }

  /** Where a write goes: the explicit path (option, then MCP_HARNESS_CONFIG), else the file found, else `<cwd>/extensions_config.json`. */
  writePath(): string {
    return this.explicitPath() ?? this.locate() ?? nodePath.join(configSearchDirs(this.cwd())[0], CONFIG_FILE_NAMES[0]);
  }

  async read(): Promise<RawConfig> {
    const path = this.locate();
    if (path === null) return { path: null, raw: {} };
    return { path, raw: await readRaw(path) };
  }

  /**
   * Read-modify-write under the process lock and the sidecar file lock. `mutate` gets the raw JSON read
   * inside the locks (`{}` when there is no file) and returns the document to write; when it throws,
   * nothing is written.
   */
  async update(mutate: (raw: Record<string, unknown>, path: string) => Record<string, unknown> | Promise<Record<string, unknown>>): Promise<RawConfig> {
    const path = this.writePath();
    const target = await resolveWriteTarget(path);
    await mkdir(nodePath.dirname(target), { recursive: true }); // the lock file lives there
    return withConfigWriteLock(
      target,
      async () => {
        const current = await readRaw(target);
        const next = await mutate(current, path);
        await atomicWriteFile(target, `${JSON.stringify(next, null, 2)}\n`, { onStep: this.options.onWriteStep });
        return { path, raw: next };
      },
      this.options.lock,
    );
  }

  private cwd(): string {
    return this.options.cwd ?? process.cwd();
  }

  private explicitPath(): string | null {
    const env = this.options.env ?? process.env;
    const named = this.options.configPath || env[CONFIG_PATH_ENV_VAR] || "";
    return named === "" ? null : nodePath.resolve(this.cwd(), named);
  }
}

/** The parsed file; a missing file is `{}`; a document that is not an object is an error. */
async function readRaw(path: string): Promise<Record<string, unknown>> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw err;
  }
  const parsed = parseJsonBytes(bytes, path);
  if (!isRecord(parsed)) throw new ConfigValidationError(path, [{ path: formatIssuePath([]), message: "expected a JSON object" }]);
  return parsed;
}
