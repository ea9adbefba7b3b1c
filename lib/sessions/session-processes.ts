import { randomUUID } from "node:crypto";
import { readFileSync, readlinkSync } from "node:fs";
import { readdir, readFile, readlink } from "node:fs/promises";
import { freshRuns } from "../shared/fresh-runs";
import type { Logger } from "../shared/logger";

/**
 * The processes a stdio server started besides itself (the real server under an `npx`, `uvx` or `sh -c` wrapper, a
 * browser it drives, a daemon it left behind), so that closing a session ends them too. Each child is launched with
 * a tag of its own in its environment (`SESSION_TAG_ENV`), which its descendants inherit, also those the system
 * gave another parent or that started a session of their own (as Jenkins finds a build's processes by `BUILD_ID`);
 * a descendant of a tagged process is the session's too, even with an environment of its own (`env -i`, a process
 * that overwrote its environment to retitle itself), unless that environment names another value of the tag (another
 * session, or `keep`). Found through Linux's /proc; where there is none, nothing is found and only the child ends.
 */

/** The environment variable that tags every process of one stdio session. */
export const SESSION_TAG_ENV = "MCP_HARNESS_STDIO_SESSION";

/**
 * This process as its sessions' tags name it: `<PID namespace>.<pid>.<start time>` (`null` where /proc cannot tell).
 * The namespace keeps a process that sees a container's processes (the machine's root, as root) from taking the pids
 * their tags name, which are the container's, for its own.
 */
let host: string | null | undefined;

function hostOfTags(): string | null {
  if (host === undefined) {
    host = null;
    if (process.platform === "linux") {
      try {
        // A /proc of another PID namespace (`unshare --pid` without a /proc of its own) lists this process under
        // another pid: a sweep there would take the pid in a tag for another process's, and end a live host's sessions.
        if (readlinkSync(`${PROC}/self`) !== String(process.pid)) return host;
        const namespace = pidNamespace(readlinkSync(`${PROC}/self/ns/pid`));
        const start = startTimeIn(readFileSync(`${PROC}/self/stat`, "utf8"));
        if (namespace !== undefined && start !== undefined) host = `${namespace}.${process.pid}.${start}`;
      } catch {
        // no /proc: tags without a host, which no sweep ends
      }
    }
  }
  return host;
}

/** The inode number in a PID namespace link (`pid:[4026531836]`). */
function pidNamespace(link: string): string | undefined {
  return /^pid:\[([0-9]+)\]$/.exec(link)?.[1];
}

/**
 * A new tag for one session's child: its host (`hostOfTags`), then a UUID, so that the processes of a host killed
 * before it could close its sessions are recognised as orphans (see `endOrphanedSessions`).
 */
export function newSessionTag(): string {
  const prefix = hostOfTags();
  return prefix === null ? randomUUID() : `${prefix}.${randomUUID()}`;
}

/** A tag `newSessionTag` made with a host: the host's PID namespace, pid and start time. */
const HOSTED_TAG = /^([0-9]+)\.([0-9]+)\.([0-9]+)\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

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
/** How long killed processes get to be gone before ending gives up waiting for them. */
const KILL_WAIT_MS = 1_000;
/** Scans after the first, for processes started while the session's processes were being ended (a respawn). */
const RESCANS = 5;
const EXIT_POLL_MS = 25;

interface ProcStat {
  readonly ppid: number;
  readonly start: string;
}

interface ProcInfo extends ProcStat {
  readonly pid: number;
  /** The tag in its environment; `undefined`: none; `null`: the environment could not be read. */
  readonly tag: string | undefined | null;
}

/** `work` over `items`, READ_BATCH at a time (a /proc scan opens no more files at once). */
export async function inBatches<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let i = 0; i < items.length; i += READ_BATCH) results.push(...(await Promise.all(items.slice(i, i + READ_BATCH).map(work))));
  return results;
}

/** Parent and start time of a live (not zombie) process, from /proc/<pid>/stat; `undefined` when it is gone. */
async function statOf(pid: number): Promise<ProcStat | undefined> {
  let text: string;
  try {
    text = await readFile(`${PROC}/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  const fields = statFields(text);
  if (fields.length < 20 || isGoneState(fields[0])) return undefined;
  return { ppid: Number(fields[1]), start: fields[19] };
}

/** The kernel's PF_EXITING in a /proc stat's `flags`: set as a process begins to exit, before it closes its files. */
const PF_EXITING = 0x4;

/**
 * Whether `pid` is a process still running (not a zombie, not exiting) by /proc, read at once: `undefined` where /proc
 * cannot tell (another OS, the pid gone). A process's pipes close as it exits, before it is a zombie: its state then
 * still reads R (a Python child that exits, at more than half of its ends), its flags say it is exiting.
 */
export function isRunningNow(pid: number): boolean | undefined {
  let text: string;
  try {
    text = readFileSync(`${PROC}/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  const [state, , , , , , flags] = statFields(text);
  return state !== undefined && !isGoneState(state) && (Number(flags) & PF_EXITING) === 0;
}

/** A /proc stat state of a process that is gone but not yet reaped (zombie) or dead. */
function isGoneState(state: string | undefined): boolean {
  return state === "Z" || state === "X";
}

/** The fields of a /proc/<pid>/stat after the command name (which may hold spaces and parentheses): state, ppid, …, starttime as the 20th. */
function statFields(text: string): string[] {
  return text.slice(text.lastIndexOf(")") + 2).split(" ");
}

function startTimeIn(text: string): string | undefined {
  const fields = statFields(text);
  return fields.length < 20 ? undefined : fields[19];
}

/** The session tag in a process's environment: its value, `undefined` without one, `null` when unreadable. */
async function tagOf(pid: number): Promise<string | undefined | null> {
  let environ: Buffer;
  try {
    environ = await readFile(`${PROC}/${pid}/environ`);
  } catch {
    return null;
  }
  const key = Buffer.from(`${SESSION_TAG_ENV}=`);
  for (let at = environ.indexOf(key); at >= 0; at = environ.indexOf(key, at + 1)) {
    if (at > 0 && environ[at - 1] !== 0) continue;
    const end = environ.indexOf(0, at);
    return environ.subarray(at + key.length, end < 0 ? environ.length : end).toString();
  }
  return undefined;
}

/** The pids listed in `/proc` (none where it cannot be read). */
export async function procPids(): Promise<string[]> {
  return readdir(PROC).then(
    (names) => names.filter((name) => /^[0-9]+$/.test(name)),
    () => [],
  );
}

async function scan(): Promise<ProcInfo[]> {
  const pids = (await procPids()).map(Number).filter((pid) => pid !== process.pid);
  // Each process's stat before its environment: a pid reused in between shows as a new start time when verified.
  const stats = await inBatches(pids, statOf);
  const live = pids.flatMap((pid, i) => (stats[i] === undefined ? [] : [{ pid, ...stats[i] }]));
  const tags = await inBatches(live, ({ pid }) => tagOf(pid));
  return live.map((info, i) => ({ ...info, tag: tags[i] }));
}

/** A scan of /proc that starts after this call (see `freshRuns`): closing 256 sessions at once reads /proc twice. */
const freshScan = freshRuns(scan);

/**
 * The processes carrying `tag` and their descendants, except those whose environment names another session. `child`
 * (the pid of the session's child, a process of ours) is a member and a root too: launched through a wrapper that
 * clears its environment (`env -i …`), it carries no tag, nor does anything it starts.
 */
function members(infos: readonly ProcInfo[], tag: string, child?: number): ProcInfo[] {
  const children = new Map<number, ProcInfo[]>();
  for (const info of infos) {
    const list = children.get(info.ppid);
    if (list) list.push(info);
    else children.set(info.ppid, [info]);
  }
  // Our own child is recognised by its parent, this process: a pid the system reused since names another parent.
  const found = infos.filter((info) => info.tag === tag || (info.pid === child && info.ppid === process.pid));
  const seen = new Set(found.map((info) => info.pid));
  for (let i = 0; i < found.length; i += 1) {
    for (const child of children.get(found[i].pid) ?? []) {
      if (seen.has(child.pid) || (typeof child.tag === "string" && child.tag !== tag)) continue;
      seen.add(child.pid);
      found.push(child);
    }
  }
  return found;
}

/** The processes of the session tagged `tag` now (see the module's comment and `members`). */
export async function taggedProcesses(tag: string, child?: number): Promise<ProcessRef[]> {
  if (process.platform !== "linux") return [];
  const found = members(await freshScan(), tag, child).map(({ pid, start }) => ({ pid, start }));
  // Read again: a pid whose start time moved since its stat was reused, and the environment read may be another's.
  return stillRunning(found);
}

async function stillRunning(refs: readonly ProcessRef[]): Promise<ProcessRef[]> {
  const stats = await inBatches(refs, (r) => statOf(r.pid));
  return refs.filter((r, i) => stats[i]?.start === r.start);
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

/** Polls until none of `refs` runs or `ms` have passed (by the clock: a busy event loop does not stretch it). */
async function waitGone(refs: readonly ProcessRef[], ms: number): Promise<readonly ProcessRef[]> {
  const deadline = Date.now() + ms;
  let alive = refs;
  while (alive.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, EXIT_POLL_MS));
    alive = await stillRunning(alive);
  }
  return alive;
}

/**
 * Ends the processes that still run (same pid and start time): SIGTERM, then SIGKILL for those still there after
 * `graceMs`. Resolves once they are gone (or `KILL_WAIT_MS` after the SIGKILL if some are not); returns how many
 * it ended.
 */
export async function endProcesses(refs: readonly ProcessRef[], graceMs = LEFTOVER_GRACE_MS): Promise<number> {
  const alive = await stillRunning(refs);
  if (alive.length === 0) return 0;
  signal(alive, "SIGTERM");
  const stubborn = await waitGone(alive, graceMs);
  if (stubborn.length > 0) {
    signal(stubborn, "SIGKILL");
    await waitGone(stubborn, KILL_WAIT_MS);
  }
  return alive.length;
}

/**
 * Ends whatever belongs to the session tagged `tag` (a closed session's leftovers) and the processes in `known` (its
 * members found while its child still ran: a descendant without the tag is found through its parent only while that
 * parent lives), then looks again a few times for processes started meanwhile (a supervisor's respawn, a cleanup
 * spawned on SIGTERM), which are killed at once. Returns how many it ended.
 */
export async function endTaggedProcesses(tag: string, known: readonly ProcessRef[] = [], graceMs = LEFTOVER_GRACE_MS): Promise<number> {
  const found = await taggedProcesses(tag);
  const pids = new Set(found.map((r) => r.pid));
  let ended = await endProcesses([...found, ...known.filter((r) => !pids.has(r.pid))], graceMs);
  if (ended === 0) return 0;
  for (let round = 0; round < RESCANS; round += 1) {
    const late = await taggedProcesses(tag);
    if (late.length === 0) break;
    ended += await endProcesses(late, 0);
  }
  return ended;
}

/**
 * Ends the processes of stdio sessions whose host, the process whose toolkit started them, is gone without closing
 * them (killed, crashed, stopped by a signal it had no handler for): a server that runs on once its stdin closes, and
 * what servers started (a browser, a daemon). Found by their tags, which name the host's PID namespace, pid and start
 * time; a host still running (that pid with that start time) keeps its sessions, and so does one in another PID
 * namespace. Processes that shed the tag (`env -i`) are found only while a tagged parent still runs. Returns how many
 * it ended.
 */
export async function endOrphanedSessions(graceMs = LEFTOVER_GRACE_MS): Promise<number> {
  const ours = hostOfTags();
  if (ours === null) return 0;
  const namespace = ours.slice(0, ours.indexOf("."));
  const tags = new Set<string>();
  for (const { tag } of await freshScan()) if (typeof tag === "string" && HOSTED_TAG.test(tag)) tags.add(tag);
  const hostGone = new Map<string, boolean>();
  const orphaned: string[] = [];
  for (const tag of tags) {
    const [, tagNamespace, pid, start] = HOSTED_TAG.exec(tag)!;
    // A host in another PID namespace is not found under its pid here.
    if (tagNamespace !== namespace) continue;
    let gone = hostGone.get(`${pid}.${start}`);
    if (gone === undefined) {
      gone = await isGone(Number(pid), start);
      hostGone.set(`${pid}.${start}`, gone);
    }
    if (gone) orphaned.push(tag);
  }
  const ended = await Promise.all(orphaned.map((tag) => endTaggedProcesses(tag, [], graceMs)));
  return ended.reduce((sum, n) => sum + n, 0);
}

/**
 * Whether the host `pid` started at `start` is gone: its pid is free, a zombie's, or another process's (another start
 * time). A /proc entry that cannot be read (hidden by `hidepid` from another user, an error) is not taken for a host
 * gone unless no process has that pid.
 */
async function isGone(pid: number, start: string): Promise<boolean> {
  let text: string;
  try {
    text = await readFile(`${PROC}/${pid}/stat`, "utf8");
  } catch {
    try {
      process.kill(pid, 0);
      return false;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === "ESRCH";
    }
  }
  const fields = statFields(text);
  if (fields.length < 20) return false;
  if (isGoneState(fields[0])) return true;
  return fields[19] !== start && !(await otherTimeNamespace(pid));
}

/** Whether `pid` runs in another time namespace than this process: its start time then reads with another boot time offset here. */
async function otherTimeNamespace(pid: number): Promise<boolean> {
  try {
    const [theirs, ours] = await Promise.all([readlink(`${PROC}/${pid}/ns/time`), readlink(`${PROC}/self/ns/time`)]);
    return theirs !== ours;
  } catch {
    // no time namespaces, or not ours to read: start times compare as they are
    return false;
  }
}

let sweep: Promise<void> | undefined;

/** `endOrphanedSessions` once per process (on its first stdio session), its outcome logged. */
export function endOrphanedSessionsOnce(logger: Logger): Promise<void> {
  sweep ??= endOrphanedSessions().then(
    (ended) => {
      if (ended > 0) {
        logger.info(`ended ${ended} process(es) left by stdio MCP sessions of a host process that ended without closing them`);
      }
    },
    () => undefined,
  );
  return sweep;
}
