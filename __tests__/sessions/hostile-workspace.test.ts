/**
 * What a stdio call's workspace listing and path translation do with a workspace a hostile or buggy server shapes
 * during the call: special files, links out of the workspace or to devices, link loops, odd names. Real fixture
 * children in a ToolNode.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { realpath } from "node:fs/promises";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

const V = "/mnt/user-data";
const isRoot = process.geteuid?.() === 0;

describe("a workspace a server fills with special files and links during a call", () => {
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await realpath(await makeTempDir("mcp-hostile-ws-"));
    const configPath = await writeConfig(await makeTempDir("mcp-hostile-ws-cfg-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["fs_ops", "write_file"] }) } },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit.close();
  });
  let n = 0;
  const fresh = () => ({ context: { user_id: "u" }, configurable: { thread_id: `hostile-${++n}` } });
  const changes = (message: { artifact?: unknown }) => (message.artifact as { workspace_changes?: string[] } | undefined)?.workspace_changes ?? [];

  test("FIFOs, sockets, devices, links to devices, FIFOs, loops, /proc and /usr: only the regular file is listed; the call returns", async () => {
    const thread = fresh();
    const ops = [
      { op: "mkfifo", path: "pipe" },
      { op: "socket", path: "sock" },
      ...(isRoot ? [{ op: "mknod", path: "zero-dev" }] : []),
      { op: "symlink", path: "zero-link", to: "/dev/zero" },
      { op: "symlink", path: "pipe-link", to: "pipe" },
      { op: "symlink", path: "loop-a", to: "loop-b" },
      { op: "symlink", path: "loop-b", to: "loop-a" },
      { op: "symlink", path: "self-loop", to: "." },
      { op: "symlink", path: "proc", to: "/proc" },
      { op: "symlink", path: "usr", to: "/usr" },
      { op: "write", path: "real.txt", content: "x" },
    ];
    const first = await callThroughGraph(graph, "local_fs_ops", { ops }, thread);
    expect(first.status).toBe("success");
    expect(changes(first)).toEqual([`${V}/workspace/real.txt`]);
    // Named in a result: none of them is rewritten (not a file of the thread), nothing is opened.
    const names = ["./pipe", "./sock", "./zero-dev", "./zero-link", "./pipe-link", "./loop-a", "./self-loop/self-loop/real.txt", "./proc/self/pagemap", "./usr/bin/env"];
    const say = `see ${names.join(" ")} real.txt`;
    const second = await callThroughGraph(graph, "local_write_file", { path: ".mcp/tmp/x", content: "x", say }, thread);
    // The bare name is left: this call changed no file of that name.
    expect(second.content).toBe(`see ${names.slice(0, 6).join(" ")} ${V}/workspace/real.txt ${names.slice(7).join(" ")} real.txt`);
  });
});
