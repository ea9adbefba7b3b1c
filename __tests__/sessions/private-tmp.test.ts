/**
 * The private temp folder (`.mcp/tmp`, 0700) and the thread folders against other local users: a folder they own, or
 * one they may rename entries of (a permissive umask), would let them read or replace what a thread's child keeps
 * there. Real children, a real ToolNode graph, and a real second user (`nobody`, through `setpriv`); skipped unless
 * the tests run as root.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { spawnSync } from "node:child_process";
import { chmod, chown, mkdir, stat } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

const NOBODY = 65534;
const asRoot = process.geteuid?.() === 0;
const rootOnly = asRoot ? describe : describe.skip;

let dataDir: string;
const logger = new RecordingLogger();
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  if (!asRoot) return;
  dataDir = await makeTempDir("mcp-private-tmp-data-");
  // As the default `./.mcp-harness` is made (mkdir under umask 022): other users may walk into it.
  await chmod(dataDir, 0o755);
  const launch = stdioFixture({ name: "local", toolNames: ["where"] });
  const configPath = await writeConfig(await makeTempDir("mcp-private-tmp-"), { mcpServers: { local: { type: "stdio", ...launch } } });
  toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit?.close();
});

async function where(thread: string): Promise<{ cwd: string; TMPDIR: string | null; TMP: string | null; TEMP: string | null }> {
  const message = await callThroughGraph(graph, "local_where", {}, { context: { user_id: "alice", thread_id: thread } });
  expect(message.status).toBe("success");
  return JSON.parse(String(message.content));
}

/** A workspace as the thread's tools may have left it, with its `.mcp` folder at `mode`. */
async function workspaceWithInternalDir(thread: string, mode: number): Promise<{ workspace: string; internal: string }> {
  const workspace = path.join(dataDir, "threads", thread, "user-data", "workspace");
  await mkdir(workspace, { recursive: true });
  const internal = path.join(workspace, ".mcp");
  await mkdir(internal);
  await chmod(internal, mode);
  return { workspace, internal };
}

rootOnly("the private temp folder and other local users", () => {
  test("a .mcp/tmp another user owns is not used (chmod 0700 would leave it theirs): the host's temp folder, a warning", async () => {
    const { internal } = await workspaceWithInternalDir("foreign-tmp", 0o700);
    const tmp = path.join(internal, "tmp");
    await mkdir(tmp);
    await chmod(tmp, 0o777);
    await chown(tmp, NOBODY, NOBODY);
    const got = await where("foreign-tmp");
    for (const key of ["TMPDIR", "TMP", "TEMP"] as const) expect(String(got[key])).not.toContain(".mcp");
    expect(logger.messages("warn")).toContain(
      "the private temp folder (.mcp/tmp) of thread workspace 'foreign-tmp' could not be prepared (owned by another user); " +
        "MCP server 'local' runs there with the host's temp folder",
    );
  });

  test("a .mcp another user owns is not used either: its owner could swap the temp folder at any time", async () => {
    const { internal } = await workspaceWithInternalDir("foreign-internal", 0o755);
    await chown(internal, NOBODY, NOBODY);
    const got = await where("foreign-internal");
    for (const key of ["TMPDIR", "TMP", "TEMP"] as const) expect(String(got[key])).not.toContain(".mcp");
  });

  test("a .mcp left writable by all (a tool ran chmod -R a+rwX): another user cannot put a folder of theirs in place of the child's temp folder", async () => {
    const { internal } = await workspaceWithInternalDir("open-internal", 0o777);
    const tmp = path.join(internal, "tmp");
    const got = await where("open-internal");
    expect(got.TMPDIR).toBe(tmp);
    // The child's TMPDIR stays what it is for its whole life: whoever can rename entries of .mcp can hand it a folder of theirs.
    const swap = spawnSync(
      "setpriv",
      [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "sh", "-c", 'mv "$1/tmp" "$1/old" && mkdir "$1/tmp"', "sh", internal],
      { encoding: "utf8" },
    );
    expect({ swapped: swap.status === 0, ownerOfTmp: (await stat(tmp)).uid }).toEqual({ swapped: false, ownerOfTmp: 0 });
  });
});

rootOnly("the thread folders under a permissive umask", () => {
  test("with umask 000 another user cannot put a folder of theirs in place of a thread's workspace (a plain folder is not refused as a link is)", async () => {
    const previous = process.umask(0);
    let swap: ReturnType<typeof spawnSync>;
    try {
      const first = await where("umask-open");
      swap = spawnSync(
        "setpriv",
        [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "sh", "-c", 'mv "$1" "$1.old" && mkdir -m 777 "$1"', "sh", first.cwd],
        { encoding: "utf8" },
      );
    } finally {
      process.umask(previous);
    }
    // Another user of the thread: a new child, started in whatever folder is now the thread's workspace.
    const message = await callThroughGraph(graph, "local_where", {}, { context: { user_id: "bob", thread_id: "umask-open" } });
    const second = JSON.parse(String(message.content)) as { cwd: string };
    expect({ swapped: swap.status === 0, ownerOfWorkspace: (await stat(second.cwd)).uid }).toEqual({ swapped: false, ownerOfWorkspace: 0 });
  });
});
