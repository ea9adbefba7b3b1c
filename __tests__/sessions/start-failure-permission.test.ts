/**
 * A stdio server whose configured `cwd` the host's user may not enter (no search permission): Node blames the command
 * ("spawn /usr/bin/node EACCES"), which is executable. Root enters every folder, so the toolkit is run as `nobody`
 * (`runuser`) in a child process; the test is skipped, saying why, where that cannot be done.
 */
import { describe, expect, test } from "@jest/globals";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, mkdir, realpath } from "node:fs/promises";
import * as path from "node:path";
import { promisify } from "node:util";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { stdioFixture, TSX_CJS_REGISTER } from "../fixtures/stdio";

const RUNUSER = "/usr/sbin/runuser";
const LOAD_AS_USER = path.join(__dirname, "..", "fixtures", "load-as-user.ts");
const unprivileged = process.getuid?.() === 0 && existsSync(RUNUSER);
if (!unprivileged) console.warn("start-failure-permission: skipped, it needs root and runuser to run the toolkit as 'nobody'");

const NOBODY = 65534;
const runAsNobody = async (...args: string[]) =>
  JSON.parse((await promisify(execFile)(RUNUSER, ["-u", "nobody", "--", process.execPath, "--require", TSX_CJS_REGISTER, LOAD_AS_USER, ...args])).stdout) as {
    tools: string[];
    lines: string[];
    call?: string;
  };

describe("a stdio server's configured cwd without search permission", () => {
  (unprivileged ? test : test.skip)("is named as the cause in the log, not the command", async () => {
    const base = await realpath(await makeTempDir("mcp-cwd-permission-"));
    await chmod(base, 0o755);
    const [locked, open, data] = [path.join(base, "locked"), path.join(base, "open"), path.join(base, "data")];
    await mkdir(locked, { mode: 0o700 });
    await mkdir(open, { mode: 0o755 });
    await mkdir(data, { mode: 0o777 });
    await chmod(data, 0o777);
    const configPath = await writeConfig(base, {
      mcpServers: {
        locked: { type: "stdio", ...stdioFixture({ name: "locked", toolNames: ["pid"] }), cwd: locked },
        open: { type: "stdio", ...stdioFixture({ name: "open", toolNames: ["pid"] }), cwd: open },
      },
    });
    const { tools, lines } = await runAsNobody(configPath, data);
    // The same user starts a server in a folder it may enter.
    expect(tools).toEqual(["open_pid"]);
    expect(lines).toContain(`Skipping MCP server 'locked' after tool discovery failed: could not start the stdio MCP server 'locked': its configured cwd may not be entered: ${locked}`);
  });

  (unprivileged ? test : test.skip)("that lost it after discovery: a call's line names the cwd, not the command", async () => {
    const base = await realpath(await makeTempDir("mcp-cwd-permission-"));
    await chmod(base, 0o755);
    const [own, data] = [path.join(base, "own"), path.join(base, "data")];
    await mkdir(own, { mode: 0o755 });
    await chown(own, NOBODY, NOBODY);
    await mkdir(data);
    await chmod(data, 0o777);
    const configPath = await writeConfig(base, {
      mcpServers: { own: { type: "stdio", ...stdioFixture({ name: "own", toolNames: ["pid"] }), cwd: own } },
    });
    const { tools, call } = await runAsNobody(configPath, data, own, "own_pid");
    expect(tools).toEqual(["own_pid"]);
    expect(call).toBe("MCP tool 'pid' on server 'own' failed: could not start the stdio MCP server 'own' (EACCES: its configured cwd may not be entered)");
  });
});
