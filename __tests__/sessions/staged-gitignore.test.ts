/**
 * What a host killed while writing or removing a thread's `.mcp/.gitignore` leaves there, and what a tool of the thread
 * may plant under the same names: the removal of an empty skeleton takes the harness's copies (at most 4) with it, and
 * either removes the whole folder or leaves it as it was, never a part of it.
 */
import { afterEach, describe, expect, test } from "@jest/globals";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { link, mkdir, readdir, readFile, rename, symlink, truncate, unlink, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { internalDirSeams } from "../../lib/sessions/internal-dir-seams";
import { removeThreadSkeleton } from "../../lib/sessions/thread-folders";
import { ensureThreadPaths, INTERNAL_GITIGNORE, INTERNAL_GITIGNORE_TEXT, threadPaths, type ThreadPaths } from "../../lib/sessions/workspace";
import { makeTempDir } from "../fixtures/config";

afterEach(() => {
  delete internalDirSeams.gitignoreCreated;
});

const threadFolder = (paths: ThreadPaths) => path.dirname(paths.userData);
const internalOf = (paths: ThreadPaths) => path.dirname(paths.tmp);
const stagedName = (index: number, kind: "new" | "removed") => `${INTERNAL_GITIGNORE}.0000000${index}-0000-4000-8000-000000000000.${kind}`;

async function skeleton(thread: string): Promise<ThreadPaths> {
  const paths = threadPaths(await makeTempDir("mcp-staged-gitignore-"), thread);
  expect(await ensureThreadPaths(paths)).toBeNull();
  return paths;
}

describe("staged copies of .mcp/.gitignore in an empty skeleton", () => {
  test("up to 4 (a part of the text under .new, the whole under .removed) go with it", async () => {
    const paths = await skeleton("four-staged");
    await writeFile(path.join(internalOf(paths), stagedName(1, "new")), "");
    await writeFile(path.join(internalOf(paths), stagedName(2, "new")), INTERNAL_GITIGNORE_TEXT.slice(0, 10));
    await writeFile(path.join(internalOf(paths), stagedName(3, "new")), INTERNAL_GITIGNORE_TEXT);
    await writeFile(path.join(internalOf(paths), stagedName(4, "removed")), INTERNAL_GITIGNORE_TEXT);
    expect(await removeThreadSkeleton(paths, () => true)).toBe(true);
    expect(existsSync(threadFolder(paths))).toBe(false);
  });

  test.each([5, 6, 8])("more than 4 (%i) keep the folder as it was: its .gitignore, its tmp and every copy stay", async (count) => {
    const paths = await skeleton(`staged-${count}`);
    const internal = internalOf(paths);
    for (let index = 1; index <= count; index += 1) await writeFile(path.join(internal, stagedName(index, "new")), "");
    const before = (await readdir(internal)).sort();
    expect(await removeThreadSkeleton(paths, () => true)).toBe(false);
    expect((await readdir(internal)).sort()).toEqual(before);
    expect(await readFile(path.join(internal, INTERNAL_GITIGNORE), "utf8")).toBe(INTERNAL_GITIGNORE_TEXT);
  });
});

describe("names of staged copies a tool of the thread plants", () => {
  test("a hard link to a file elsewhere holding the text: only the name in .mcp goes, the file stays", async () => {
    const paths = await skeleton("hard-linked");
    const elsewhere = path.join(await makeTempDir("mcp-staged-gitignore-elsewhere-"), "kept");
    await writeFile(elsewhere, INTERNAL_GITIGNORE_TEXT);
    await link(elsewhere, path.join(internalOf(paths), stagedName(1, "removed")));
    expect(await removeThreadSkeleton(paths, () => true)).toBe(true);
    expect(await readFile(elsewhere, "utf8")).toBe(INTERNAL_GITIGNORE_TEXT);
  });

  test.each(["fifo", "huge", "link", "folder"])("a %s under the name keeps the folder, untouched, and is not waited on or read whole", async (kind) => {
    const paths = await skeleton(`planted-${kind}`);
    const planted = path.join(internalOf(paths), stagedName(1, "new"));
    if (kind === "fifo") execFileSync("mkfifo", [planted]);
    if (kind === "huge") await writeFile(planted, "").then(() => truncate(planted, 2 ** 40));
    if (kind === "link") await symlink(path.join(internalOf(paths), INTERNAL_GITIGNORE), planted);
    if (kind === "folder") await mkdir(planted);
    const before = (await readdir(internalOf(paths))).sort();
    expect(await removeThreadSkeleton(paths, () => true)).toBe(false);
    expect((await readdir(internalOf(paths))).sort()).toEqual(before);
  });
});

describe("a .mcp/.gitignore left without its text", () => {
  test("an empty one of the host's user (a host before staged writes, killed between creating and writing it) goes with the skeleton", async () => {
    const paths = await skeleton("old-empty");
    await writeFile(path.join(internalOf(paths), INTERNAL_GITIGNORE), "");
    expect(await removeThreadSkeleton(paths, () => true)).toBe(true);
    expect(existsSync(threadFolder(paths))).toBe(false);
  });

  test("one holding anything but the start of the harness's text keeps the folder", async () => {
    const paths = await skeleton("old-other");
    await writeFile(path.join(internalOf(paths), INTERNAL_GITIGNORE), "*\n");
    expect(await removeThreadSkeleton(paths, () => true)).toBe(false);
    expect(await readFile(path.join(internalOf(paths), INTERNAL_GITIGNORE), "utf8")).toBe("*\n");
  });

  test("a staged copy that vanishes before it is linked (another host's removal, a tool) is not replaced by a write in place", async () => {
    const paths = threadPaths(await makeTempDir("mcp-staged-gitignore-"), "vanished");
    const internal = internalOf(paths);
    const seen: string[] = [];
    internalDirSeams.gitignoreCreated = async () => {
      const names = await readdir(internal);
      seen.push(...names.filter((name) => name !== "tmp"));
      for (const name of names) if (name.endsWith(".new")) await unlink(path.join(internal, name));
    };
    expect(await ensureThreadPaths(paths)).toBeNull();
    // Only the staged copy was ever created: a `.gitignore` created empty and written after (in place) is what a host
    // killed meanwhile leaves.
    expect(seen.every((name) => name.endsWith(".new"))).toBe(true);
    expect(seen).toHaveLength(1);
  });
});

describe("while the staged copy is written", () => {
  test("a .gitignore a tool writes meanwhile is kept, and the staged copy goes", async () => {
    const paths = threadPaths(await makeTempDir("mcp-staged-gitignore-"), "tool-wrote");
    const internal = internalOf(paths);
    internalDirSeams.gitignoreCreated = async () => writeFile(path.join(internal, INTERNAL_GITIGNORE), "!notes\n");
    expect(await ensureThreadPaths(paths)).toBeNull();
    expect((await readdir(internal)).sort()).toEqual([INTERNAL_GITIGNORE, "tmp"]);
    expect(await readFile(path.join(internal, INTERNAL_GITIGNORE), "utf8")).toBe("!notes\n");
  });

  test(".mcp swapped for a link: the .gitignore is linked in the folder checked, never in the one behind the link", async () => {
    const paths = threadPaths(await makeTempDir("mcp-staged-gitignore-"), "swapped");
    const internal = internalOf(paths);
    const repo = await makeTempDir("mcp-staged-gitignore-repo-");
    await mkdir(path.join(repo, "src"));
    const moved = path.join(paths.workspace, "moved");
    internalDirSeams.gitignoreCreated = async () => {
      delete internalDirSeams.gitignoreCreated;
      await rename(internal, moved);
      await symlink(repo, internal);
    };
    expect(await ensureThreadPaths(paths)).toBe(".mcp replaced meanwhile");
    expect(await readdir(repo)).toEqual(["src"]);
    expect((await readdir(moved)).sort()).toEqual([INTERNAL_GITIGNORE, "tmp"]);
    expect(await readFile(path.join(moved, INTERNAL_GITIGNORE), "utf8")).toBe(INTERNAL_GITIGNORE_TEXT);
  });

  test("two preparations of one thread at once (two hosts on one data dir): one .gitignore with the text, no staged copy left", async () => {
    const paths = threadPaths(await makeTempDir("mcp-staged-gitignore-"), "twice");
    let arrived = 0;
    let release: () => void = () => undefined;
    const both = new Promise<void>((resolve) => (release = resolve));
    // Both have written their staged copy before either links it.
    internalDirSeams.gitignoreCreated = async () => {
      arrived += 1;
      if (arrived === 2) release();
      await both;
    };
    expect(await Promise.all([ensureThreadPaths(paths), ensureThreadPaths(paths)])).toEqual([null, null]);
    expect(arrived).toBe(2);
    expect((await readdir(internalOf(paths))).sort()).toEqual([INTERNAL_GITIGNORE, "tmp"]);
    expect(await readFile(path.join(internalOf(paths), INTERNAL_GITIGNORE), "utf8")).toBe(INTERNAL_GITIGNORE_TEXT);
  });
});
