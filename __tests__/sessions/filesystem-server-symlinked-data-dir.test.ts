/**
 * The official filesystem server with its cwd behind a symbolic link (the data dir an operator's `/data` linking
 * elsewhere, or the operator's own `cwd`): the child's cwd is the real folder, so a `file://` URL it takes for a relative
 * path is echoed under the real path, and the data dir's host path in it must not reach the model.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import { mkdir, realpath, symlink } from "node:fs/promises";
import * as path from "node:path";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph, seenByModel } from "../fixtures/graph";

const SERVER = require.resolve("@modelcontextprotocol/server-filesystem/dist/index.js");
const W = "/mnt/user-data/workspace";

let realDir: string;
let linkedDir: string;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  const base = await realpath(await makeTempDir("mcp-fs-linked-"));
  realDir = path.join(base, "real-data");
  await mkdir(realDir);
  linkedDir = path.join(base, "linked-data");
  await symlink(realDir, linkedDir);
  const configPath = await writeConfig(await makeTempDir("mcp-fs-linked-cfg-"), {
    mcpServers: { fs: { type: "stdio", command: process.execPath, args: [SERVER, "."] } },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: linkedDir });
  const tools: DynamicStructuredTool[] = await toolkit.getTools();
  graph = toolNodeGraph(tools);
});
afterAll(async () => {
  await toolkit.close();
});

test("a file:// URL of /mnt/user-data the server reads as relative to its (real) cwd: its echo shows neither host path", async () => {
  const message = await callThroughGraph(graph, "fs_read_text_file", { path: `file://${W}/missing.txt` }, { context: { user_id: "u", thread_id: "t1" } });
  expect(message.status).toBe("error");
  expect(seenByModel(message)).not.toContain(realDir);
  expect(seenByModel(message)).not.toContain(linkedDir);
  expect(message.content).toBe(`ENOENT: no such file or directory, open '${W}/file:${W}/missing.txt'`);
});

test("an operator's cwd behind a symbolic link (outside user-data): the echo shows its folder, not the data dir", async () => {
  const base = await realpath(await makeTempDir("mcp-fs-linked-cwd-"));
  const realCwd = path.join(base, "real-tool");
  await mkdir(realCwd);
  await symlink(realCwd, path.join(base, "tool"));
  const dataDir = await realpath(await makeTempDir("mcp-fs-linked-cwd-data-"));
  const configPath = await writeConfig(await makeTempDir("mcp-fs-linked-cwd-cfg-"), {
    mcpServers: { fs: { type: "stdio", command: process.execPath, args: [SERVER, "."], cwd: path.join(base, "tool") } },
  });
  const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  try {
    const message = await callThroughGraph(toolNodeGraph(await own.getTools()), "fs_read_text_file", { path: `file://${W}/missing.txt` }, {
      context: { user_id: "u", thread_id: "t2" },
    });
    expect(seenByModel(message)).not.toContain(dataDir);
    expect(message.content).toBe(`ENOENT: no such file or directory, open '${realCwd}/file:${W}/missing.txt'`);
  } finally {
    await own.close();
  }
});

test("the server, which allows only its real cwd, accepts the /mnt/user-data paths the model hands it: the harness works on the data dir's real path", async () => {
  const scope = { context: { user_id: "u", thread_id: "t3" } };
  const wrote = await callThroughGraph(graph, "fs_write_file", { path: `${W}/notes.txt`, content: "hello" }, scope);
  expect(wrote.status).not.toBe("error");
  expect(seenByModel(wrote)).not.toContain(realDir);
  expect(seenByModel(wrote)).not.toContain(linkedDir);
  expect(wrote.artifact).toMatchObject({ workspace_changes: [`${W}/notes.txt`] });
  const read = await callThroughGraph(graph, "fs_read_text_file", { path: `${W}/notes.txt` }, scope);
  expect(read.content).toBe("hello");
  const listed = await callThroughGraph(graph, "fs_search_files", { path: W, pattern: "*.txt" }, scope);
  expect(listed.content).toBe(`${W}/notes.txt`);
});
