/**
 * `npm start`: the LangGraph dev server (`langgraphjs dev`) for the graphs of langgraph.json, with the
 * demo config unless MCP_HARNESS_CONFIG is set, on 127.0.0.1:$PORT (default 2024).
 *
 * The dev server is a tree of processes (the CLI, a tsx watcher, the API server, esbuild services and
 * the MCP servers the graphs start). Run directly, a signal to the CLI left the rest running. Here
 * the tree runs in its own process group: SIGINT/SIGTERM/SIGHUP to this launcher (npm forwards them)
 * go to the whole group, and the launcher exits, with the CLI's status, only once no process of the
 * group is left (SIGKILL after a grace period). A busy port is reported before anything starts.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { constants } from "node:os";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..");
const CLI = path.join(ROOT, "node_modules", ".bin", "langgraphjs");
export const HOST = "127.0.0.1";
export const DEFAULT_PORT = 2024;
const DEFAULT_CONFIG = "graphs/demo/extensions_config.json";
/** How long the group gets to exit after SIGTERM/SIGINT before it is killed. */
const STOP_GRACE_MS = 5_000;
const KILL_GRACE_MS = 2_000;
const POLL_MS = 100;
const PARENT_CHECK_MS = 1_000;

type Signal = "SIGINT" | "SIGTERM" | "SIGHUP";
const FORWARDED: readonly Signal[] = ["SIGINT", "SIGTERM", "SIGHUP"];

export function parsePort(value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === "") return DEFAULT_PORT;
  if (!/^\d+$/.test(value.trim())) return undefined;
  const port = Number(value);
  return port >= 1 && port <= 65_535 ? port : undefined;
}

/** `null` when `host:port` can be listened on now, else the error code (EADDRINUSE, EACCES, …). */
export function portProblem(port: number, host: string): Promise<string | null> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve(null)));
  });
}

/** Whether any process of group `pgid` is still running (zombies waiting for a reaper do not count). */
function groupAlive(pgid: number): boolean {
  if (process.platform === "linux") {
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      } catch {
        continue; // exited meanwhile
      }
      // pid (comm) state ppid pgrp …; comm may contain spaces and parentheses
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(pgrp) === pgid && state !== "Z" && state !== "X") return true;
    }
    return false;
  }
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // the group is gone
  }
}

async function waitForGroupExit(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (groupAlive(pgid)) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  return true;
}

async function main(): Promise<number> {
  const port = parsePort(process.env.PORT);
  if (port === undefined) {
    process.stderr.write(`npm start: PORT must be a port number (1-65535), not '${process.env.PORT}'\n`);
    return 2;
  }
  const problem = await portProblem(port, HOST);
  if (problem === "EADDRINUSE") {
    process.stderr.write(`npm start: port ${port} on ${HOST} is already in use; set PORT to a free port (e.g. PORT=${port + 1} npm start)\n`);
    return 1;
  }
  if (problem !== null) {
    process.stderr.write(`npm start: cannot listen on ${HOST}:${port} (${problem}); set PORT to another port\n`);
    return 1;
  }

  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LANGGRAPH_CLI_NO_ANALYTICS: "1",
    BROWSER: "none",
    MCP_HARNESS_CONFIG: process.env.MCP_HARNESS_CONFIG || DEFAULT_CONFIG,
  };
  const child = spawn(process.execPath, [CLI, "dev", "--no-browser", "--host", HOST, "--port", String(port)], {
    cwd: ROOT,
    env,
    detached: true, // its own process group, which this launcher owns
    stdio: ["ignore", "inherit", "inherit"],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code, signal) => resolve({ code, signal }));
  });
  const pgid = child.pid;
  if (pgid === undefined) {
    await exited; // rejects with the spawn error
    return 1;
  }

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return; // npm forwards a terminal's Ctrl-C that this process received too
    stopping = true;
    signalGroup(pgid, signal);
    setTimeout(() => signalGroup(pgid, "SIGKILL"), STOP_GRACE_MS).unref();
  };
  for (const signal of FORWARDED) process.on(signal, () => stop(signal));
  // If whoever started us dies without a signal reaching us (npm killed with SIGKILL), stop as well.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) stop("SIGTERM");
  }, PARENT_CHECK_MS).unref();

  const { code, signal } = await exited;
  // The CLI is gone; its server, workers and MCP servers may not be yet.
  signalGroup(pgid, "SIGTERM");
  if (!(await waitForGroupExit(pgid, STOP_GRACE_MS))) {
    signalGroup(pgid, "SIGKILL");
    await waitForGroupExit(pgid, KILL_GRACE_MS);
  }
  if (code !== null) return code;
  return 128 + (signal ? constants.signals[signal] : 0);
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`npm start: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
