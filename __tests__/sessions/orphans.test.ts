/**
 * Processes of stdio sessions whose host was killed before it could close them: the next host's first stdio session
 * ends them, and leaves those of hosts still running. Every process sweeps on its first stdio session, so another test
 * file running meanwhile may be the one that ends an orphan here: what is checked is that it is gone, not who ended it.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { readFileSync, readlinkSync } from "node:fs";
import * as path from "node:path";
import { createInterface } from "node:readline";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { endOrphanedSessions, SESSION_TAG_ENV } from "../../lib/sessions/session-processes";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { stdioFixture, TSX_CJS_REGISTER } from "../fixtures/stdio";
import { pidsWithMarker, waitUntil } from "../fixtures/processes";

const HOST = path.join(__dirname, "..", "fixtures", "stdio-host.ts");

const hosts: ChildProcess[] = [];
const marks: string[] = [];
const toolkits: McpToolkit[] = [];
afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((toolkit) => toolkit.close()));
  for (const host of hosts.splice(0)) host.kill("SIGKILL");
  for (const mark of marks.splice(0)) for (const pid of pidsWithMarker(mark)) process.kill(pid, "SIGKILL");
});

let markers = 0;
/** A `sleep` argument no other process has: the sleeper is found by it in /proc. */
function marker(): string {
  const mark = `8${(markers += 1)}.${process.pid}${Date.now() % 1000}`;
  marks.push(mark);
  return mark;
}

/** The fixture server launched through `sh -c`, which first starts a sleeper in a session of its own (a daemon). */
function withDaemon(sleeper: string) {
  const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
  const background = `setsid sleep ${sleeper} </dev/null >/dev/null 2>&1 &`;
  return { type: "stdio" as const, command: "sh", args: ["-c", `${background} exec "$0" "$@"`, launch.command, ...launch.args], env: launch.env };
}

/** A host process whose toolkit started the server's child (discovery), once it says so. */
async function startHost(sleeper: string): Promise<ChildProcess> {
  const configPath = await writeConfig(await makeTempDir("orphan-host-"), { mcpServers: { local: withDaemon(sleeper) } });
  const host = spawn(process.execPath, ["--require", TSX_CJS_REGISTER, HOST, configPath, await makeTempDir("orphan-host-data-")], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  hosts.push(host);
  const lines = createInterface({ input: host.stdout! });
  const [line] = (await Promise.race([once(lines, "line"), once(host, "exit").then(() => ["exited"])])) as string[];
  expect(line).toBe("ready");
  return host;
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
    const killed = await startHost(killedHosts);
    await startHost(runningHosts);
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
