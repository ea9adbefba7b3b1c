import {
  CONFIG_FILE_NAMES,
  CONFIG_PATH_ENV_VAR,
  ConfigFileNotFoundError,
  ConfigReadError,
  ConfigValidationError,
  configSearchDirs,
  loadExtensionsConfig,
  type LoadedExtensionsConfig,
} from "../config";
import type { Logger } from "../shared/logger";
import type { CliIo } from "./io";

/** A config problem the CLI reports as one message (exit 1); anything else is a crash. */
export class CliConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CliConfigError";
  }
}

/** Loads the config named on the command line (or found as SPEC §2.3 says), with CLI wording for errors. */
export async function loadForCli(configArg: string | undefined, io: CliIo, logger: Logger): Promise<LoadedExtensionsConfig> {
  try {
    return await loadExtensionsConfig({ configPath: configArg, env: io.env, cwd: io.cwd, logger });
  } catch (err) {
    if (err instanceof ConfigFileNotFoundError) {
      // The library names its option; here the path came from the command line.
      throw new CliConfigError(
        err.source === "configPath" ? `config file given as argument not found at ${err.path}` : err.message,
      );
    }
    if (err instanceof ConfigValidationError || err instanceof ConfigReadError) throw new CliConfigError(err.message);
    throw err;
  }
}

/** Where the search of SPEC §2.3 looked when it found nothing. */
export function searchedLocations(io: CliIo): string {
  const names = CONFIG_FILE_NAMES.join(" or ");
  const dirs = configSearchDirs(io.cwd).join(" and ");
  return `no config file given, ${CONFIG_PATH_ENV_VAR} is not set, and no ${names} in ${dirs}`;
}
