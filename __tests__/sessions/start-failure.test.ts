/**
 * A stdio server whose child cannot be spawned because of its configured `cwd` (missing, or a file): Node reports
 * `spawn <command> ENOENT` (blaming the command) or a bare `spawn ENOTDIR`. The operator's log names the server, the
 * field and its value; the model's line names the server and the field, never a local path. A missing command with an
 * existing `cwd` is still the command's fault.
 */
import { afterAll, describe, expect, test } from "@jest/globals";
import { mkdir, rmdir, symlink, unlink, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

const toolkits: McpToolkit[] = [];
afterAll(async () => {
  await Promise.all(toolkits.map((t) => t.close()));
});

const launch = (name: string) => stdioFixture({ name, toolNames: ["pid"] });
const thread = (id: string) => ({ configurable: { thread_id: id } });

async function toolkitOf(servers: Record<string, unknown>, env: Record<string, string> = {}): Promise<{ toolkit: McpToolkit; logger: RecordingLogger }> {
  const logger = new RecordingLogger();
  const configPath = await writeConfig(await makeTempDir("mcp-start-failure-cfg-"), { mcpServers: servers });
  const toolkit = createMcpToolkit({ configPath, env, logger, dataDir: await makeTempDir("mcp-start-failure-data-") });
  toolkits.push(toolkit);
  return { toolkit, logger };
}

describe("a stdio server that cannot start because of its configured cwd", () => {
  test("the operator's log names the server, the cwd field and its value (a $VAR in it redacted), not the command", async () => {
    const base = await makeTempDir("mcp-start-failure-");
    const missing = path.join(base, "no-such-folder");
    const file = path.join(base, "a-file");
    await writeFile(file, "");
    const { toolkit, logger } = await toolkitOf(
      {
        nowhere: { type: "stdio", ...launch("nowhere"), cwd: missing },
        filed: { type: "stdio", ...launch("filed"), cwd: file },
        hidden: { type: "stdio", ...launch("hidden"), cwd: `${base}/\${TENANT_DIR}/work` },
        // Beneath a file: the spawn fails with ENOTDIR, as for a file, but there is no such folder.
        under: { type: "stdio", ...launch("under"), cwd: path.join(file, "work") },
      },
      { TENANT_DIR: "tenant-s3cr3t" },
    );
    expect(await toolkit.getTools()).toEqual([]);
    expect(logger.messages("warn").sort()).toEqual([
      `Skipping MCP server 'filed' after tool discovery failed: could not start the stdio MCP server 'filed': its configured cwd is not a folder: ${file}`,
      `Skipping MCP server 'hidden' after tool discovery failed: could not start the stdio MCP server 'hidden': its configured cwd does not exist: ${base}/[redacted]/work`,
      `Skipping MCP server 'nowhere' after tool discovery failed: could not start the stdio MCP server 'nowhere': its configured cwd does not exist: ${missing}`,
      `Skipping MCP server 'under' after tool discovery failed: could not start the stdio MCP server 'under': its configured cwd does not exist: ${file}/work`,
    ]);
  });

  test("a call's line names the server and the cwd field, without a path; a missing command with an existing cwd blames the command", async () => {
    const base = await makeTempDir("mcp-start-failure-");
    const [goneDir, fileDir, cmdDir] = ["gone", "file", "cmd"].map((name) => path.join(base, name));
    await Promise.all([goneDir, fileDir, cmdDir].map((dir) => mkdir(dir)));
    const command = path.join(base, "mcp-server-node");
    await symlink(process.execPath, command);
    const { toolkit } = await toolkitOf({
      gone: { type: "stdio", ...launch("gone"), cwd: goneDir },
      filed: { type: "stdio", ...launch("filed"), cwd: fileDir },
      nocmd: { type: "stdio", ...launch("nocmd"), command, cwd: cmdDir },
    });
    const graph = toolNodeGraph(await toolkit.getTools());
    // Discovery worked; each call's new thread starts a child of its own, after the server's folders changed.
    await rmdir(goneDir);
    await rmdir(fileDir);
    await writeFile(fileDir, "");
    await unlink(command);
    const lines = await Promise.all(
      (["gone", "filed", "nocmd"] as const).map(async (server) => {
        const message = await callThroughGraph(graph, `${server}_pid`, {}, thread(`t-${server}`));
        expect(message.status).toBe("error");
        return message.content;
      }),
    );
    expect(lines).toEqual([
      "MCP tool 'pid' on server 'gone' failed: could not start the stdio MCP server 'gone' (ENOENT: its configured cwd does not exist)",
      "MCP tool 'pid' on server 'filed' failed: could not start the stdio MCP server 'filed' (ENOTDIR: its configured cwd is not a folder)",
      "MCP tool 'pid' on server 'nocmd' failed: could not start the stdio MCP server 'nocmd' " +
        "(ENOENT: the command, or the interpreter its script names, does not exist)",
    ]);
  });
});
