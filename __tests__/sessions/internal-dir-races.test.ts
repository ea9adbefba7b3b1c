/**
 * A tool of the thread that swaps the workspace's `.mcp` for a symbolic link (or its `.gitignore` for a file of its
 * own) between the harness's check and its next step: the harness creates, makes private, writes and removes only in
 * the folder it checked, never through the link (a `*` .gitignore landing in a repository elsewhere would hide its
 * files from git; an unlink through it would remove that repository's .gitignore). The swap happens at a test seam
 * between check and step, so the race is run every time.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import { chmod, mkdir, readdir, readFile, rename, stat, symlink, writeFile } from "node:fs/promises";
import * as path from "node:path";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { internalDirSeams } from "../../lib/sessions/internal-dir-seams";
import { removeThreadSkeleton } from "../../lib/sessions/thread-folders";
import { ensureThreadPaths, INTERNAL_GITIGNORE_TEXT, threadPaths } from "../../lib/sessions/workspace";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

let dataDir: string;
const logger = new RecordingLogger();
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];

beforeAll(async () => {
  dataDir = await makeTempDir("mcp-internal-races-data-");
  const launch = stdioFixture({ name: "local", toolNames: ["where"] });
  const configPath = await writeConfig(await makeTempDir("mcp-internal-races-"), { mcpServers: { local: { type: "stdio", ...launch } } });
  toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir });
  tools = await toolkit.getTools();
});
afterAll(async () => {
  await toolkit?.close();
});
afterEach(() => {
  delete internalDirSeams.prepared;
  delete internalDirSeams.removing;
  delete internalDirSeams.clearing;
  delete internalDirSeams.gitignoreCreated;
});

/**
 * A folder elsewhere that a tool would like the harness to write in or remove from: a repository's, with a `.gitignore`
 * and a `tmp` folder of its own, or a plain folder of one.
 */
async function repositoryElsewhere(own: boolean): Promise<string> {
  const repo = await makeTempDir("mcp-internal-races-repo-");
  await writeFile(path.join(repo, "notes.txt"), "tracked\n");
  if (!own) return repo;
  await writeFile(path.join(repo, ".gitignore"), "build/\n");
  await mkdir(path.join(repo, "tmp"));
  await chmod(path.join(repo, "tmp"), 0o777);
  return repo;
}

async function contents(dir: string): Promise<Record<string, string | number>> {
  const seen: Record<string, string | number> = {};
  for (const name of (await readdir(dir)).sort()) {
    const entry = path.join(dir, name);
    const info = await stat(entry);
    seen[name] = info.isDirectory() ? info.mode & 0o777 : await readFile(entry, "utf8");
  }
  return seen;
}

/** Once, for `internal`: moves `.mcp` aside to `moved` and puts a link to `target` in its place. */
function swapOnce(internal: string, moved: string, target: string): (dir: string) => Promise<void> {
  let done = false;
  return async (dir) => {
    if (done || dir !== internal) return;
    done = true;
    await rename(internal, moved);
    await symlink(target, internal);
  };
}

describe("a tool that swaps .mcp for a link while the harness prepares it", () => {
  test("nothing is created, made private or written through the link; the call runs with the host's temp folder and a warning naming the thread folder", async () => {
    const repo = await repositoryElsewhere(false);
    const before = await contents(repo);
    const paths = threadPaths(dataDir, "swap-prepared");
    const internal = path.dirname(paths.tmp);
    const moved = path.join(paths.workspace, "moved");
    internalDirSeams.prepared = swapOnce(internal, moved, repo);

    const message = await callThroughGraph(toolNodeGraph(tools), "local_where", {}, { context: { user_id: "u", thread_id: "swap-prepared" } });
    expect(message.status).toBe("success");
    expect(await contents(repo)).toEqual(before);
    const where = JSON.parse(String(message.content)) as { cwd: string; TMPDIR: string | null };
    expect(where.cwd).toBe(paths.workspace);
    expect(String(where.TMPDIR)).not.toContain(".mcp");
    expect(logger.messages("warn")).toContain(
      "the private temp folder (.mcp/tmp) of thread workspace 'swap-prepared' could not be prepared (.mcp replaced meanwhile); " +
        "MCP server 'local' runs there with the host's temp folder",
    );
    // What was done went into the folder that was checked, wherever the tool moved it.
    expect(await contents(moved)).toEqual({ ".gitignore": INTERNAL_GITIGNORE_TEXT, tmp: 0o700 });
  });

  test("swapped once made private (as its .gitignore is written): the child is not given a temp folder its path no longer leads to", async () => {
    const repo = await repositoryElsewhere(true);
    const paths = threadPaths(dataDir, "swap-made-private");
    const internal = path.dirname(paths.tmp);
    internalDirSeams.gitignoreCreated = swapOnce(internal, path.join(paths.workspace, "moved"), repo);

    const message = await callThroughGraph(toolNodeGraph(tools), "local_where", {}, { context: { user_id: "u", thread_id: "swap-made-private" } });
    expect(message.status).toBe("success");
    const where = JSON.parse(String(message.content)) as { cwd: string; TMPDIR: string | null };
    expect(where.cwd).toBe(paths.workspace);
    // `.mcp/tmp` leads now to the repository's world-writable tmp folder.
    expect(String(where.TMPDIR)).not.toContain(".mcp");
    expect(logger.messages("warn")).toContain(
      "the private temp folder (.mcp/tmp) of thread workspace 'swap-made-private' could not be prepared (.mcp replaced meanwhile); " +
        "MCP server 'local' runs there with the host's temp folder",
    );
  });
});

describe("a tool that swaps .mcp or its .gitignore while an empty thread folder is removed", () => {
  test("a link in place of .mcp: the repository's .gitignore behind it is not removed, and the folder stays", async () => {
    const repo = await repositoryElsewhere(true);
    const before = await contents(repo);
    const paths = threadPaths(dataDir, "swap-removed");
    expect(await ensureThreadPaths(paths)).toBeNull();
    const internal = path.dirname(paths.tmp);
    internalDirSeams.removing = swapOnce(internal, path.join(paths.workspace, "moved"), repo);
    expect(await removeThreadSkeleton(paths, () => true)).toBe(false);
    expect(await contents(repo)).toEqual(before);
    expect(await readdir(paths.workspace)).toEqual(expect.arrayContaining([".mcp", "moved"]));
  });

  test("a .gitignore of the tool's own put in place of the harness's: it is kept, under its name, and so is the folder", async () => {
    const paths = threadPaths(dataDir, "gitignore-replaced");
    expect(await ensureThreadPaths(paths)).toBeNull();
    const internal = path.dirname(paths.tmp);
    internalDirSeams.removing = async (dir) => {
      if (dir !== internal) return;
      await writeFile(path.join(internal, "mine"), "!notes\n");
      await rename(path.join(internal, "mine"), path.join(internal, ".gitignore"));
    };
    expect(await removeThreadSkeleton(paths, () => true)).toBe(false);
    expect(await contents(internal)).toEqual({ ".gitignore": "!notes\n" });
  });

  test.each([
    ["its temp files", { "build.log": "kept\n" }],
    // By the path `.mcp/tmp`, an rmdir would take it.
    ["its empty temp folder", {}],
  ])("a link in place of .mcp while a temporary thread's temp files are cleared: nothing behind it is removed (%s)", async (_what, files) => {
    const repo = await repositoryElsewhere(true);
    for (const [name, text] of Object.entries(files)) await writeFile(path.join(repo, "tmp", name), text);
    const before = await contents(repo);
    const paths = threadPaths(dataDir, `swap-cleared-${Object.keys(files).length}`);
    expect(await ensureThreadPaths(paths)).toBeNull();
    await writeFile(path.join(paths.tmp, "left"), "a temp file of a session that ended\n");
    const moved = path.join(paths.workspace, "moved");
    internalDirSeams.clearing = swapOnce(path.dirname(paths.tmp), moved, repo);
    expect(await removeThreadSkeleton(paths, () => true, 0)).toBe(false);
    expect(await contents(repo)).toEqual(before);
    expect(await contents(path.join(repo, "tmp"))).toEqual(files);
    // The skeleton went from the folder checked, wherever the tool moved it; that folder stays (its name is the tool's).
    expect(await contents(moved)).toEqual({});
  });

  test("unswapped, the skeleton and its .gitignore go", async () => {
    const paths = threadPaths(dataDir, "plain-removed");
    expect(await ensureThreadPaths(paths)).toBeNull();
    let asked = 0;
    internalDirSeams.removing = async () => {
      asked += 1;
    };
    expect(await removeThreadSkeleton(paths, () => true)).toBe(true);
    expect(asked).toBe(1);
    expect(await readdir(path.join(dataDir, "threads"))).not.toContain("plain-removed");
  });
});
