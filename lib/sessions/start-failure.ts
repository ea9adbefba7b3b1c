import type { ChildProcess } from "node:child_process";
import { constants } from "node:fs";
import { access, stat } from "node:fs/promises";
import { DeadlineExceededError, withDeadline, type Deadline } from "../shared/deadline";

/** A configured `cwd` that is missing, not a folder or not enterable is told apart first (`withCwdCause`). */
const CAUSES: Readonly<Record<string, string>> = {
  ENOENT: "the command, or the interpreter its script names, does not exist",
  EACCES: "the command is not executable",
};

/** What is wrong with a stdio server's configured `cwd` that made its spawn fail. */
type CwdProblem = "missing" | "not a folder" | "not enterable";

const CWD_CAUSES: Readonly<Record<CwdProblem, string>> = {
  missing: "its configured cwd does not exist",
  "not a folder": "its configured cwd is not a folder",
  "not enterable": "its configured cwd may not be entered",
};

/**
 * A stdio child that could not be spawned because of its server's configured `cwd`. Node blames the command for it
 * ("spawn node ENOENT"), or names nothing ("spawn ENOTDIR"). The message, for the operator's logs, names the server, the
 * field and its value, as Node's own names the command; a call shows only `startFailureText`'s line.
 */
export class StdioCwdError extends Error {
  readonly syscall = "spawn";

  constructor(
    serverName: string,
    cwd: string,
    readonly code: string,
    readonly problem: CwdProblem,
  ) {
    super(`could not start the stdio MCP server '${serverName}': ${CWD_CAUSES[problem]}: ${cwd}`);
    this.name = "StdioCwdError";
  }
}

/**
 * `err` as a `StdioCwdError` when it is a failed spawn of a child with a configured `cwd` that is missing, not a
 * folder, or not one the host's user may enter (Node's EACCES then reads as the command's), looked at only now, after
 * the spawn failed; else `err` itself.
 */
export async function withCwdCause(serverName: string, cwd: string | undefined, err: unknown): Promise<unknown> {
  const { syscall, code } = (err ?? {}) as NodeJS.ErrnoException;
  if (!cwd || typeof syscall !== "string" || !syscall.startsWith("spawn") || (code !== "ENOENT" && code !== "ENOTDIR" && code !== "EACCES")) return err;
  const problem = code === "EACCES" ? await unenterable(cwd) : await stat(cwd).then(
    (info): CwdProblem | undefined => (info.isDirectory() ? undefined : "not a folder"),
    (statErr: NodeJS.ErrnoException): CwdProblem | undefined => (statErr.code === "ENOENT" || statErr.code === "ENOTDIR" ? "missing" : undefined),
  );
  return problem === undefined ? err : new StdioCwdError(serverName, cwd, code, problem);
}

/** "not enterable" when the host's user may not search `cwd`, or a folder on its way. */
function unenterable(cwd: string): Promise<CwdProblem | undefined> {
  return access(cwd, constants.X_OK).then(
    () => undefined,
    (accessErr: NodeJS.ErrnoException) => (accessErr.code === "EACCES" ? "not enterable" : undefined),
  );
}

/**
 * A stdio child that ended (or closed its output) before its MCP handshake did: a server that cannot run with its
 * configuration (bad arguments, a missing variable, a database it cannot reach) usually prints why on stderr (in the
 * debug log) and exits. The SDK reports only `Connection closed`; this says how the child ended, naming no path or value.
 */
export class StdioExitError extends Error {
  constructor(serverName: string, how: string) {
    super(`the stdio MCP server '${serverName}' ${how} before its MCP session started (its stderr lines are in the debug log)`);
    this.name = "StdioExitError";
  }
}

/**
 * How `child`, whose connection closed during the handshake, ended: waited for (a child whose output closed first
 * may still be exiting; one that runs on is ended by the session's cleanup, the SDK's close or `exited`'s grace).
 * `outputClosedRunning`: it closed its stdout while it still ran, so a signal that ended it later was ours.
 */
export async function exitedBeforeStart(serverName: string, child: ChildProcess, exited: Promise<void>, outputClosedRunning: boolean): Promise<StdioExitError> {
  await exited;
  if (outputClosedRunning || child.killed) return new StdioExitError(serverName, "closed its output");
  if (child.exitCode !== null) return new StdioExitError(serverName, `exited with code ${child.exitCode}`);
  return new StdioExitError(serverName, `was ended by ${child.signalCode ?? "a signal"}`);
}

/**
 * What a call shows when its stdio child could not be spawned: the server and the error code. Node's own text
 * ("spawn /home/op/bin/server ENOENT") names the command's local path, which only the operator's logs may show.
 * `undefined` for any other error.
 */
export function startFailureText(serverName: string, err: unknown): string | undefined {
  if (err instanceof StdioExitError) return err.message;
  const { syscall, code } = (err ?? {}) as NodeJS.ErrnoException;
  if (typeof syscall !== "string" || !syscall.startsWith("spawn")) return undefined;
  const known = err instanceof StdioCwdError ? CWD_CAUSES[err.problem] : code === undefined ? undefined : CAUSES[code];
  const cause = code === undefined ? "" : ` (${code}${known ? `: ${known}` : ""})`;
  return `could not start the stdio MCP server '${serverName}'${cause}`;
}

/** The steps of a stdio session's start before its spawn: the thread's folders, the sweep of a killed host's processes. */
export type StartStep = "thread workspace" | "orphan sweep";

const STEP_TEXTS: Readonly<Record<StartStep, string>> = {
  "thread workspace": "its thread workspace was still being prepared (the file system did not answer)",
  "orphan sweep": "the processes left by a host process that ended without closing its sessions were still being ended",
};

/** `session_init_timeout` ran out during a step of a stdio session's start before its spawn. */
export class StartStepTimeoutError extends DeadlineExceededError {
  constructor(
    timeoutMs: number,
    readonly step: StartStep,
  ) {
    super(timeoutMs);
    this.message = `${this.message}: ${STEP_TEXTS[step]}`;
    this.name = "StartStepTimeoutError";
  }

  /** What a call shows after its own words on the start (no path, no value). */
  get stepText(): string {
    return STEP_TEXTS[this.step];
  }
}

/**
 * `work`, a step of a start before its spawn, until `start` ends it: then its `DeadlineExceededError` becomes a
 * `StartStepTimeoutError` naming the step (any other reason, the start's abort, is thrown as it is). The work itself runs
 * on unseen: a file system call cannot be taken back.
 */
export function startStep<T>(work: Promise<T>, start: Deadline, step: StartStep): Promise<T> {
  return withDeadline(() => work, null, start.signal).catch((err: unknown) => {
    throw err instanceof DeadlineExceededError && err === start.reason ? new StartStepTimeoutError(err.timeoutMs, step) : err;
  });
}
