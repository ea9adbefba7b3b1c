/**
 * A stdio child that writes why it fails on stderr and exits before its MCP handshake: what it wrote reaches the debug
 * log, however the parent learns of its exit. Node reaps every exited child when any SIGCHLD is handled, so a child's
 * exit can be seen in a turn of the event loop whose poll never saw its last output (another child exiting at about the
 * same time, on a loaded machine: two misconfigured servers started together). The test forces that interleaving.
 */
import { describe, expect, test } from "@jest/globals";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { McpServerSchema, RecordingLogger } from "../../lib";
import { whenGone, type AfterExitBound, type OutputCut } from "../../lib/sessions/child";
import { SessionPool } from "../../lib/sessions/pool";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { waitUntil } from "../fixtures/processes";

const SIGCHLD_BIT = 1n << 16n;

/** Whether a SIGCHLD waits to be delivered to this process (then libuv has not been told of that exit yet). */
function sigchldPending(): boolean {
  const status = readFileSync("/proc/self/status", "utf8");
  return ["SigPnd", "ShdPnd"].some((field) => (BigInt(`0x${new RegExp(`${field}:\\s*([0-9a-f]+)`).exec(status)![1]}`) & SIGCHLD_BIT) !== 0n);
}

/**
 * Waits, holding the event loop, until `pid` has exited (a zombie not yet reaped, all its threads gone: the leader of a
 * multi-threaded process is a zombie before the others end) and its SIGCHLD was delivered (libuv's handler has noted it
 * for the loop); at most about 10 s.
 */
function blockUntilExited(pid: number): boolean {
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; i < 10_000; i += 1) {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z") && readdirSync(`/proc/${pid}/task`).length === 1 && !sigchldPending()) return true;
    Atomics.wait(nap, 0, 0, 1);
  }
  return false;
}

const FRAMES = Array.from({ length: 40 }, (_, i) => `    at frame${i} (node:internal/modules/esm/module_job:${i}:5)`).join("\\n");
/** Says it is ready (with its pid), then on SIGUSR2 writes a crash report like Node's (its last line unended) and exits with code 1. */
const CRASHING = [
  `process.on("SIGUSR2", () => {`,
  `  process.stderr.write("TypeError: Invalid URL\\n${FRAMES}\\n  code: 'ERR_INVALID_URL',\\n  input: 'postgresql://u@127.0.0.1:99999/db'\\n}\\n\\nNode.js " + process.version);`,
  `  process.exit(1);`,
  `});`,
  `process.stderr.write("ready " + process.pid + "\\n");`,
  `setInterval(() => {}, 1000);`,
].join("\n");

describe("a stdio child that exits before its MCP session started", () => {
  test("what it wrote on stderr reaches the debug log even when its exit is seen before its output was polled", async () => {
    const logger = new RecordingLogger();
    const pool = new SessionPool(logger);
    const server = McpServerSchema.parse({ type: "stdio", command: process.execPath, args: ["-e", CRASHING] });
    const stderrLines = () => logger.messages("debug").filter((m) => m.startsWith("MCP server 'crashing' stderr: ")).map((m) => m.slice(30));
    try {
      const failed = pool.acquire("crashing", server, { headers: EMPTY_HEADERS, initTimeoutMs: null }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(await waitUntil(() => stderrLines().some((line) => line.startsWith("ready ")))).toBe(true);
      const pid = Number(stderrLines()[0].slice("ready ".length));

      // Another child writes a byte and exits while the event loop is held: its output and its SIGCHLD are polled in one
      // turn. Its output is handled first: the crashing child is made to write its report and exit then, after the
      // poll. Handling the SIGCHLD reaps both children: the crashing one's exit comes before its report was read.
      const other = spawn(process.execPath, ["-e", "process.stdout.write('x')"], { stdio: ["ignore", "pipe", "ignore"] });
      let crashed = false;
      other.stdout.once("data", () => {
        process.kill(pid, "SIGUSR2");
        crashed = blockUntilExited(pid);
      });
      expect(blockUntilExited(other.pid!)).toBe(true);

      expect(String(await failed)).toBe(
        "StdioExitError: the stdio MCP server 'crashing' exited with code 1 before its MCP session started (its stderr lines are in the debug log)",
      );
      expect(crashed).toBe(true);
      // Told only once the report was read: the caller's warning points to it.
      expect(stderrLines()).toEqual([
        `ready ${pid}`,
        "TypeError: Invalid URL",
        ...FRAMES.split("\\n"),
        "  code: 'ERR_INVALID_URL',",
        "  input: 'postgresql://u@127.0.0.1:99999/db'",
        "}",
        `Node.js ${process.version}`,
      ]);
    } finally {
      await pool.close();
    }
  });
  test("a child ended by a signal, its exit seen before its output closed: the start fails saying so, at once", async () => {
    const logger = new RecordingLogger();
    const pool = new SessionPool(logger);
    const server = McpServerSchema.parse({ type: "stdio", command: process.execPath, args: ["-e", CRASHING] });
    const ready = () => logger.messages("debug").find((m) => m.startsWith("MCP server 'killed' stderr: ready "));
    try {
      const failed = pool.acquire("killed", server, { headers: EMPTY_HEADERS, initTimeoutMs: null }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(await waitUntil(() => ready() !== undefined)).toBe(true);
      const pid = Number(ready()!.slice("MCP server 'killed' stderr: ready ".length));

      // As above, the child is killed (by someone else: the OOM killer) in a turn whose poll did not see its pipes close.
      const other = spawn(process.execPath, ["-e", "process.stdout.write('x')"], { stdio: ["ignore", "pipe", "ignore"] });
      let killed = false;
      other.stdout.once("data", () => {
        process.kill(pid, "SIGKILL");
        killed = blockUntilExited(pid);
      });
      expect(blockUntilExited(other.pid!)).toBe(true);

      // Its end, already seen, is not waited for again (which would never come).
      expect(String(await failed)).toBe(
        "StdioExitError: the stdio MCP server 'killed' was ended by SIGKILL before its MCP session started (its stderr lines are in the debug log)",
      );
      expect(killed).toBe(true);
    } finally {
      await pool.close();
    }
  });
});

/** Bounds of the reading after the exit that are reached at the exit itself; `stopped` tells whether the timer was stopped. */
const REACHED_AT_EXIT: Array<[string, (stopped: () => void) => AfterExitBound]> = [
  ["a byte bound of 0", (stopped) => ({ maxBytes: 0, startTimer: () => stopped })],
  [
    "a timer that fires at once",
    (stopped) => ({
      maxBytes: Number.POSITIVE_INFINITY,
      startTimer: (onTimeout) => {
        onTimeout();
        return stopped;
      },
    }),
  ],
];

describe("whenGone, with a bound of the reading after the exit already reached", () => {
  test.each(REACHED_AT_EXIT)("%s: one whole poll past the exit is read before any cut, so the child's last output is kept", async (_name, boundOf) => {
    let timerStopped = false;
    const bound = boundOf(() => void (timerStopped = true));
    const child = spawn(process.execPath, ["-e", CRASHING], { stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
    try {
      expect(await waitUntil(() => /ready \d+\n/.test(stderr))).toBe(true);
      let reportBeforeExit: boolean | undefined;
      child.once("exit", () => (reportBeforeExit = stderr.includes("TypeError")));
      const told: Array<{ cut: OutputCut | undefined; stderr: string }> = [];
      whenGone(child, (cut) => told.push({ cut, stderr }), bound);

      // As above: the child's exit is told in a turn whose poll did not read its report.
      const other = spawn(process.execPath, ["-e", "process.stdout.write('x')"], { stdio: ["ignore", "pipe", "ignore"] });
      let crashed = false;
      other.stdout.once("data", () => {
        process.kill(child.pid!, "SIGUSR2");
        crashed = blockUntilExited(child.pid!);
      });
      expect(blockUntilExited(other.pid!)).toBe(true);
      await closed;

      expect(crashed).toBe(true);
      expect(reportBeforeExit).toBe(false);
      expect(stderr).toContain(`  input: 'postgresql://u@127.0.0.1:99999/db'\n}\n\nNode.js ${process.version}`);
      // Told (if the pipes' close did not come first) only once the report was read, and not as a cut: no stdout came.
      expect(told.length).toBeLessThanOrEqual(1);
      for (const t of told) expect(t).toEqual({ cut: undefined, stderr });
      // Its timer is stopped however the reading ends (told, or silently after the close).
      expect(await waitUntil(() => timerStopped)).toBe(true);
    } finally {
      child.kill("SIGKILL");
    }
  });
});
