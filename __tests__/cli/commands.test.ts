import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { runCli, type CliIo } from "../../lib/cli";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";

let http: HttpFixture;
beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["echo", "add"] });
});
afterAll(async () => {
  await http.close();
});

function io(env: NodeJS.ProcessEnv = {}): CliIo & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, out: (t) => stdout.push(t), err: (t) => stderr.push(t), env, cwd: process.cwd() };
}

describe("mcp-harness CLI", () => {
  test("check: a valid config passes; an enabled server with an unset variable fails naming it", async () => {
    const dir = await makeTempDir("cli-");
    const good = await writeConfig(dir, { mcpServers: { remote: { url: http.url } } }, "good.json");
    const okIo = io();
    expect(await runCli(["check", good], okIo)).toBe(0);
    expect(okIo.stdout.join("\n")).toContain("config OK");

    const bad = await writeConfig(dir, { mcpServers: { gh: { command: "npx", env: { TOKEN: "$CLI_TEST_UNSET_TOKEN" } } } }, "bad.json");
    const badIo = io();
    expect(await runCli(["check", bad, "--json"], badIo)).toBe(1);
    const report = JSON.parse(badIo.stdout.join("\n"));
    expect(report.ok).toBe(false);
    expect(report.skipped[0].reason).toContain("CLI_TEST_UNSET_TOKEN");
  });

  test("check: a validation error names the JSON path and exits 1", async () => {
    const dir = await makeTempDir("cli-");
    const file = await writeConfig(dir, { mcpServers: { gh: { command: "npx", args: ["-y", 42] } } });
    const out = io();
    expect(await runCli(["check", file], out)).toBe(1);
    expect(out.stderr.join("\n")).toContain("mcpServers.gh.args[1]");
  });

  test("tools: lists visible name, source server, raw name and transport", async () => {
    const dir = await makeTempDir("cli-");
    const file = await writeConfig(dir, { mcpServers: { remote: { url: http.url } } });
    const out = io();
    expect(await runCli(["tools", file, "--json"], out)).toBe(0);
    const { tools } = JSON.parse(out.stdout.join("\n"));
    expect(tools).toEqual(
      expect.arrayContaining([{ name: "remote_add", server: "remote", rawName: "add", transport: "http", routing: null }]),
    );
    const table = io();
    expect(await runCli(["tools", file], table)).toBe(0);
    expect(table.stdout.join("\n")).toMatch(/remote_echo\s+remote\s+echo\s+http/);
  });

  test("unknown commands exit 2 with the usage", async () => {
    const out = io();
    expect(await runCli(["frobnicate"], out)).toBe(2);
    expect(out.stderr.join("\n")).toContain("usage: mcp-harness");
  });
});
