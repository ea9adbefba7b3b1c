/**
 * Review of the start failure's cwd cause: a `cwd` made of a `$VAR` holding a secret reaches neither the model nor the
 * operator's log in any form, the relative one the loader resolves against the config's folder included.
 */
import { afterAll, describe, expect, test } from "@jest/globals";
import { execFileSync } from "node:child_process";
import { mkdir, symlink } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, seenByModel, toolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

const toolkits: McpToolkit[] = [];
afterAll(async () => {
  await Promise.all(toolkits.map((t) => t.close()));
});

const SECRET = "tenant-s3cr3t-4f9a";

async function warningsOf(cwd: string, value: string): Promise<string[]> {
  const logger = new RecordingLogger();
  const configPath = await writeConfig(await makeTempDir("mcp-cwd-review-cfg-"), {
    mcpServers: { hidden: { type: "stdio", ...stdioFixture({ name: "hidden", toolNames: ["pid"] }), cwd } },
  });
  const toolkit = createMcpToolkit({ configPath, env: { TENANT_DIR: value }, logger, dataDir: await makeTempDir("mcp-cwd-review-data-") });
  toolkits.push(toolkit);
  expect(await toolkit.getTools()).toEqual([]);
  return logger.lines.map((line) => line.message);
}

describe("a missing cwd from a $VAR holding a secret", () => {
  test.each([
    ["relative, with a leading ./", "${TENANT_DIR}", `./${SECRET}`],
    ["relative, with a trailing slash", "${TENANT_DIR}", `${SECRET}/`],
    ["relative, with a doubled slash", "${TENANT_DIR}", `${SECRET}//x`],
    ["relative, inside a longer cwd", "${TENANT_DIR}/work", `./${SECRET}`],
  ])("%s: the log names the field, not the secret", async (_label, cwd, value) => {
    const lines = await warningsOf(cwd, value);
    expect(lines.some((line) => line.includes("its configured cwd does not exist"))).toBe(true);
    for (const line of lines) expect(line).not.toContain(SECRET);
  });
});

describe("an existing cwd from a $VAR holding a secret, relative to the config's folder", () => {
  test("a server answering its cwd shows the model no part of the secret", async () => {
    const dir = await makeTempDir("mcp-cwd-review-cfg-");
    await mkdir(path.join(dir, SECRET));
    const configPath = await writeConfig(dir, {
      mcpServers: { hidden: { type: "stdio", ...stdioFixture({ name: "hidden", toolNames: ["where"] }), cwd: "${TENANT_DIR}" } },
    });
    const logger = new RecordingLogger();
    const toolkit = createMcpToolkit({ configPath, env: { TENANT_DIR: `./${SECRET}/` }, logger, dataDir: await makeTempDir("mcp-cwd-review-data-") });
    toolkits.push(toolkit);
    const graph = toolNodeGraph(await toolkit.getTools());
    const message = await callThroughGraph(graph, "hidden_where", {}, { configurable: { thread_id: "t-where" } });
    expect(message.status).toBe("success");
    expect(seenByModel(message)).toContain("cwd");
    expect(seenByModel(message)).not.toContain(SECRET);
    for (const line of logger.messages()) expect(line).not.toContain(SECRET);
  });
});

describe("a cwd that is a dangling symbolic link or a FIFO", () => {
  test("named in the log as missing and as not a folder, with its value", async () => {
    const base = await makeTempDir("mcp-cwd-review-odd-");
    const dangling = path.join(base, "dangling");
    await symlink(path.join(base, "nowhere"), dangling);
    const fifo = path.join(base, "fifo");
    execFileSync("mkfifo", [fifo]);
    const logger = new RecordingLogger();
    const launch = (name: string) => stdioFixture({ name, toolNames: ["pid"] });
    const configPath = await writeConfig(await makeTempDir("mcp-cwd-review-cfg-"), {
      mcpServers: { dangling: { type: "stdio", ...launch("dangling"), cwd: dangling }, fifo: { type: "stdio", ...launch("fifo"), cwd: fifo } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir: await makeTempDir("mcp-cwd-review-data-") });
    toolkits.push(toolkit);
    expect(await toolkit.getTools()).toEqual([]);
    expect(logger.messages("warn").sort()).toEqual([
      `Skipping MCP server 'dangling' after tool discovery failed: could not start the stdio MCP server 'dangling': its configured cwd does not exist: ${dangling}`,
      `Skipping MCP server 'fifo' after tool discovery failed: could not start the stdio MCP server 'fifo': its configured cwd is not a folder: ${fifo}`,
    ]);
  });
});
