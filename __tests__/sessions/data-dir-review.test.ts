/**
 * Review of where the data dir's real path is resolved: the thread folders of one toolkit stay where they were when its
 * data dir is a symbolic link an operator points elsewhere while it runs, across a reload of the config (a new pool).
 */
import { afterAll, expect, test } from "@jest/globals";
import { existsSync } from "node:fs";
import { mkdir, realpath, rename, symlink } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

const PLAIN_SERVER = path.join(__dirname, "..", "fixtures", "plain-stdio-server.mjs");
const toolkits: McpToolkit[] = [];
afterAll(async () => {
  await Promise.all(toolkits.map((t) => t.close()));
});

/**
 * A thread writes a.txt with the data dir a link to `first`, the operator points the link to `second` (atomically, as a
 * deploy does), the config changes (a reload, a new pool), and the thread writes b.txt: both must be in `first`.
 * `linkFirst`: when the link to `first` is made, before or after the toolkit.
 */
async function writesAcrossRepoint(linkFirst: "before" | "after", thread: string): Promise<void> {
  const base = await realpath(await makeTempDir("mcp-data-dir-review-"));
  const [first, second] = [path.join(base, "first"), path.join(base, "second")];
  await Promise.all([mkdir(first), mkdir(second)]);
  const link = path.join(base, "data");
  if (linkFirst === "before") await symlink(first, link);
  const cfgDir = await makeTempDir("mcp-data-dir-review-cfg-");
  const config = (description: string) => ({
    mcpServers: { files: { type: "stdio", description, ...stdioFixture({ name: "files", toolNames: ["write_file"] }) } },
  });
  const configPath = await writeConfig(cfgDir, config("before"));
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: link });
  toolkits.push(toolkit);
  if (linkFirst === "after") await symlink(first, link);
  const scope = { configurable: { thread_id: thread } };
  const workspace = path.join(first, "threads", thread, "user-data", "workspace");
  expect((await callThroughGraph(toolNodeGraph(await toolkit.getTools()), "files_write_file", { path: "a.txt", content: "a" }, scope)).status).toBe("success");
  expect(existsSync(path.join(workspace, "a.txt"))).toBe(true);
  const next = path.join(base, "data.next");
  await symlink(second, next);
  await rename(next, link);
  await writeConfig(cfgDir, config("after"));
  const reloaded = toolNodeGraph(await toolkit.getTools());
  expect((await callThroughGraph(reloaded, "files_write_file", { path: "b.txt", content: "b" }, scope)).status).toBe("success");
  expect(existsSync(path.join(workspace, "b.txt"))).toBe(true);
  expect(existsSync(path.join(second, "threads"))).toBe(false);
}

test("a reload after the data dir's link was pointed elsewhere keeps a thread's workspace where its files are", () => writesAcrossRepoint("before", "t-moved"));

test("a data dir not made yet, behind a link, under names a URL escapes: results name /mnt/user-data, and an unused thread's folder goes at close", async () => {
  const base = await realpath(await makeTempDir("mcp-data-dir-review-"));
  const real = path.join(base, "real");
  await mkdir(real);
  await symlink(real, path.join(base, "link"));
  const dataDir = path.join(base, "link", "sp ace%23#ü", "data");
  const configPath = await writeConfig(await makeTempDir("mcp-data-dir-review-cfg-"), {
    mcpServers: {
      files: { type: "stdio", ...stdioFixture({ name: "files", toolNames: ["write_file"] }) },
      plain: { type: "stdio", command: process.execPath, args: [PLAIN_SERVER] },
    },
  });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  const graph = toolNodeGraph(await toolkit.getTools());
  const wrote = await callThroughGraph(graph, "files_write_file", { path: "out/r.txt", content: "r", link: true, structured: true }, { configurable: { thread_id: "t-kept" } });
  const seen = JSON.stringify({ content: wrote.content, artifact: wrote.artifact ?? null });
  expect(seen).toContain("/mnt/user-data/workspace/out/r.txt");
  expect(seen).not.toContain(base);
  expect(seen).not.toContain("sp%20ace");
  expect((await callThroughGraph(graph, "plain_whoami", {}, { configurable: { thread_id: "t-unused" } })).status).toBe("success");
  const threads = path.join(real, "sp ace%23#ü", "data", "threads");
  expect(existsSync(path.join(threads, "t-unused"))).toBe(true);
  await toolkit.close();
  expect(existsSync(path.join(threads, "t-kept", "user-data", "workspace", "out", "r.txt"))).toBe(true);
  expect(existsSync(path.join(threads, "t-unused"))).toBe(false);
});

test("a data dir made as a link only after the toolkit was: a reload after the link was pointed elsewhere keeps a thread's workspace where its files are", () => writesAcrossRepoint("after", "t-late"));
