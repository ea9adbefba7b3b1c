/** The command line of one subcommand: positionals, `--flags` and `--option <value>`; anything else is a usage error. */
export interface ParsedArgs {
  positional: string[];
  flags: Set<string>;
  /** Options that take a value (`--name value` or `--name=value`); the last one given wins. */
  values: Map<string, string>;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

export function parseArgs(
  args: readonly string[],
  allowedFlags: readonly string[],
  maxPositional: number,
  valueOptions: readonly string[] = [],
): ParsedArgs {
  const positional: string[] = [];
  const flags = new Set<string>();
  const values = new Map<string, string>();
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i]!;
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      const name = arg.slice(2, eq === -1 ? undefined : eq);
      if (valueOptions.includes(name)) {
        const value = eq === -1 ? args[++i] : arg.slice(eq + 1);
        if (value === undefined || (eq === -1 && value.startsWith("--"))) throw new UsageError(`option '--${name}' needs a value`);
        values.set(name, value);
        continue;
      }
      // The option's name only: what follows '=' may be a credential typed in the wrong place.
      if (!allowedFlags.includes(name)) throw new UsageError(`unknown option '--${name}'`);
      if (eq !== -1) throw new UsageError(`option '--${name}' takes no value`);
      flags.add(name);
    } else {
      positional.push(arg);
    }
  }
  if (positional.length > maxPositional) {
    throw new UsageError(`unexpected argument (argument ${maxPositional + 1}): this command takes ${maxPositional === 0 ? "none" : `at most ${maxPositional}`}`);
  }
  return { positional, flags, values };
}
