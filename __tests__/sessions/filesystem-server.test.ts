/**
 * The official filesystem MCP server (@modelcontextprotocol/server-filesystem), launched as operators do with "." as
 * its allowed directory, so that directory is the thread workspace the harness pins its cwd to. Driven through
 * createAgent and ToolNode with a scripted model: the model only ever writes and reads `/mnt/user-data/…` paths,
 * threads are kept apart, and the host data dir stays out of what the model sees wherever SPEC §5.1 says it does.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { mkdir, readFile, realpath, symlink } from "node:fs/promises";
import * as path from "node:path";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createAgent } from "langchain";
import { z } from "zod";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph, seenByModel, cleanErrorLine } from "../fixtures/graph";

const SERVER = require.resolve("@modelcontextprotocol/server-filesystem/dist/index.js");
const W = "/mnt/user-data/workspace";

let dataDir: string;
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];
let graph: ToolNodeGraph;

beforeAll(async () => {
  dataDir = await realpath(await makeTempDir("mcp-fs-data-"));
  const configPath = await writeConfig(await makeTempDir("mcp-fs-"), {
    mcpServers: { fs: { type: "stdio", command: process.execPath, args: [SERVER, "."] } },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  tools = await toolkit.getTools();
  graph = toolNodeGraph(tools);
});
afterAll(async () => {
  await toolkit.close();
});

const scope = (user: string, thread: string) => ({ context: { user_id: user, thread_id: thread } });
const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");

function call(name: string, args: Record<string, unknown>, user = "alice", thread = "fs-a"): Promise<ToolMessage> {
  return callThroughGraph(graph, `fs_${name}`, args, scope(user, thread));
}

describe("the official filesystem server through createAgent, in a thread's workspace", () => {
  let messages: ToolMessage[];
  const byId = (id: string): ToolMessage => messages.find((m) => m.tool_call_id === id)!;

  beforeAll(async () => {
    const model = new ScriptedChatModel([
      ScriptedChatModel.toolCall("fs_write_file", { path: `${W}/notes.txt`, content: "hello\nworld\n" }, "write"),
      ScriptedChatModel.toolCall("fs_read_text_file", { path: `${W}/notes.txt` }, "read"),
      ScriptedChatModel.toolCall("fs_edit_file", { path: `${W}/notes.txt`, edits: [{ oldText: "world", newText: "there" }] }, "edit"),
      ScriptedChatModel.toolCall("fs_list_directory", { path: W }, "list"),
      ScriptedChatModel.toolCall("fs_directory_tree", { path: W }, "tree"),
      ScriptedChatModel.toolCall("fs_search_files", { path: W, pattern: "**/*.txt" }, "search"),
      ScriptedChatModel.toolCall("fs_get_file_info", { path: `${W}/notes.txt` }, "info"),
      ScriptedChatModel.toolCall("fs_create_directory", { path: `${W}/docs` }, "mkdir"),
      ScriptedChatModel.toolCall("fs_move_file", { source: `${W}/notes.txt`, destination: `${W}/docs/moved.txt` }, "move"),
      ScriptedChatModel.toolCall("fs_read_multiple_files", { paths: [`${W}/docs/moved.txt`, `${W}/notes.txt`] }, "read-many"),
      { content: "done" },
    ]);
    const agent = createAgent({ model, tools, contextSchema: z.object({ user_id: z.string() }) });
    const result = await agent.invoke(
      { messages: [new HumanMessage("take notes")] },
      { context: { user_id: "alice" }, configurable: { thread_id: "fs-agent" } },
    );
    messages = (result.messages as BaseMessage[]).filter((m): m is ToolMessage => ToolMessage.isInstance(m));
  });

  test("every call the model made with /mnt/user-data paths succeeded, and the file is where it moved it on the host", async () => {
    expect(messages.map((m) => [m.tool_call_id, m.status])).toEqual(
      ["write", "read", "edit", "list", "tree", "search", "info", "mkdir", "move", "read-many"].map((id) => [id, "success"]),
    );
    expect(await readFile(path.join(workspaceOf("fs-agent"), "docs", "moved.txt"), "utf8")).toBe("hello\nthere\n");
  });

  test("what the server echoes shows the paths as the model wrote them", () => {
    expect(byId("write").content).toBe(`Successfully wrote to ${W}/notes.txt`);
    expect(byId("read").content).toBe("hello\nworld\n");
    expect(byId("edit").content).toContain(`--- ${W}/notes.txt\toriginal`);
    expect(byId("edit").content).toContain("+there");
    expect(byId("list").content).toContain("[FILE] notes.txt");
    expect(JSON.parse(String(byId("tree").content))).toEqual(expect.arrayContaining([{ name: "notes.txt", type: "file" }]));
    expect(byId("search").content).toBe(`${W}/notes.txt`);
    expect(byId("info").content).toMatch(/^size: 12\n[\s\S]*isFile: true/);
    expect(byId("mkdir").content).toBe(`Successfully created directory ${W}/docs`);
    expect(byId("move").content).toBe(`Successfully moved ${W}/notes.txt to ${W}/docs/moved.txt`);
    // The server reports the file it could not read inside its answer, with the path the model gave.
    expect(byId("read-many").content).toBe(
      `${W}/docs/moved.txt:\nhello\nthere\n\n\n---\n${W}/notes.txt: Error - ENOENT: no such file or directory, open '${W}/notes.txt'`,
    );
  });

  test("no ToolMessage holds the host data dir, in its content or its artifact", () => {
    for (const message of messages) expect(seenByModel(message)).not.toContain(dataDir);
  });

  test("workspace_changes lists the files written, edited and moved to, as /mnt/user-data paths; reads list none", () => {
    const changes = (id: string) => (byId(id).artifact as { workspace_changes?: string[] } | undefined)?.workspace_changes;
    expect(changes("write")).toEqual([`${W}/notes.txt`]);
    expect(changes("edit")).toEqual([`${W}/notes.txt`]);
    expect(changes("move")).toEqual([`${W}/docs/moved.txt`]);
    for (const id of ["read", "list", "tree", "search", "info", "mkdir", "read-many"]) expect(changes(id)).toBeUndefined();
  });
});

describe("the official filesystem server's errors reach the model as one line", () => {
  test("a missing file: the server's ENOENT, with the path the model wrote and no host path", async () => {
    const read = await call("read_text_file", { path: `${W}/missing.txt` });
    expect(cleanErrorLine(read)).toBe(`ENOENT: no such file or directory, open '${W}/missing.txt'`);
    const info = await call("get_file_info", { path: `${W}/missing` });
    expect(cleanErrorLine(info)).toBe(`ENOENT: no such file or directory, stat '${W}/missing'`);
    for (const message of [read, info]) expect(seenByModel(message)).not.toContain(dataDir);
  });

  test("a file:// URL of /mnt/user-data (the server reads it as a relative path): its echo shows no host path", async () => {
    const message = await call("read_text_file", { path: `file://${W}/missing.txt` });
    expect(cleanErrorLine(message)).toBe(`ENOENT: no such file or directory, open '${W}/file:${W}/missing.txt'`);
    expect(seenByModel(message)).not.toContain(dataDir);
  });

  test("a server-side refusal (an edit that matches nothing, a move onto an existing file) is one line the model can act on", async () => {
    await call("write_file", { path: `${W}/e.txt`, content: "x" });
    const edit = await call("edit_file", { path: `${W}/e.txt`, edits: [{ oldText: "zzz", newText: "y" }] });
    expect(edit.status).toBe("error");
    expect(edit.content).toBe("Could not find exact match for edit:\nzzz");
    const move = await call("move_file", { source: `${W}/e.txt`, destination: `${W}/e.txt` });
    expect(cleanErrorLine(move)).toBe(`Destination already exists: ${W}/e.txt`);
    for (const message of [edit, move]) expect(seenByModel(message)).not.toContain(dataDir);
  });

  test.each([
    ["user-data outside the workspace", `/mnt/user-data/outputs/x.txt`, `/mnt/user-data/outputs/x.txt`],
    ["a host path outside the data dir", "/etc/hostname", "/etc/hostname"],
    // Leaves /mnt/user-data once normalized, so it is not a /mnt/user-data path and goes as written.
    ["/mnt/user-data/../ climbing out", `${W}/../../../x.txt`, "/x.txt"],
  ])("a path outside the allowed directory (%s): refused, naming the path as the model wrote it", async (_label, target, shown) => {
    const message = await call("read_text_file", { path: target });
    const text = cleanErrorLine(message);
    expect(text.startsWith(`Access denied - path outside allowed directories: ${shown} not in `)).toBe(true);
    // The server names its allowed directory: the thread's own workspace folder on the host. SPEC §5.1 rewrites only
    // existing files, so this directory is left as it is; nothing else of the data dir is shown.
    expect(text).toBe(`Access denied - path outside allowed directories: ${shown} not in ${workspaceOf("fs-a")}`);
    expect(seenByModel(message).replaceAll(workspaceOf("fs-a"), "<workspace>")).not.toContain(dataDir);
  });
});

describe("threads of the official filesystem server are kept apart", () => {
  beforeAll(async () => {
    const written = await call("write_file", { path: `${W}/secret.txt`, content: "thread A only" }, "alice", "iso-a");
    expect(written.status).toBe("success");
  });

  test("thread B does not see thread A's file at the /mnt/user-data path A's model saw", async () => {
    const message = await call("read_text_file", { path: `${W}/secret.txt` }, "alice", "iso-b");
    expect(cleanErrorLine(message)).toBe(`ENOENT: no such file or directory, open '${W}/secret.txt'`);
    const listing = await call("list_directory", { path: W }, "alice", "iso-b");
    expect(listing.content).not.toContain("secret.txt");
  });

  test.each([
    ["/mnt/user-data/../ to A's folder", () => `${W}/../../../iso-a/user-data/workspace/secret.txt`],
    ["a relative ../ path to A's folder", () => "../../../iso-a/user-data/workspace/secret.txt"],
    ["A's host path, had B's model learned it", () => path.join(workspaceOf("iso-a"), "secret.txt")],
    ["a file:// URL of A's host path", () => `file://${path.join(workspaceOf("iso-a"), "secret.txt")}`],
  ])("thread B cannot read thread A's file through %s", async (_label, target) => {
    const message = await call("read_text_file", { path: target() }, "alice", "iso-b");
    expect(message.status).toBe("error");
    expect(seenByModel(message)).not.toContain("thread A only");
  });

  test("thread B cannot write into thread A's workspace through /mnt/user-data/../", async () => {
    const message = await call("write_file", { path: `${W}/../../../iso-a/user-data/workspace/planted.txt`, content: "x" }, "alice", "iso-b");
    expect(cleanErrorLine(message)).toMatch(/^Access denied - path outside allowed directories: /);
    await expect(readFile(path.join(workspaceOf("iso-a"), "planted.txt"))).rejects.toThrow(/ENOENT/);
  });

  test("a link B's workspace holds to A's file is refused by the server (it resolves links)", async () => {
    const linkDir = workspaceOf("iso-b");
    await mkdir(linkDir, { recursive: true });
    await symlink(path.join(workspaceOf("iso-a"), "secret.txt"), path.join(linkDir, "link.txt"));
    const message = await call("read_text_file", { path: `${W}/link.txt` }, "alice", "iso-b");
    expect(message.status).toBe("error");
    expect(seenByModel(message)).not.toContain("thread A only");
  });

  test("two users on one thread id share the thread's workspace (SPEC §5.1: the workspace is the thread's; their children are apart, see scopes.test.ts)", async () => {
    const bob = await call("read_text_file", { path: `${W}/secret.txt` }, "bob", "iso-a");
    expect(bob.status).toBe("success");
    expect(bob.content).toBe("thread A only");
  });
});

describe("list_allowed_directories of the official filesystem server", () => {
  test("names the thread's own workspace folder on the host (a directory: SPEC §5.1 leaves it as it is)", async () => {
    // The children of the scopes above, reused.
    const message = await call("list_allowed_directories", {}, "alice", "fs-a");
    expect(message.status).toBe("success");
    expect(message.content).toBe(`Allowed directories:\n${workspaceOf("fs-a")}`);
    const other = await call("list_allowed_directories", {}, "alice", "iso-b");
    expect(other.content).toBe(`Allowed directories:\n${workspaceOf("iso-b")}`);
  });
});
