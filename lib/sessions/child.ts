import { ChildProcess } from "node:child_process";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

/** How long a child that outlived its transport's close gets before it is killed (the SDK escalates within ~4 s). */
export const CHILD_EXIT_GRACE_MS = 5_000;

/**
 * Calls `onStart(child)` with the process a stdio transport spawns, as soon as it is spawned (the SDK keeps it in a
 * private field of SDK 1.x and clears that field when it starts closing; without the field nothing is reported).
 */
export function onChildStart(transport: Transport, onStart: (child: ChildProcess) => void): void {
  const start = transport.start.bind(transport);
  transport.start = () => {
    const started = start();
    const child = (transport as { _process?: unknown })._process;
    if (child instanceof ChildProcess) onStart(child);
    return started;
  };
}

/** Whether `child` has exited (or never started). */
export function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null || child.pid === undefined;
}

/** How long the output of a child that exited is read on at most, while a process it started still writes to it. */
export const AFTER_EXIT_READ_MS = 1_000;
/** How many bytes of its stdout are read at most after a child exited, while a process it started still writes to it. */
export const AFTER_EXIT_READ_BYTES = 1 << 20;

/** Why `whenGone` stopped reading the output of a child that exited: the bound it reached, and the stdout bytes read since the exit. */
export interface OutputCut {
  reason: "bytes" | "time";
  bytes: number;
}

/** The bounds of the reading after a child's exit; `startTimer` starts the time bound and returns its cancel. */
export interface AfterExitBound {
  maxBytes: number;
  startTimer: (onTimeout: () => void) => () => void;
}

const AFTER_EXIT_BOUND: AfterExitBound = {
  maxBytes: AFTER_EXIT_READ_BYTES,
  startTimer: (onTimeout) => {
    const timer = setTimeout(onTimeout, AFTER_EXIT_READ_MS);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/**
 * Calls `onGone` when the child has exited and what it wrote before has been read, unless its pipes close first (the
 * transport then reports the close itself). A grandchild that inherited the child's stdout keeps those pipes open, so
 * without this the transport would never learn that its server is gone. "Read" means: a poll of the event loop went by
 * after the exit without new output (a dead process writes no more, and what it wrote, to its end of file, is read in
 * that poll). The exit can be told before any poll saw the child's last output: Node reaps every exited child when it
 * handles any SIGCHLD, so a child that wrote and exited after the poll that saw another child's SIGCHLD is reaped in
 * that poll's turn.
 *
 * A grandchild that writes to the inherited stdout whenever we poll would keep that going for ever: after one whole
 * poll past the exit (which reads all that the child left in its pipes, its crash report on stderr too), the reading
 * stops once `bound.maxBytes` of stdout were read since the exit or its timer fired; `onGone` is then told the cut.
 */
export function whenGone(child: ChildProcess, onGone: (cut: OutputCut | undefined) => void, bound: AfterExitBound = AFTER_EXIT_BOUND): void {
  let closed = false;
  child.once("close", () => {
    closed = true;
  });
  child.once("exit", () => {
    let fresh = true;
    let bytes = 0;
    let timedOut = false;
    const onData = (chunk: Buffer) => {
      fresh = true;
      bytes += chunk.length;
    };
    child.stdout?.on("data", onData);
    const stopTimer = bound.startTimer(() => {
      timedOut = true;
    });
    let polled = false;
    const check = () => {
      const reached: OutputCut["reason"] | undefined = !polled ? undefined : bytes >= bound.maxBytes ? "bytes" : timedOut ? "time" : undefined;
      if (!closed && fresh && reached === undefined) {
        fresh = false;
        polled = true;
        setImmediate(check);
        return;
      }
      stopTimer();
      child.stdout?.off("data", onData);
      if (closed) return;
      onGone(fresh && reached !== undefined ? { reason: reached, bytes } : undefined);
      // Our ends of the pipes (the grandchild holds the others).
      child.stdin?.destroy();
      child.stdout?.destroy();
      child.stderr?.destroy();
    };
    // The exit is told in a poll, so an immediate runs before the next one: only the check it schedules follows a poll.
    setImmediate(check);
  });
}

/** Resolves once the child has exited; kills it after `graceMs` if it still runs (its close was already asked for). */
export function exited(child: ChildProcess, graceMs = CHILD_EXIT_GRACE_MS): Promise<void> {
  if (hasExited(child)) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      if (!hasExited(child)) child.kill("SIGKILL");
    }, graceMs);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
