/**
 * A result naming more references than are resolved, from a server whose cwd (the thread workspace) holds very many
 * files: the references are ranked without listing that folder whole. Real fixture child in a ToolNode.
 */
import { afterAll, beforeAll, expect, jest, test } from "@jest/globals";
import type { Dir } from "node:fs";
import { mkdir, realpath, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { readDirUpTo } from "../../lib/sessions/changes";
import { MAX_RANKING_ENTRIES } from "../../lib/sessions/paths";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

// The folders listed whole (readdir), and the entries read one by one (a Dir's read()) from each folder.
const listed: string[] = [];
const readOneByOne = new Map<string, number>();
jest.mock("node:fs/promises", () => {
  const actual = jest.requireActual<typeof import("node:fs/promises")>("node:fs/promises");
  const readdir = (target: unknown, ...rest: unknown[]): Promise<unknown> => {
    listed.push(String(target));
    return (actual.readdir as (...args: unknown[]) => Promise<unknown>)(target, ...rest);
  };
  const opendir = async (target: unknown, ...rest: unknown[]): Promise<Dir> => {
    const dir = await (actual.opendir as (...args: unknown[]) => Promise<Dir>)(target, ...rest);
    const read = dir.read.bind(dir) as () => Promise<unknown>;
    Object.assign(dir, {
      read: async () => {
        const entry = await read();
        if (entry !== null) readOneByOne.set(String(target), (readOneByOne.get(String(target)) ?? 0) + 1);
        return entry;
      },
    });
    return dir;
  };
  return { ...actual, readdir, opendir };
});

const V = "/mnt/user-data";
let toolkit: McpToolkit;
let graph: ToolNodeGraph;
let dataDir: string;
beforeAll(async () => {
  dataDir = await realpath(await makeTempDir("mcp-paths-large-cwd-"));
  const configPath = await writeConfig(await makeTempDir("mcp-paths-large-cwd-cfg-"), {
    mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["write_file"] }) } },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit.close();
});

test("a result of more references than are resolved, in a workspace of very many files: ranked without listing it whole", async () => {
  const run = { context: { user_id: "u" }, configurable: { thread_id: "crowded" } };
  const workspace = path.join(dataDir, "threads", "crowded", "user-data", "workspace");
  // The session first, so that its .mcp is in the folder before the order of its entries is read.
  await callThroughGraph(graph, "local_write_file", { path: ".mcp/tmp/x", content: "x", say: "ok" }, run);
  const folders = MAX_RANKING_ENTRIES + 100;
  for (let i = 0; i < folders; i += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, folders - i) }, async (_, j) => {
        await mkdir(path.join(workspace, `d${i + j}`));
        await writeFile(path.join(workspace, `d${i + j}`, "x.csv"), "");
      }),
    );
  }
  // A folder past the first MAX_RANKING_ENTRIES + 1 entries in directory order (readdir sorts): not among those read.
  const order = readDirUpTo(workspace, Infinity).map((entry) => entry.name);
  const target = `${order[MAX_RANKING_ENTRIES + 50]}/x.csv`;
  listed.length = 0;
  readOneByOne.clear();
  // Words that only look like paths (dates), more than are resolved, before the one relative path that names a file.
  const dates = Array.from({ length: 300 }, (_, i) => `2024/01/${String(i).padStart(3, "0")}`).join(" ");
  const message = await callThroughGraph(graph, "local_write_file", { path: ".mcp/tmp/x", content: "x", say: `${dates} see ${target}` }, run);
  expect(String(message.content).split(" see ")[1]).toBe(`${V}/workspace/${target}`);
  expect(listed.map((dir) => path.resolve(dir))).not.toContain(workspace);
  expect(readOneByOne.get(workspace) ?? 0).toBeLessThanOrEqual(MAX_RANKING_ENTRIES + 1);
});
