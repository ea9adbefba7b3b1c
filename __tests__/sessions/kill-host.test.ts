/**
 * Durability of stdio sessions, proven by killing their host: a chain of hosts (kill-host.ts: a toolkit running calls in
 * many thread scopes through a real ToolNode, then closing) on one data dir, each SIGKILLed at a point a seeded random
 * picks (after any line it prints: a spawn, a handshake, a call, a temporary thread's folder removal, `close()`) or at
 * a seam of its thread folders' preparation and removal, and the next one started on the same data dir; beside them a
 * host that lives through it all. Each server leaves a daemon in its session (an orphan once its host is killed).
 * Then: no process of a killed host is left once a later host started a session; the live host's children and
 * folders are untouched; no file of a thread is lost; no call was sent twice, none replayed by a later host; the
 * folders a killed host left are swept (its own closing removes them at once), with nothing of the harness's left
 * that keeps one. `KILL_HOST_SEED` and `KILL_HOST_ROUNDS` run a longer chain (`KILL_HOST_ROUNDS=40`).
 */
import { afterAll, describe, expect, test } from "@jest/globals";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { createInterface } from "node:readline";
import { SESSION_TAG_ENV } from "../../lib/sessions/session-processes";
import { SWEEP_MIN_AGE_MS } from "../../lib/sessions/thread-sweep";
import { INTERNAL_GITIGNORE, INTERNAL_GITIGNORE_STAGED, INTERNAL_GITIGNORE_TEXT, threadPaths } from "../../lib/sessions/workspace";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { endHosts, hostMarker } from "../fixtures/hosts";
import type { KillHostPlan, KillHostSeam } from "../fixtures/kill-host";
import { alive, pidsWithMarker, waitUntil } from "../fixtures/processes";
import { TSX_CJS_REGISTER } from "../fixtures/stdio";
import { seededRandom } from "../fixtures/seeded-random";

const SEED = Number(process.env.KILL_HOST_SEED ?? 20261207);
const ROUNDS = Number(process.env.KILL_HOST_ROUNDS ?? 4);
const HOST = path.join(__dirname, "..", "fixtures", "kill-host.ts");
const PLAIN_SERVER = path.join(__dirname, "..", "fixtures", "plain-stdio-server.mjs");
/** The seams a round may be killed at instead of after a line (see kill-host.ts). */
const SEAMS: readonly KillHostSeam[] = ["prepared", "removing", "gitignoreCreated", "gitignoreAside"];


interface RunningHost {
  readonly child: ChildProcess;
  /** `<PID namespace>.<pid>.<start time>.`: the start of every tag of its sessions. */
  readonly tagPrefix: string;
  readonly lines: string[];
  /** Resolves with the first line `stop` accepts (or `exited`). */
  until(stop: (line: string, lines: readonly string[]) => boolean): Promise<string>;
}

const hosts: ChildProcess[] = [];
afterAll(() => {
  for (const host of hosts) host.kill("SIGKILL");
  // The daemons a failed run's killed hosts left.
  endHosts();
});

function tagPrefixOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const start = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  const namespace = /[0-9]+/.exec(readlinkSync(`/proc/${pid}/ns/pid`))![0];
  return `${namespace}.${pid}.${start}.`;
}

function startKillHost(plan: KillHostPlan): RunningHost {
  const child = spawn(process.execPath, ["--require", TSX_CJS_REGISTER, HOST, JSON.stringify(plan)], { stdio: ["ignore", "pipe", "inherit"] });
  hosts.push(child);
  const tagPrefix = tagPrefixOf(child.pid!);
  const lines: string[] = [];
  const waiters: { stop: (line: string, lines: readonly string[]) => boolean; resolve: (line: string) => void }[] = [];
  const settle = (line: string): void => {
    for (const waiter of [...waiters]) {
      if (line !== "exited" && !waiter.stop(line, lines)) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(line);
    }
  };
  createInterface({ input: child.stdout! }).on("line", (line) => {
    lines.push(line);
    settle(line);
  });
  child.once("exit", () => settle("exited"));
  return {
    child,
    tagPrefix,
    lines,
    until: (stop) =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) resolve("exited");
        else waiters.push({ stop, resolve });
      }),
  };
}

async function kill(host: RunningHost): Promise<void> {
  if (host.child.exitCode === null && host.child.signalCode === null) {
    const exit = once(host.child, "exit");
    host.child.kill("SIGKILL");
    await exit;
  }
}

/** Live processes whose session tag begins with `prefix` (a host's: see `RunningHost.tagPrefix`). */
function taggedBy(prefix: string): number[] {
  const entry = Buffer.from(`\0${SESSION_TAG_ENV}=${prefix}`);
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(name)) continue;
    try {
      const environ = Buffer.concat([Buffer.from([0]), readFileSync(`/proc/${name}/environ`)]);
      if (environ.includes(entry)) found.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** Each id the servers were called with (an echo's message, a sleep's duration), as often as it was. */
function calledIds(callLog: string): string[] {
  return readFileSync(callLog, "utf8")
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => {
      const args = JSON.parse(line.slice(line.indexOf("{"))) as { message?: string; ms?: number };
      return args.message ?? `sleep ${args.ms}`;
    });
}

/**
 * What `.mcp` of a thread folder holds, if anything but what the harness creates there (a staged copy of its
 * `.gitignore` a killed host left, which goes with the skeleton, included).
 */
function strangeInternal(dataDir: string, thread: string): string[] {
  const internal = path.dirname(threadPaths(dataDir, thread).tmp);
  if (!existsSync(internal)) return [];
  const strange = readdirSync(internal).filter((name) => name !== "tmp" && name !== INTERNAL_GITIGNORE && !INTERNAL_GITIGNORE_STAGED.test(name));
  const gitignore = path.join(internal, INTERNAL_GITIGNORE);
  if (existsSync(gitignore) && readFileSync(gitignore, "utf8") !== INTERNAL_GITIGNORE_TEXT) strange.push(`${INTERNAL_GITIGNORE} (not the harness's text)`);
  return strange;
}

describe("hosts of stdio sessions SIGKILLed at seeded random points and restarted on the same data dir", () => {
  test(`seed ${SEED}, ${ROUNDS} killed hosts: no orphan, no lost file, no call twice, the live host untouched, the folders swept`, async () => {
    // The kill points of a seed are the same on every run.
    const random = seededRandom(SEED);
    const dir = await makeTempDir("kill-host-");
    const dataDir = path.join(dir, "data");
    const callLog = path.join(dir, "calls.log");
    writeFileSync(callLog, "");
    const daemon = hostMarker();
    // Each session's server first starts a daemon of its own (a session of its own, so no stdin close ends it).
    const script = `setsid sleep ${daemon} </dev/null >/dev/null 2>&1 & exec "$0" "$@"`;
    const plain = { type: "stdio", command: "sh", args: ["-c", script, process.execPath, PLAIN_SERVER], env: { PLAIN_CALL_LOG: callLog, PLAIN_CALL_LOG_ARGS: "1" } };
    const configPath = await writeConfig(dir, { mcpServers: { plain } });
    const base = { configPath, dataDir, rounds: 1, concurrency: 3, sleepEvery: 0, sleepBaseMs: 60_000, close: false, clockAheadMs: 0, temporary: [] };

    // The host that lives through every other's kill and restart: its sessions stay up, idle.
    const live = startKillHost({ ...base, label: "live", threads: ["live-1", "live-2"] });
    expect(await live.until((_, lines) => lines.filter((line) => line.startsWith("done ")).length === 2)).not.toBe("exited");
    const liveChildren = taggedBy(live.tagPrefix);
    // Per session (discovery's and two threads'): its `sh`, exec'd into the server, and its daemon.
    expect(liveChildren).toHaveLength(6);

    // Files of the threads' own: in the workspace, in a folder of it named like the harness's, and in an ordinary
    // thread's temp folder (never emptied).
    const userFiles = ["shared-0", "shared-1"].flatMap((thread) => {
      const { workspace, tmp } = threadPaths(dataDir, thread);
      return [path.join(workspace, "notes.txt"), path.join(workspace, "sub", ".mcp", "kept.txt"), path.join(tmp, "kept.tmp")];
    });
    for (const file of userFiles) {
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, "the user's");
    }

    const killed: string[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      // A thread of the live host's too: its child there keeps the folder from every removal.
      const threads = [`shared-${round % 2}`, `live-${1 + (round % 2)}`, `own-${round}-a`, `own-${round}-b`, `tmp-${round}-a`, `tmp-${round}-b`];
      const seam = random() < 0.4 ? SEAMS[Math.floor(random() * SEAMS.length)] : undefined;
      const plan: KillHostPlan = {
        ...base,
        label: `k${round}`,
        threads,
        rounds: 2,
        temporary: threads.filter((thread) => thread.startsWith("tmp-")),
        sleepEvery: 4,
        sleepBaseMs: 60_000 + 1000 * round,
        close: true,
        // Every host but the first sweeps what its predecessor left: its clock past the sweep's age bound.
        clockAheadMs: SWEEP_MIN_AGE_MS + 60_000,
        ...(seam ? { pauseAt: seam } : {}),
      };
      const calls = threads.length * plan.rounds;
      const lineCount = 1 + 2 * calls + 2;
      const killAfter = 1 + Math.floor(random() * lineCount);
      const host = startKillHost(plan);
      const at = await host.until((line, lines) => (seam ? line.startsWith("paused ") || line === "closed" : lines.length >= killAfter || line === "closed"));
      await kill(host);
      // A host whose first stdio session started ended every process its killed predecessor left first.
      if (host.lines.includes("ready") && killed.length > 0) expect({ round, orphans: taggedBy(killed[killed.length - 1]) }).toEqual({ round, orphans: [] });
      killed.push(host.tagPrefix);
      if (process.env.KILL_HOST_VERBOSE === "1") process.stderr.write(`round ${round}: killed at ${seam ?? `line ${killAfter}/${lineCount}`} (${at}; exit ${host.child.exitCode ?? host.child.signalCode})\n`);
      // The live host is not disturbed by a kill, nor by a restart's sweeps.
      expect({ round, at, liveGone: liveChildren.filter((pid) => !alive(pid)) }).toEqual({ round, at, liveGone: [] });
    }

    // The last restart: calls in shared, new and temporary threads, all answered.
    const threads = ["shared-0", "shared-1", "last-a", "tmp-last"];
    const last = startKillHost({ ...base, label: "last", threads, temporary: ["tmp-last"], close: false, clockAheadMs: SWEEP_MIN_AGE_MS + 60_000 });
    expect(await last.until((line) => line === "ready")).toBe("ready");
    // Its first stdio session started once the processes of every killed host were ended.
    expect(killed.map(taggedBy).flat()).toEqual([]);
    const dones = await last.until((_, lines) => lines.filter((line) => line.startsWith("done ")).length === threads.length);
    expect(dones).not.toBe("exited");
    expect(last.lines.filter((line) => line.startsWith("done ")).sort()).toEqual(threads.map((_, n) => `done last-${n} success`).sort());
    // A temporary thread's folder goes once its child closed (idle); the others' stay while their sessions live.
    expect(await waitUntil(() => !existsSync(path.join(dataDir, "threads", "tmp-last")), 10_000)).toBe(true);
    expect(existsSync(threadPaths(dataDir, "last-a").tmp)).toBe(true);

    // No id sent twice; none of a killed host's sent again by the last; every call of the last sent once.
    const ids = calledIds(callLog);
    const counts = new Map<string, number>();
    for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
    expect(ids.filter((id) => !id.startsWith("live-") && !id.startsWith("last-") && !id.startsWith("k") && !id.startsWith("sleep "))).toEqual([]);
    expect(threads.map((_, n) => counts.get(`last-${n}`))).toEqual(threads.map(() => 1));

    // No file of a thread lost; the live host's folders and children there.
    expect(userFiles.filter((file) => !existsSync(file))).toEqual([]);
    expect(liveChildren.filter((pid) => !alive(pid))).toEqual([]);
    for (const thread of ["live-1", "live-2"]) expect(existsSync(threadPaths(dataDir, thread).tmp)).toBe(true);

    // It is killed too, and one more host closes: what is left is the live host's, the folders holding the threads'
    // files, and nothing else.
    await kill(last);
    const closer = startKillHost({ ...base, label: "closer", threads: ["closer-a"], close: true, clockAheadMs: SWEEP_MIN_AGE_MS + 60_000 });
    expect(await closer.until((line) => line === "closed")).toBe("closed");
    await kill(closer);
    expect(taggedBy(last.tagPrefix)).toEqual([]);
    const left = readdirSync(path.join(dataDir, "threads")).sort();
    expect(left).toEqual(["default", "live-1", "live-2", "shared-0", "shared-1"]);
    expect(left.flatMap((thread) => strangeInternal(dataDir, thread).map((name) => `${thread}: ${name}`))).toEqual([]);
    expect(pidsWithMarker(daemon).filter((pid) => !liveChildren.includes(pid))).toEqual([]);
    await kill(live);
  }, 60_000 + ROUNDS * 12_000);
});

describe("a host killed inside a step of its thread folders' handling, then restarted on the same data dir", () => {
  async function setUp() {
    const dir = await makeTempDir("kill-host-seam-");
    const dataDir = path.join(dir, "data");
    const plain = { type: "stdio", command: process.execPath, args: [PLAIN_SERVER] };
    const configPath = await writeConfig(dir, { mcpServers: { plain } });
    const base = { configPath, dataDir, rounds: 1, concurrency: 1, sleepEvery: 0, sleepBaseMs: 60_000, temporary: [], close: true };
    return { dataDir, base, later: SWEEP_MIN_AGE_MS + 60_000 };
  }
  const threadsIn = (dataDir: string): string[] => readdirSync(path.join(dataDir, "threads")).sort();
  const internalOf = (dataDir: string, thread: string): string => path.dirname(threadPaths(dataDir, thread).tmp);

  test("between setting the harness's .mcp/.gitignore aside and removing it (closing a thread's session): no file of the harness's keeps the folder from the next start's sweep", async () => {
    const { dataDir, base, later } = await setUp();
    const killed = startKillHost({ ...base, label: "k", threads: ["t"], clockAheadMs: 0, pauseAt: "gitignoreAside" });
    expect(await killed.until((line) => line.startsWith("paused ") || line === "closed")).toBe("paused gitignoreAside");
    await kill(killed);
    // One of its two threads' folders (discovery's and the call's) was being removed: its `.mcp` holds the harness's
    // .gitignore under the name it was set aside as, and nothing else.
    const internals = threadsIn(dataDir).filter((thread) => existsSync(internalOf(dataDir, thread)));
    expect(internals.map((thread) => readdirSync(internalOf(dataDir, thread)))).toContainEqual([expect.stringMatching(/^\.gitignore\..+\.removed$/)]);

    const next = startKillHost({ ...base, label: "n", threads: ["other"], clockAheadMs: later });
    expect(await next.until((line) => line === "closed")).toBe("closed");
    await kill(next);
    expect(threadsIn(dataDir)).toEqual([]);
  }, 60_000);

  test("between creating the harness's .mcp/.gitignore and writing it: the next session of the thread has it written, and its close removes the folder", async () => {
    const { dataDir, base, later } = await setUp();
    // The first folder prepared is discovery's (the default thread): it is killed there.
    const killed = startKillHost({ ...base, label: "k", threads: ["t"], clockAheadMs: 0, pauseAt: "gitignoreCreated" });
    expect(await killed.until((line) => line.startsWith("paused ") || line === "closed")).toBe("paused gitignoreCreated");
    await kill(killed);
    // Never a .gitignore without the harness's text (which would stay for good): none yet.
    const gitignore = path.join(internalOf(dataDir, "default"), INTERNAL_GITIGNORE);
    expect(existsSync(gitignore) ? readFileSync(gitignore, "utf8") : "none").toBe("none");

    const next = startKillHost({ ...base, label: "n", threads: ["t"], clockAheadMs: later, close: false });
    expect(await next.until((line) => line.startsWith("done "))).toBe("done n-0 success");
    expect(readFileSync(gitignore, "utf8")).toBe(INTERNAL_GITIGNORE_TEXT);
    await kill(next);
    const closer = startKillHost({ ...base, label: "c", threads: ["other"], clockAheadMs: later });
    expect(await closer.until((line) => line === "closed")).toBe("closed");
    await kill(closer);
    expect(threadsIn(dataDir)).toEqual([]);
  }, 60_000);
});
