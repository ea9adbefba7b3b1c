/**
 * A stdio child that exits while a process it started (detached, so it outlives the child) still writes to the stdout
 * it inherited: `whenGone` reads on after the exit so the child's last output is not lost, but only for a bounded time
 * and number of bytes. The host's event loop is held between polls until the writer is blocked on a full pipe, as on a
 * busy host: every poll then finds new output, which without a bound would keep the reading going for ever.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { whenGone, type OutputCut } from "../../lib/sessions/child";
import { blockUntilSleeping, processState, waitUntil } from "../fixtures/processes";

const MIB = 1 << 20;

/** Starts `yes` (detached, on the inherited stdout) and says its pid on stderr; on SIGUSR2 writes a crash report and exits. */
const FLOODING = [
  `const { spawn } = require("node:child_process");`,
  `const writer = spawn("yes", ["flood"], { stdio: ["ignore", "inherit", "ignore"], detached: true });`,
  `writer.unref();`,
  `process.on("SIGUSR2", () => {`,
  `  process.stderr.write("Error: boom\\n    at main (server.js:1:1)\\nNode.js " + process.version);`,
  `  process.exit(1);`,
  `});`,
  `process.stderr.write("writer " + writer.pid + "\\n");`,
  `setInterval(() => {}, 1000);`,
].join("\n");

const started: number[] = [];
afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone already
    }
  }
});

interface Flood {
  child: ChildProcess;
  writer: number;
  stderr: () => string;
  /** Bytes read from the child's stdout since its exit. */
  afterExit: () => number;
  /** Resolves once `bytes` were read from its stdout since its exit. */
  readAfterExit: (bytes: number) => Promise<"still reading">;
  /** Makes the child write its crash report and exit; from then on the event loop is held between polls. */
  crash: () => void;
  stopHolding: () => void;
}

async function flood(): Promise<Flood> {
  const child = spawn(process.execPath, ["-e", FLOODING], { stdio: ["pipe", "pipe", "pipe"] });
  started.push(child.pid!);
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  expect(await waitUntil(() => /writer \d+\n/.test(stderr))).toBe(true);
  const writer = Number(/writer (\d+)\n/.exec(stderr)![1]);
  started.push(writer);
  let exited = false;
  let holding = true;
  let afterExit = 0;
  const waiting: Array<{ bytes: number; resolve: (value: "still reading") => void }> = [];
  child.stdout!.on("data", (chunk: Buffer) => {
    if (!exited) return;
    afterExit += chunk.length;
    for (const wait of waiting.filter((w) => afterExit >= w.bytes)) wait.resolve("still reading");
  });
  const hold = () => {
    if (!holding) return;
    blockUntilSleeping(writer);
    setImmediate(hold);
  };
  // Registered before `whenGone` registers its own: the hold runs before each of its checks.
  child.once("exit", () => {
    exited = true;
    hold();
  });
  return {
    child,
    writer,
    stderr: () => stderr,
    afterExit: () => afterExit,
    readAfterExit: (bytes) => new Promise((resolve) => waiting.push({ bytes, resolve })),
    crash: () => process.kill(child.pid!, "SIGUSR2"),
    stopHolding: () => void (holding = false),
  };
}

/** A time bound the test fires by hand. */
function manualTimer(): { start: (onTimeout: () => void) => () => void; fire: () => void; started: () => boolean } {
  let pending: (() => void) | undefined;
  return {
    start: (onTimeout) => {
      pending = onTimeout;
      return () => void (pending = undefined);
    },
    fire: () => pending?.(),
    started: () => pending !== undefined,
  };
}

/**
 * Starts a shell (detached, on the inherited stdout) that on SIGUSR1 writes `bytes` bytes and runs on as `sleep`,
 * holding the pipe; says its pid on stderr; exits on SIGUSR2.
 */
function lastWriter(bytes: number): string {
  const shell = `trap 'head -c ${bytes} /dev/zero; exec sleep 1000' USR1; while :; do sleep 0.01; done`;
  return [
    `const { spawn } = require("node:child_process");`,
    `const holder = spawn("sh", ["-c", ${JSON.stringify(shell)}], { stdio: ["ignore", "inherit", "ignore"], detached: true });`,
    `holder.unref();`,
    `process.on("SIGUSR2", () => process.exit(1));`,
    `process.stderr.write("holder " + holder.pid + "\\n");`,
    `setInterval(() => {}, 1000);`,
  ].join("\n");
}

/** The command name of `pid` (undefined once it is gone). */
function commandOf(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return undefined;
  }
}

/**
 * Starts `lastWriter(bytes)` and calls `whenGone` on it with a byte bound of `maxBytes` and a timer that never fires; on
 * SIGUSR2 it exits, and at its exit the holder is made to write while the event loop is held until it runs `sleep` (its
 * bytes then wait in the pipe). Resolves with what `whenGone` told.
 */
async function exitWithLastWords(bytes: number, maxBytes: number): Promise<{ cut: OutputCut | undefined; child: ChildProcess; timerRuns: boolean }> {
  const timer = manualTimer();
  const child = spawn(process.execPath, ["-e", lastWriter(bytes)], { stdio: ["pipe", "pipe", "pipe"] });
  started.push(child.pid!);
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  expect(await waitUntil(() => /holder \d+\n/.test(stderr))).toBe(true);
  const holder = Number(/holder (\d+)\n/.exec(stderr)![1]);
  started.push(holder);
  // Registered before `whenGone` registers its own. Written during the poll that told the exit, the bytes are read by the next.
  child.once("exit", () => {
    process.kill(holder, "SIGUSR1");
    const nap = new Int32Array(new SharedArrayBuffer(4));
    for (let i = 0; i < 10_000 && commandOf(holder) !== "sleep"; i += 1) Atomics.wait(nap, 0, 0, 1);
  });
  const cut = await new Promise<OutputCut | undefined>((resolve) => {
    whenGone(child, resolve, { maxBytes, startTimer: timer.start });
    process.kill(child.pid!, "SIGUSR2");
  });
  expect(commandOf(holder)).toBe("sleep");
  return { cut, child, timerRuns: timer.started() };
}

describe("a stdio child that exits while a process it started holds its stdout", () => {
  test("writing nothing: told after one quiet poll, with no cut, though neither bound is reached", async () => {
    const { cut, child, timerRuns } = await exitWithLastWords(0, Number.POSITIVE_INFINITY);
    expect(cut).toBeUndefined();
    expect(timerRuns).toBe(false);
    expect(child.stdout!.destroyed).toBe(true);
  });

  test("writing exactly the byte bound after the exit: the bound is reached, so the reading is cut there", async () => {
    expect((await exitWithLastWords(1000, 1000)).cut).toEqual({ reason: "bytes", bytes: 1000 });
    // One byte under the bound: all of it was read, nothing cut.
    expect((await exitWithLastWords(1000, 1001)).cut).toBeUndefined();
  });
});

describe("a stdio child that exits while a process it started floods its stdout", () => {
  test("its output is read for at most the byte bound after the exit, then cut; its crash report on stderr is kept", async () => {
    const timer = manualTimer();
    const f = await flood();
    let gone = false;
    const goneWith = new Promise<{ cut: OutputCut | undefined; stderr: string }>((resolve) =>
      whenGone(f.child, (cut) => {
        gone = true;
        resolve({ cut, stderr: f.stderr() });
      }, { maxBytes: MIB, startTimer: timer.start }),
    );
    f.crash();
    const first = await Promise.race([goneWith, f.readAfterExit(8 * MIB)]);
    f.stopHolding();
    expect(first).toEqual({ cut: { reason: "bytes", bytes: expect.any(Number) }, stderr: expect.stringContaining("Error: boom\n    at main (server.js:1:1)\nNode.js ") });
    expect((first as { cut: OutputCut }).cut.bytes).toBeGreaterThanOrEqual(MIB);
    expect(gone).toBe(true);
    // Our ends of the pipes are closed: the writer dies of it (SIGPIPE; reaped by whoever adopted it), the timer was stopped.
    expect(f.child.stdout!.destroyed).toBe(true);
    expect(await waitUntil(() => processState(f.writer) === "Z" || processState(f.writer) === undefined)).toBe(true);
    expect(timer.started()).toBe(false);
  });

  test("its output is read for at most the time bound after the exit, then cut", async () => {
    const timer = manualTimer();
    const f = await flood();
    let cutWith: OutputCut | undefined | null = null;
    const gone = new Promise<void>((resolve) =>
      whenGone(f.child, (cut) => {
        cutWith = cut;
        resolve();
      }, { maxBytes: Number.POSITIVE_INFINITY, startTimer: timer.start }),
    );
    f.crash();
    await f.readAfterExit(2 * MIB);
    // Still reading, 2 MiB past the exit: only the timer ends it.
    expect(cutWith).toBeNull();
    expect(timer.started()).toBe(true);
    timer.fire();
    const first = await Promise.race([gone, f.readAfterExit(f.afterExit() + 8 * MIB)]);
    f.stopHolding();
    expect(first).toBeUndefined();
    expect(cutWith).toEqual({ reason: "time", bytes: expect.any(Number) });
    expect(f.stderr()).toContain("Error: boom\n    at main (server.js:1:1)\nNode.js ");
  });
});
