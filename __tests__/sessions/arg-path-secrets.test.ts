/**
 * A `$VAR` value that is a path, handed to a stdio server in its `args`: the official filesystem server resolves its
 * allowed folders (`path.resolve`, then `realpath`) and lists them to the model, in a form the value as written is not
 * (its final `/` dropped, `//` and `.` collapsed, a link followed, a relative one read from the configured cwd). Each of
 * those forms is a secret of the server as the value is.
 */
import { afterAll, expect, test } from "@jest/globals";
import { mkdir, realpath, symlink } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, seenByModel, toolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

const SERVER = require.resolve("@modelcontextprotocol/server-filesystem/dist/index.js");
const SECRET = "tenant-s3cr3t-5b2d";
const toolkits: McpToolkit[] = [];
afterAll(async () => {
  await Promise.all(toolkits.map((t) => t.close()));
});

/** What the model is shown of the server's allowed folders, with `D` set to `value`. */
async function allowedDirectories(dir: string, value: string, extra: Record<string, unknown> = {}): Promise<string> {
  const configPath = await writeConfig(dir, {
    mcpServers: { fs: { type: "stdio", command: process.execPath, args: [SERVER, "${D}"], ...extra } },
  });
  const toolkit = createMcpToolkit({ configPath, env: { D: value }, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-arg-secrets-data-") });
  toolkits.push(toolkit);
  const message = await callThroughGraph(toolNodeGraph(await toolkit.getTools()), "fs_list_allowed_directories", {}, { configurable: { thread_id: "t" } });
  expect(message.status).toBe("success");
  return `${seenByModel(message)} ${JSON.stringify(message.artifact ?? null)}`;
}

test.each([
  ["with a final slash", (dir: string) => `${dir}/${SECRET}/`],
  ["with a doubled slash", (dir: string) => `${dir}//${SECRET}`],
  ["with a '.' segment", (dir: string) => `${dir}/./${SECRET}`],
])("an absolute path %s: the folder the server lists is redacted", async (_label, value) => {
  const dir = await realpath(await makeTempDir("mcp-arg-secrets-"));
  await mkdir(path.join(dir, SECRET));
  const seen = await allowedDirectories(dir, value(dir));
  expect(seen).toContain("[redacted]");
  expect(seen).not.toContain(SECRET);
});

test("a path through a link: the link's target the server lists is redacted too", async () => {
  const dir = await realpath(await makeTempDir("mcp-arg-secrets-"));
  await mkdir(path.join(dir, "target-7c1e"));
  await symlink(path.join(dir, "target-7c1e"), path.join(dir, SECRET));
  const seen = await allowedDirectories(dir, path.join(dir, SECRET));
  expect(seen).toContain("[redacted]");
  expect(seen).not.toContain("target-7c1e");
});

test("a relative path, read from the configured cwd: the absolute folder the server lists is redacted", async () => {
  const dir = await realpath(await makeTempDir("mcp-arg-secrets-"));
  await mkdir(path.join(dir, SECRET));
  const seen = await allowedDirectories(dir, `./${SECRET}/`, { cwd: dir });
  expect(seen).toContain("[redacted]");
  expect(seen).not.toContain(SECRET);
});

test.each([
  ["with a final slash", `${SECRET}/`],
  ["with a '.' segment", `${SECRET}/.`],
  ["with a doubled slash", `${SECRET}//`],
])("a relative path not starting with './' %s, read from the configured cwd: the folder the server lists is redacted", async (_label, value) => {
  const dir = await realpath(await makeTempDir("mcp-arg-secrets-"));
  await mkdir(path.join(dir, SECRET));
  const seen = await allowedDirectories(dir, value, { cwd: dir });
  expect(seen).toContain("[redacted]");
  expect(seen).not.toContain(SECRET);
});

test("a per-process link ('/proc/self/cwd') is not followed in this process: the harness's own folder is not blanked", async () => {
  const dir = await makeTempDir("mcp-arg-secrets-");
  const launch = stdioFixture({ toolNames: ["echo"] });
  const configPath = await writeConfig(dir, {
    mcpServers: { fx: { type: "stdio", ...launch, env: { ...launch.env, LOG_DIR: "${D}" } } },
  });
  const toolkit = createMcpToolkit({ configPath, env: { D: "/proc/self/cwd" }, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-arg-secrets-data-") });
  toolkits.push(toolkit);
  const shown = path.join(process.cwd(), "README.md");
  const message = await callThroughGraph(toolNodeGraph(await toolkit.getTools()), "fx_echo", { text: shown }, { configurable: { thread_id: "t" } });
  expect(message.status).toBe("success");
  expect(seenByModel(message)).toContain(shown);
  expect(seenByModel(message)).not.toContain("[redacted]");
});
