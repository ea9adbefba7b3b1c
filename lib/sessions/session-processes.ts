import { randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";

/**
 * The processes a stdio server started besides itself (the real server under an `npx`, `uvx` or `sh -c` wrapper, a
 * browser it drives, a daemon it left behind), so that closing a session ends them too. Each child is launched with
 * a tag of its own in its environment (`SESSION_TAG_ENV`), which its descendants inherit, also those the system
 * gave another parent or that started a session of their own; they are found through Linux's /proc (as Jenkins
 * finds a build's processes by its `BUILD_ID`). Where there is no /proc, nothing is found and only the child ends.
 */

/** The environment variable that tags every process of one stdio session. */
export const SESSION_TAG_ENV = "MCP_HARNESS_STDIO_SESSION";

/** A new tag for one session's child. */
export function newSessionTag(): string {
  return randomUUID();
}

/** A process as found: its pid and start time, so a pid the system reused since is never signalled. */
export interface ProcessRef {
  readonly pid: number;
  readonly start: string;
}

const PROC = "/proc";
/** Reads of /proc in flight at once. */
const READ_BATCH = 64;
/** How long leftover processes get between SIGTERM and SIGKILL (the SDK gives its child 2 s per step too). */
export const LEFTOVER_GRACE_MS = 2_000;
const EXIT_POLL_MS = 25;

async function inBatches<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let i = 0; i < items.length; i += READ_BATCH) results.push(...(await Promise.all(items.slice(i, i + READ_BATCH).map(work))));
  return results;
}

/** The start time of a live (not zombie) process, from /proc/<pid>/stat; `undefined` when it is gone. */
async function startOf(pid: number): Promise<string | undefined> {
  let text: string;
  try {
    text = await readFile(`${PROC}/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // After the command name (which may hold spaces and parentheses): state, then starttime as the 20th field.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return fields.length < 20 || fields[0] === "Z" || fields[0] === "X" ? undefined : fields[19];
}

/** The session tag in a process's environment, if any. */
async function tagOf(pid: number): Promise<string | undefined> {
  let environ: Buffer;
  try {
    environ = await readFile(`${PROC}/${pid}/environ`);
  } catch {
    return undefined;
  }
  const key = Buffer.from(`${SESSION_TAG_ENV}=`);
  for (let at = environ.indexOf(key); at >= 0; at = environ.indexOf(key, at + 1)) {
    if (at > 0 && environ[at - 1] !== 0) continue;
    const end = environ.indexOf(0, at);
    return environ.subarray(at + key.length, end < 0 ? environ.length : end).toString();
  }
  return undefined;
}

async function scan(): Promise<Map<string, ProcessRef[]>> {
  const tagged = new Map<string, ProcessRef[]>();
  let names: string[];
  try {
    names = await readdir(PROC);
  } catch {
    return tagged;
  }
  const pids = names.filter((name) => /^[0-9]+$/.test(name) && Number(name) !== process.pid).map(Number);
  const tags = await inBatches(pids, tagOf);
  const found = pids.flatMap((pid, i) => (tags[i] === undefined ? [] : [{ pid, tag: tags[i] }]));
  const starts = await inBatches(found, ({ pid }) => startOf(pid));
  found.forEach(({ pid, tag }, i) => {
    const start = starts[i];
    if (start === undefined) return;
    const list = tagged.get(tag);
    if (list) list.push({ pid, start });
    else tagged.set(tag, [{ pid, start }]);
  });
  return tagged;
}

let running: Promise<Map<string, ProcessRef[]>> | undefined;
let next: Promise<Map<string, ProcessRef[]>> | undefined;

/**
 * A scan of /proc that starts after this call. Callers that ask while one runs share the one after it (closing 256
 * sessions at once reads /proc twice, not 256 times), and none gets a scan older than its question.
 */
function freshScan(): Promise<Map<string, ProcessRef[]>> {
  if (!running) {
    running = scan();
    const done = () => {
      running = undefined;
    };
    running.then(done, done);
    return running;
  }
  next ??= running.then(
    () => undefined,
    () => undefined,
  ).then(() => {
    next = undefined;
    return freshScan();
  });
  return next;
}

/** The processes that carry `tag` now. */
export async function taggedProcesses(tag: string): Promise<ProcessRef[]> {
  if (process.platform !== "linux") return [];
  return (await freshScan()).get(tag) ?? [];
}

async function stillRunning(refs: readonly ProcessRef[]): Promise<ProcessRef[]> {
  const starts = await inBatches(refs, (r) => startOf(r.pid));
  return refs.filter((r, i) => starts[i] === r.start);
}

function signal(refs: readonly ProcessRef[], name: NodeJS.Signals): void {
  for (const r of refs) {
    try {
      process.kill(r.pid, name);
    } catch {
      // gone meanwhile
    }
  }
}

/**
 * Ends the processes that still run (same pid and start time): SIGTERM, then SIGKILL for those still there after
 * `graceMs`. Resolves once they are gone (or `graceMs` after the SIGKILL if some are not); returns how many it ended.
 */
export async function endProcesses(refs: readonly ProcessRef[], graceMs = LEFTOVER_GRACE_MS): Promise<number> {
  let alive = await stillRunning(refs);
  const ended = alive.length;
  if (ended === 0) return 0;
  signal(alive, "SIGTERM");
  for (const then of ["SIGKILL", undefined] as const) {
    for (let waited = 0; alive.length > 0 && waited < graceMs; waited += EXIT_POLL_MS) {
      await new Promise((resolve) => setTimeout(resolve, EXIT_POLL_MS));
      alive = await stillRunning(alive);
    }
    if (alive.length === 0 || then === undefined) break;
    signal(alive, then);
  }
  return ended;
}

/** Ends whatever still carries `tag` (a closed session's leftovers); how many it ended. */
export async function endTaggedProcesses(tag: string, graceMs = LEFTOVER_GRACE_MS): Promise<number> {
  return endProcesses(await taggedProcesses(tag), graceMs);
}
