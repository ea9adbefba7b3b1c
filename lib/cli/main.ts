#!/usr/bin/env node
import { checkCommand, toolsCommand, type CliIo } from "./commands";

const USAGE = `usage: mcp-harness <command> [options]

commands:
  check [config] [--json]   validate an extensions config (exit 1 on errors)
  tools [config] [--json]   discover the MCP tools of every enabled server
`;

export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "check":
      return checkCommand(rest, io);
    case "tools":
      return toolsCommand(rest, io);
    case undefined:
    case "help":
    case "--help":
    case "-h":
      io.out(USAGE);
      return command === undefined ? 2 : 0;
    case "tasks":
    case "worker":
      io.err(`mcp-harness ${command}: durable tasks are not available in this version`);
      return 2;
    default:
      io.err(`unknown command '${command}'\n${USAGE}`);
      return 2;
  }
}

// `require` is undefined in the ES-module build; the bin is the CommonJS one.
if (typeof require === "function" && require.main === module) {
  const io: CliIo = {
    out: (t) => process.stdout.write(`${t}\n`),
    err: (t) => process.stderr.write(`${t}\n`),
    env: process.env,
    cwd: process.cwd(),
  };
  runCli(process.argv.slice(2), io).then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`mcp-harness: ${(err as Error)?.message ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
