#!/usr/bin/env node
import { UsageError } from "./args";
import { checkCommand, tasksCommand, toolsCommand, workerCommand } from "./commands";
import type { CliIo } from "./io";
import { LANGGRAPH_API_KEY_ENV_VARS } from "../tasks/notifiers";

const USAGE = `usage: mcp-harness <command> [options]

commands:
  check [config] [--json] [--offline] [--allow-empty]
      validate an extensions config, then try every enabled server (connect + list tools) and load every
      mcpInterceptors entry; exit 1 on any failure, or when no config is found (unless --allow-empty).
      --offline validates the file only: no server is started, no interceptor module is resolved.
  tools [config] [--json]
      discover the MCP tools of every enabled server; exit 1 when every enabled server failed.
  worker [config] [--interval <seconds>] [--json] [--notifier none|langgraph] [--api-url <url>] [--assistant <id>]
      run the background task graph against the task store (MCP_HARNESS_DATABASE_URL) until SIGTERM/SIGINT,
      one line per tick that changed something; --interval defaults to mcpTasks.poll_interval_seconds.
      --notifier langgraph delivers task events as runs of --assistant (default agent) on a LangGraph server
      (--api-url, else MCP_HARNESS_LANGGRAPH_API_URL), API key from the first of these that is set:
      ${LANGGRAPH_API_KEY_ENV_VARS.join(", ")}.
      The default, none, leaves events pending.
  tasks list --user <id> --thread <id> [--active] [--limit <n>] [--json] [--database <url>]
  tasks show <task-id> --user <id> [--thread <id>] [--json] [--database <url>]
  tasks cancel <task-id> --user <id> --thread <id> [--json] [--database <url>]
      a thread's durable tasks, one task, or a cancellation request (a running worker cancels remotely).

[config] is a file path; without it MCP_HARNESS_CONFIG, then extensions_config.json / mcp_config.json in the
working directory and the project root. Exit codes: 0 ok, 1 failed, 2 usage error.
`;

export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case "check":
        return await checkCommand(rest, io);
      case "tools":
        return await toolsCommand(rest, io);
      case undefined:
      case "help":
      case "--help":
      case "-h":
        io.out(USAGE);
        return command === undefined ? 2 : 0;
      case "tasks":
        return await tasksCommand(rest, io);
      case "worker":
        return await workerCommand(rest, io);
      default:
        io.err(`unknown command '${command}'\n${USAGE}`);
        return 2;
    }
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(`mcp-harness ${command}: ${err.message}\n${USAGE}`);
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
    interactive: Boolean(process.stderr.isTTY),
  };
  runCli(process.argv.slice(2), io).then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`mcp-harness: ${(err as Error)?.message ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
