/** The command line of one subcommand: positionals and `--flags`; anything else is a usage error. */
export interface ParsedArgs {
  positional: string[];
  flags: Set<string>;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

export function parseArgs(args: readonly string[], allowedFlags: readonly string[], maxPositional: number): ParsedArgs {
  const positional: string[] = [];
  const flags = new Set<string>();
  for (const arg of args) {
    if (arg.startsWith("--")) {
      const flag = arg.slice(2);
      if (!allowedFlags.includes(flag)) throw new UsageError(`unknown option '${arg}'`);
      flags.add(flag);
    } else {
      positional.push(arg);
    }
  }
  if (positional.length > maxPositional) throw new UsageError(`unexpected argument '${positional[maxPositional]}'`);
  return { positional, flags };
}
