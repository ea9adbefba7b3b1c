/**
 * Review of c24598b (spawn EACCES with a configured cwd the host's user may not enter names the cwd): a command that is
 * really not executable, with a cwd that may be entered, or with no configured cwd (the thread's own workspace), still
 * blames the command; a cwd whose own mode allows entering but a folder on its way does not is named as the cause. Run
 * as `nobody` (`runuser`), skipped with a message when not root.
 */
import { describe, expect, test } from "@jest/globals";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, realpath, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { promisify } from "node:util";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { stdioFixture, TSX_CJS_REGISTER } from "../fixtures/stdio";

const RUNUSER = "/usr/sbin/runuser";
const LOAD_AS_USER = path.join(__dirname, "..", "fixtures", "load-as-user.ts");
const unprivileged = process.getuid?.() === 0 && existsSync(RUNUSER);
if (!unprivileged) console.warn("start-failure-permission-review: skipped, it needs root and runuser to run the toolkit as 'nobody'");

const runAsNobody = async (...args: string[]) =>
  JSON.parse((await promisify(execFile)(RUNUSER, ["-u", "nobody", "--", process.execPath, "--require", TSX_CJS_REGISTER, LOAD_AS_USER, ...args])).stdout) as {
    tools: string[];
    lines: string[];
  };

describe("spawn EACCES as a user that may not do everything", () => {
  (unprivileged ? test : test.skip)("a command not executable blames the command, with an enterable cwd or none; a folder on the cwd's way blames the cwd", async () => {
    const base = await realpath(await makeTempDir("mcp-cwd-permission-review-"));
    await chmod(base, 0o755);
    const [open, closedParent, data] = [path.join(base, "open"), path.join(base, "closed"), path.join(base, "data")];
    const inner = path.join(closedParent, "inner");
    await mkdir(open, { mode: 0o755 });
    await mkdir(inner, { recursive: true, mode: 0o755 });
    await chmod(inner, 0o777);
    await chmod(closedParent, 0o700);
    await mkdir(data);
    await chmod(data, 0o777);
    const notExecutable = path.join(base, "not-executable");
    await writeFile(notExecutable, "#!/bin/sh\n", { mode: 0o644 });
    await chmod(notExecutable, 0o644);
    const configPath = await writeConfig(base, {
      mcpServers: {
        cmdopen: { type: "stdio", command: notExecutable, args: [], cwd: open },
        cmdthread: { type: "stdio", command: notExecutable, args: [] },
        parent: { type: "stdio", ...stdioFixture({ name: "parent", toolNames: ["pid"] }), cwd: inner },
        ok: { type: "stdio", ...stdioFixture({ name: "ok", toolNames: ["pid"] }) },
      },
    });
    const { tools, lines } = await runAsNobody(configPath, data);
    expect(tools).toEqual(["ok_pid"]);
    const skipped = (name: string) => lines.find((line) => line.startsWith(`Skipping MCP server '${name}'`)) ?? "";
    expect(skipped("cmdopen")).toContain("EACCES");
    expect(skipped("cmdopen")).not.toContain("configured cwd");
    expect(skipped("cmdthread")).toContain("EACCES");
    expect(skipped("cmdthread")).not.toContain("configured cwd");
    expect(skipped("parent")).toBe(
      `Skipping MCP server 'parent' after tool discovery failed: could not start the stdio MCP server 'parent': its configured cwd may not be entered: ${inner}`,
    );
  });
});
