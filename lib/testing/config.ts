/** Writing a harness config file for a test. */
import { mkdtemp, writeFile } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import type { ExtensionsConfigInput } from "../config";

export interface WriteTestConfigOptions {
  /** Folder to write into (default: a new folder under the OS temp dir). */
  dir?: string;
  /** File name (default `extensions_config.json`). */
  fileName?: string;
}

/** Writes `config` as JSON and returns the file's path, for `createMcpToolkit({ configPath })`. */
export async function writeTestConfig(config: ExtensionsConfigInput, options: WriteTestConfigOptions = {}): Promise<string> {
  const dir = options.dir ?? (await mkdtemp(path.join(os.tmpdir(), "mcp-harness-test-")));
  const file = path.join(dir, options.fileName ?? "extensions_config.json");
  await writeFile(file, `${JSON.stringify(config, null, 2)}\n`, "utf8");
  return file;
}
