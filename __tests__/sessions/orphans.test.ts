/**
 * Processes of stdio sessions whose host was killed before it could close them: the next host's first stdio session
 * ends them, and leaves those of hosts still running. Every process sweeps on its first stdio session, so another test
 * file running meanwhile may be the one that ends an orphan here: what is checked is that it is gone, not who ended it.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { readFileSync, readlinkSync } from "node:fs";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { endOrphanedSessions, SESSION_TAG_ENV } from "../../lib/sessions/session-processes";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { endHosts, hostMarker as marker, startHost } from "../fixtures/hosts";
import { stdioFixture, TSX_CJS_REGISTER } from "../fixtures/stdio";
import { pidsWithMarker, waitUntil } from "../fixtures/processes";

const toolkits: McpToolkit[] = [];
afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((toolkit) => toolkit.close()));
  endHosts();
});

/** The fixture server launched through `sh -c`, which first starts a sleeper in a session of its own (a daemon). */
function withDaemon(sleeper: string, daemon = `setsid sleep ${sleeper}`) {
  const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
  const background = `${daemon} </dev/null >/dev/null 2>&1 &`;
  return { type: "stdio" as const, command: "sh", args: ["-c", `${background} exec "$0" "$@"`, launch.command, ...launch.args], env: launch.env };
}

/** A host whose server's `sh -c` first started a daemon carrying `sleeper` (`prefix`: the host runs under it). */
async function hostWithDaemon(sleeper: string, prefix: readonly string[] = []) {
  return startHost(await writeConfig(await makeTempDir("orphan-host-"), { mcpServers: { local: withDaemon(sleeper) } }), prefix);
}

/** A `sleep` carrying `tag` as its session tag, as a session's process would. */
function taggedSleeper(tag: string, sleeper: string): void {
  const child = spawn("sleep", [sleeper], { stdio: "ignore", detached: true, env: { PATH: process.env.PATH, [SESSION_TAG_ENV]: tag } });
  child.unref();
}

/** This process as a tag names its host: PID namespace, pid, start time. */
function ownHost(): { namespace: string; start: string } {
  const text = readFileSync("/proc/self/stat", "utf8");
  return { namespace: /[0-9]+/.exec(readlinkSync("/proc/self/ns/pid"))![0], start: text.slice(text.lastIndexOf(")") + 2).split(" ")[19] };
}

describe("processes of stdio sessions whose host was killed", () => {
  test("the next host's first stdio session ends them; a host still running keeps its own", async () => {
    const [killedHosts, runningHosts] = [marker(), marker()];
    const killed = await hostWithDaemon(killedHosts);
    await hostWithDaemon(runningHosts);
    expect(await waitUntil(() => pidsWithMarker(killedHosts).length === 1 && pidsWithMarker(runningHosts).length === 1)).toBe(true);
    killed.kill("SIGKILL");
    await once(killed, "exit");

    const logger = new RecordingLogger();
    const configPath = await writeConfig(await makeTempDir("orphan-next-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir: await makeTempDir("orphan-next-data-") });
    toolkits.push(toolkit);
    await toolkit.getTools();
    // close() waits for the sweep its first stdio session began.
    await toolkit.close();
    expect(pidsWithMarker(killedHosts)).toEqual([]);
    expect(pidsWithMarker(runningHosts)).toHaveLength(1);
  }, 60_000);

  test("a tag names its host by PID namespace, pid and start time: a pid now run by another process is a host gone; a host in another namespace, tags without a host, and `keep`, are left", async () => {
    const [reused, ours, elsewhere, unhosted, kept] = [marker(), marker(), marker(), marker(), marker()];
    const { namespace, start } = ownHost();
    taggedSleeper(`${namespace}.${process.pid}.${Number(start) - 1}.${randomUUID()}`, reused);
    taggedSleeper(`${namespace}.${process.pid}.${start}.${randomUUID()}`, ours);
    taggedSleeper(`${Number(namespace) + 1}.${process.pid}.${Number(start) - 1}.${randomUUID()}`, elsewhere);
    taggedSleeper(randomUUID(), unhosted);
    taggedSleeper("keep", kept);
    const all = [reused, ours, elsewhere, unhosted, kept];
    expect(await waitUntil(() => all.every((mark) => pidsWithMarker(mark).length === 1))).toBe(true);
    await endOrphanedSessions(0);
    expect(all.map((mark) => pidsWithMarker(mark).length)).toEqual([0, 1, 1, 1, 1]);
  });
});

/** A node program that runs one sweep (in a process of its own, as another host would) and prints how many it ended. */
const SWEEP = `require(${JSON.stringify(path.join(__dirname, "..", "..", "lib", "sessions", "session-processes.ts"))}).endOrphanedSessions(0).then((n) => console.log(n))`;
function sweepIn(prefix: readonly string[], env?: NodeJS.ProcessEnv): number {
  const [command, ...args] = [...prefix, process.execPath, "--require", TSX_CJS_REGISTER, "-e", SWEEP];
  return Number(execFileSync(command, args, { encoding: "utf8", ...(env ? { env } : {}) }).trim());
}
const root = process.getuid?.() === 0 && process.platform === "linux";

// Real namespaces (unshare, nsenter, a /proc mounted with hidepid): root only.
(root ? describe : describe.skip)("a sweep leaves the processes of a host still running where it cannot see that host as its tags name it", () => {
  test("a host in a PID namespace whose /proc is the machine's (process.pid is not its pid in /proc): a sweep there keeps its sessions", async () => {
    const daemon = marker();
    const host = await hostWithDaemon(daemon, ["unshare", "--pid", "--fork", "--kill-child=SIGKILL", "--"]);
    expect(await waitUntil(() => pidsWithMarker(daemon).length === 1)).toBe(true);
    // From another process in the host's PID namespace (that of the node process `unshare` forked).
    const inside = readFileSync(`/proc/${host.pid}/task/${host.pid}/children`, "utf8").trim();
    // Its signals would go to the pids of that namespace: that it took nothing for an orphan is what tells. Tags of
    // other namespaces (every other test's) are not its to judge, so the count is this host's alone.
    expect(sweepIn(["nsenter", "--target", inside, "--pid", "--"])).toBe(0);
    expect(pidsWithMarker(daemon)).toHaveLength(1);
  }, 60_000);

  test("a host in a time namespace of its own (its start time reads otherwise here) keeps its sessions", async () => {
    const daemon = marker();
    await hostWithDaemon(daemon, ["unshare", "--time", "--boottime", "100000", "--fork", "--kill-child=SIGKILL", "--"]);
    expect(await waitUntil(() => pidsWithMarker(daemon).length === 1)).toBe(true);
    sweepIn([]);
    expect(pidsWithMarker(daemon)).toHaveLength(1);
  }, 60_000);

  test("a host the sweeping user cannot see (/proc with hidepid=2) keeps the processes that user can see", async () => {
    // The daemon runs as nobody; its host as root.
    const nobodysDaemon = marker();
    const asNobodyDaemon = `setpriv --reuid=65534 --regid=65534 --clear-groups setsid sleep ${nobodysDaemon}`;
    await startHost(await writeConfig(await makeTempDir("orphan-host-"), { mcpServers: { local: withDaemon(nobodysDaemon, asNobodyDaemon) } }));
    expect(await waitUntil(() => pidsWithMarker(nobodysDaemon).length === 1)).toBe(true);
    const asNobody = `mount -t proc -o hidepid=2 proc /proc && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"`;
    sweepIn(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", asNobody, "sh"], { ...process.env, HOME: "/tmp" });
    expect(pidsWithMarker(nobodysDaemon)).toHaveLength(1);
  }, 60_000);
});
