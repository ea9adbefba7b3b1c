/**
 * The official memory MCP server (@modelcontextprotocol/server-memory): a knowledge graph kept in a JSONL file whose
 * place the server decides by itself. Without MEMORY_FILE_PATH, or with a relative one, that file sits beside the
 * server's own script, whatever the child's cwd: every thread and user of the harness then shares one graph (the
 * server's design; the harness's cwd pinning, SPEC §5.1, cannot change it). An operator recipe that gives each thread
 * its own graph today: a shell wrapper that points MEMORY_FILE_PATH into the child's cwd, the thread workspace.
 *
 * The server writes its file into its own folder: the tests run a copy of it in a temp folder (its imports resolved
 * through a link to the installed node_modules), so nothing is ever written into node_modules.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { copyFile, mkdir, readFile, realpath, symlink, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import type { ToolMessage } from "@langchain/core/messages";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, seenByModel, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { alive, pidsWithMarker, pidsWithMarkerAndEnv, waitUntil } from "../fixtures/processes";

const INSTALLED = require.resolve("@modelcontextprotocol/server-memory/dist/index.js");
/** The node_modules folder the installed server resolves its imports from. */
const NODE_MODULES = path.resolve(path.dirname(INSTALLED), "..", "..", "..");
const MARKER = `memory-marker-${process.pid}-${Date.now()}`;
const W = "/mnt/user-data/workspace";

let serverDir: string;
let server: string;
let dataDir: string;
let configPath: string;
const toolkits: McpToolkit[] = [];
let graph: ToolNodeGraph;

beforeAll(async () => {
  serverDir = await realpath(await makeTempDir("mcp-memory-server-"));
  await mkdir(path.join(serverDir, "dist"));
  await writeFile(path.join(serverDir, "package.json"), JSON.stringify({ type: "module" }));
  server = path.join(serverDir, "dist", "index.js");
  await copyFile(INSTALLED, server);
  await symlink(NODE_MODULES, path.join(serverDir, "node_modules"));
  dataDir = await realpath(await makeTempDir("mcp-memory-data-"));
  configPath = await writeConfig(await makeTempDir("mcp-memory-"), {
    mcpServers: {
      // As the server's README has it: no MEMORY_FILE_PATH.
      shared: { type: "stdio", command: process.execPath, args: [server, MARKER] },
      // A relative MEMORY_FILE_PATH: resolved against the server's script folder, not its cwd.
      relative: { type: "stdio", command: process.execPath, args: [server, MARKER], env: { MEMORY_FILE_PATH: "graph.jsonl" } },
      // The recipe: the path made absolute in the child's cwd (the thread workspace) by a shell, then the server.
      perthread: {
        type: "stdio",
        command: "sh",
        args: ["-c", 'MEMORY_FILE_PATH="$PWD/memory.jsonl" exec "$0" "$@"', process.execPath, server, MARKER],
      },
    },
  });
  graph = toolNodeGraph(await start().getTools());
});
afterAll(async () => {
  for (const toolkit of toolkits) await toolkit.close();
  expect(await waitUntil(() => pidsWithMarker(MARKER).length === 0)).toBe(true);
});

function start(): McpToolkit {
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  toolkits.push(toolkit);
  return toolkit;
}

const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");
const call = (name: string, args: Record<string, unknown>, user: string, thread: string, on = graph) =>
  callThroughGraph(on, name, args, { context: { user_id: user }, configurable: { thread_id: thread } });
const remember = (server: string, entity: string, user: string, thread: string, on = graph) =>
  call(`${server}_create_entities`, { entities: [{ name: entity, entityType: "note", observations: [`${entity} observed`] }] }, user, thread, on);
const names = (message: ToolMessage): string[] => {
  expect(message.status).toBe("success");
  // create_entities answers with the list it created, read_graph with the graph.
  const parsed = JSON.parse(String(message.content)) as { name: string }[] | { entities: { name: string }[] };
  return (Array.isArray(parsed) ? parsed : parsed.entities).map((e) => e.name);
};
const readGraph = (server: string, user: string, thread: string, on = graph) => call(`${server}_read_graph`, {}, user, thread, on).then(names);

describe("the server's own default: one graph for every thread and user", () => {
  test("without MEMORY_FILE_PATH, what alice's thread A remembers is in bob's thread B (the file is beside the script)", async () => {
    expect(names(await remember("shared", "alice-plan", "alice", "mem-a"))).toEqual(["alice-plan"]);
    expect(await readGraph("shared", "bob", "mem-b")).toEqual(["alice-plan"]);
    expect(readFileSync(path.join(serverDir, "dist", "memory.jsonl"), "utf8")).toContain("alice-plan");
  });

  test("a relative MEMORY_FILE_PATH is resolved against the server's script folder, not the thread workspace: shared too", async () => {
    await remember("relative", "rel-note", "alice", "mem-a");
    expect(await readGraph("relative", "bob", "mem-b")).toEqual(["rel-note"]);
    expect(readFileSync(path.join(serverDir, "dist", "graph.jsonl"), "utf8")).toContain("rel-note");
    await expect(readFile(path.join(workspaceOf("mem-a"), "graph.jsonl"))).rejects.toThrow(/ENOENT/);
  });
});

describe('the recipe: sh -c \'MEMORY_FILE_PATH="$PWD/memory.jsonl" exec "$0" "$@"\' node <server>', () => {
  let first: ToolMessage;
  beforeAll(async () => {
    first = await remember("perthread", "a-secret-plan", "alice", "mem-rA");
  });

  test("thread A's graph is in thread A's workspace, and the model sees the file listed as a change", async () => {
    expect(names(first)).toEqual(["a-secret-plan"]);
    expect(readFileSync(path.join(workspaceOf("mem-rA"), "memory.jsonl"), "utf8")).toContain("a-secret-plan");
    expect((first.artifact as { workspace_changes?: string[] }).workspace_changes).toEqual([`${W}/memory.jsonl`]);
  });

  test("thread B (same user, other thread) starts with an empty graph and cannot find A's entity", async () => {
    expect(await readGraph("perthread", "alice", "mem-rB")).toEqual([]);
    const search = await call("perthread_search_nodes", { query: "secret" }, "alice", "mem-rB");
    expect(seenByModel(search)).not.toContain("a-secret-plan");
    await remember("perthread", "b-note", "alice", "mem-rB");
    expect(await readGraph("perthread", "alice", "mem-rA")).toEqual(["a-secret-plan"]);
  });

  test("A's graph persists across A's calls and across a restart of A's child", async () => {
    await remember("perthread", "a-second", "alice", "mem-rA");
    expect(await readGraph("perthread", "alice", "mem-rA")).toEqual(["a-secret-plan", "a-second"]);
    // A new toolkit on the same data dir: new children, the same workspaces.
    const before = pidsWithMarker(MARKER);
    const restarted = toolNodeGraph(await start().getTools());
    expect(await readGraph("perthread", "alice", "mem-rA", restarted)).toEqual(["a-secret-plan", "a-second"]);
    expect(pidsWithMarker(MARKER).filter((pid) => !before.includes(pid)).length).toBeGreaterThan(0);
    expect(await readGraph("perthread", "alice", "mem-rB", restarted)).toEqual(["b-note"]);
  });

  test("A's child killed between calls: the next call's new child reads the same graph", async () => {
    const tmp = `TMPDIR=${path.join(workspaceOf("mem-rA"), ".mcp", "tmp")}`;
    const childrenOfA = () => pidsWithMarkerAndEnv(MARKER, tmp);
    const before = childrenOfA();
    expect(before.length).toBeGreaterThan(0);
    for (const pid of before) process.kill(pid, "SIGKILL");
    // Reaped: this process has heard of the exits.
    expect(await waitUntil(() => before.every((pid) => !alive(pid)))).toBe(true);
    expect(await readGraph("perthread", "alice", "mem-rA")).toEqual(["a-secret-plan", "a-second"]);
    expect(childrenOfA().some((pid) => !before.includes(pid))).toBe(true);
  });

  test("the graph is the thread's, not the user's: another user on thread A shares it (the workspace is the thread's)", async () => {
    expect(await readGraph("perthread", "bob", "mem-rA")).toEqual(["a-secret-plan", "a-second"]);
  });
});
