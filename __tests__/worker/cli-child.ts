/** `mcp-harness worker` as a child process (the CLI through tsx), with its stdout lines as events. */
import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter, once } from "node:events";
import * as path from "node:path";
import { createInterface } from "node:readline";
import { TSX_CJS_REGISTER } from "../fixtures/stdio";

const MAIN = path.resolve(__dirname, "..", "..", "lib", "cli", "main.ts");

export interface WorkerChild {
  child: ChildProcess;
  /** "line" (each stdout line), "started" (the start line on stderr). */
  events: EventEmitter;
  stdout: string[];
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once the worker printed its start line (its runtime is up). */
  started: Promise<void>;
  /** Resolves with the first stdout line from now on that satisfies `test`. */
  nextLine(test?: (line: string) => boolean): Promise<string>;
}

export function startWorkerChild(args: string[], env: NodeJS.ProcessEnv, cwd: string): WorkerChild {
  const child = spawn(process.execPath, ["--require", TSX_CJS_REGISTER, MAIN, "worker", ...args], {
    cwd,
    env: { PATH: process.env.PATH, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const events = new EventEmitter();
  const stdout: string[] = [];
  let stderr = "";
  createInterface({ input: child.stdout! }).on("line", (line) => {
    stdout.push(line);
    events.emit("line", line);
  });
  const started = new Promise<void>((resolve, reject) => {
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
      if (stderr.includes("mcp-harness worker: ticking every")) resolve();
    });
    child.once("exit", () => reject(new Error(`the worker exited before it started:\n${stderr}`)));
  });
  started.catch(() => undefined);
  const exited = once(child, "exit").then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
  return {
    child,
    events,
    stdout,
    stderr: () => stderr,
    exited,
    started,
    nextLine: (test = () => true) =>
      new Promise((resolve, reject) => {
        const onLine = (line: string) => {
          if (!test(line)) return;
          cleanup();
          resolve(line);
        };
        const onExit = () => {
          cleanup();
          reject(new Error(`the worker exited:\n${stderr}`));
        };
        const cleanup = () => {
          events.off("line", onLine);
          child.off("exit", onExit);
        };
        events.on("line", onLine);
        child.once("exit", onExit);
      }),
  };
}
