/**
 * A restarted host meets its predecessor's orphans at once: its first stdio session's server may need what they hold
 * (a lock, a port, a browser's profile). A file of its own: the sweep runs once per process (module registry).
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { once } from "node:events";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { endHosts, hostMarker, startHost } from "../fixtures/hosts";
import { stdioFixture } from "../fixtures/stdio";
import { pidsWithMarker, waitUntil } from "../fixtures/processes";

const toolkits: McpToolkit[] = [];
afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((toolkit) => toolkit.close()));
  endHosts();
});

describe("a host restarted after a SIGKILL", () => {
  test("the next host's first stdio session starts its server once they are ended: one that runs one at a time does not meet the lock its predecessor's daemon still holds", async () => {
    const daemon = hostMarker();
    const lock = path.join(await makeTempDir("orphan-lock-"), "server.lock");
    const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
    // One server at a time per lock (a browser's profile, a port); its daemon keeps the lock and ignores SIGTERM.
    const script =
      `exec 9>>"$LOCK"; flock -n 9 || { echo "lock held" >&2; exit 1; }; ` +
      `setsid sh -c 'trap "" TERM; sleep ${daemon}' </dev/null >/dev/null 2>&1 & exec 9>&-; exec "$0" "$@"`;
    const server = { type: "stdio" as const, command: "sh", args: ["-c", script, launch.command, ...launch.args], env: { ...launch.env, LOCK: lock } };
    const configPath = await writeConfig(await makeTempDir("orphan-lock-config-"), { mcpServers: { local: server } });
    const killed = await startHost(configPath);
    expect(await waitUntil(() => pidsWithMarker(daemon).length > 0)).toBe(true);
    killed.kill("SIGKILL");
    await once(killed, "exit");

    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("orphan-lock-next-") });
    toolkits.push(toolkit);
    expect((await toolkit.getTools()).map((tool) => tool.name)).toEqual([expect.stringContaining("pid")]);
    await toolkit.close();
    expect(pidsWithMarker(daemon)).toEqual([]);
  }, 60_000);
});
