/**
 * `mcp-harness tools` and `check` on configs with task toolsets, against the real long-job stdio fixture: `tools`
 * lists what an agent gets (submit tools marked with their toolset, status/cancel hidden), and both refuse what the
 * task runtime refuses at startup, one clean line each.
 */
import { describe, expect, test } from "@jest/globals";
import { runCli, type CliIo } from "../../lib/cli";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { stdioFixture } from "../fixtures/stdio";

type TestIo = CliIo & { stdout: string[]; stderr: string[] };

function io(cwd: string): TestIo {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, out: (t) => stdout.push(t), err: (t) => stderr.push(t), env: {}, cwd };
}

const linesOf = (chunks: string[]) => chunks.join("\n").split("\n");
const errorsOf = (out: TestIo) => linesOf(out.stderr).filter((l) => l.startsWith("error: "));

const DISABLED_MESSAGE =
  "MCP task_toolsets are configured ('jobs'), so mcpTasks.enabled=true is required; task tools are never exposed as synchronous calls";
const MISSING_MESSAGE = "MCP server 'jobs' task_toolsets reference missing raw tool(s): nope_tool";

/** A task server (start_job / job_status / job_cancel / job_log, plus pid) and an ordinary one. */
async function taskConfig(opts: { enabled: boolean; submitTool?: string }): Promise<{ dir: string; file: string }> {
  const dir = await makeTempDir("cli-task-config-");
  const file = await writeConfig(dir, {
    mcpTasks: { enabled: opts.enabled },
    mcpServers: {
      jobs: {
        type: "stdio",
        ...stdioFixture({ name: "jobs", toolNames: ["pid"], tasks: true }),
        task_toolsets: [{ name: "compile", submit_tool: opts.submitTool ?? "start_job", status_tool: "job_status", cancel_tool: "job_cancel" }],
      },
      plain: { type: "stdio", ...stdioFixture({ name: "plain", toolNames: ["pid"] }) },
    },
  });
  return { dir, file };
}

describe("mcp-harness tools with task servers", () => {
  test("lists the agent's view: submit tools marked with their toolset, status and cancel tools hidden", async () => {
    const { dir, file } = await taskConfig({ enabled: true });
    const json = io(dir);
    expect(await runCli(["tools", file, "--json"], json)).toBe(0);
    const report = JSON.parse(json.stdout.join("\n")) as { ok: boolean; tools: { name: string; task: string | null }[] };
    expect(report.ok).toBe(true);
    expect(report.tools.map((t) => [t.name, t.task]).sort()).toEqual([
      ["jobs_job_log", null],
      ["jobs_pid", null],
      ["jobs_start_job", "compile"],
      ["plain_pid", null],
    ]);

    const table = io(dir);
    expect(await runCli(["tools", file], table)).toBe(0);
    const text = table.stdout.join("\n");
    expect(text.split("\n")[0]).toMatch(/^tool\s+server\s+raw name\s+transport\s+task\s+routing$/);
    expect(text).toMatch(/^jobs_start_job\s+jobs\s+start_job\s+stdio\s+compile\s+-$/m);
    expect(text).not.toMatch(/job_status|job_cancel/);
  });

  test("toolsets with mcpTasks disabled: one clean line (or {ok:false,error}), exit 1", async () => {
    const { dir, file } = await taskConfig({ enabled: false });
    const table = io(dir);
    expect(await runCli(["tools", file], table)).toBe(1);
    expect(table.stdout).toEqual([]);
    expect(table.stderr).toEqual([`error: ${DISABLED_MESSAGE}`]);
    const json = io(dir);
    expect(await runCli(["tools", file, "--json"], json)).toBe(1);
    expect(JSON.parse(json.stdout.join("\n"))).toEqual({ ok: false, error: DISABLED_MESSAGE });
  });

  test("a toolset naming a raw tool the server does not list: one clean line, exit 1", async () => {
    const { dir, file } = await taskConfig({ enabled: true, submitTool: "nope_tool" });
    const json = io(dir);
    expect(await runCli(["tools", file, "--json"], json)).toBe(1);
    expect(JSON.parse(json.stdout.join("\n"))).toEqual({ ok: false, error: MISSING_MESSAGE });
  });
});

describe("mcp-harness check with task servers", () => {
  test("a valid task config passes, online and offline", async () => {
    const { dir, file } = await taskConfig({ enabled: true });
    const out = io(dir);
    expect(await runCli(["check", file], out)).toBe(0);
    expect(errorsOf(out)).toEqual([]);
    expect(linesOf(out.stdout).at(-1)).toBe("config OK");
  });

  test("toolsets with mcpTasks disabled fail it, offline too (the worker and startup refuse them)", async () => {
    const { dir, file } = await taskConfig({ enabled: false });
    for (const args of [["check", file], ["check", file, "--offline"]]) {
      const out = io(dir);
      expect(await runCli(args, out)).toBe(1);
      expect(errorsOf(out)).toEqual([`error: ${DISABLED_MESSAGE}`]);
      expect(linesOf(out.stdout).at(-1)).toBe("check failed: 1 problem(s)");
    }
    const json = io(dir);
    expect(await runCli(["check", file, "--offline", "--json"], json)).toBe(1);
    expect(JSON.parse(json.stdout.join("\n"))).toMatchObject({ ok: false, failures: [DISABLED_MESSAGE] });
  });

  test("online, a toolset naming a raw tool its server does not list fails it; offline cannot tell", async () => {
    const { dir, file } = await taskConfig({ enabled: true, submitTool: "nope_tool" });
    const out = io(dir);
    expect(await runCli(["check", file], out)).toBe(1);
    expect(errorsOf(out)).toEqual([`error: ${MISSING_MESSAGE}`]);
    // The server itself starts; the toolset is what is wrong.
    expect(out.stdout.join("\n")).toMatch(/^jobs\s+stdio\s+true\s+ok \(5 tools\)$/m);
    const json = io(dir);
    expect(await runCli(["check", file, "--json"], json)).toBe(1);
    expect(JSON.parse(json.stdout.join("\n"))).toMatchObject({ ok: false, failures: [MISSING_MESSAGE] });

    expect(await runCli(["check", file, "--offline"], io(dir))).toBe(0);
  });
});
