/**
 * The workspace scanner behind `workspace_changes`: a folder is read again only when its inode or change time moved,
 * and only a listing whose change time had settled (older than SETTLED_LISTING_MS when read) is ever reused.
 */
import { describe, expect, test } from "@jest/globals";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, type Dirent } from "node:fs";
import { mkdir, realpath, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { changedFiles, MAX_SNAPSHOT_ENTRIES, SETTLED_LISTING_MS, WorkspaceScanner, type WorkspaceSnapshot } from "../../lib/sessions";
import { readDirUpTo } from "../../lib/sessions/changes";
import { makeTempDir } from "../fixtures/config";
import { TSX_CJS_REGISTER } from "../fixtures/stdio";

/** A scanner on real folders whose clock runs `ahead` ms in front, counting the folders it reads. */
function countingScanner(root: string, ahead: number) {
  const reads: string[] = [];
  const scanner = new WorkspaceScanner(root, {
    now: () => Date.now() + ahead,
    readDir: (dir): Dirent[] => {
      reads.push(path.relative(root, dir) || ".");
      return readdirSync(dir, { withFileTypes: true });
    },
  });
  return { scanner, reads };
}

async function workspace(): Promise<string> {
  const root = await realpath(await makeTempDir("mcp-scanner-"));
  await mkdir(path.join(root, "docs", "deep"), { recursive: true });
  await mkdir(path.join(root, ".mcp", "tmp"), { recursive: true });
  await writeFile(path.join(root, "a.txt"), "1");
  await writeFile(path.join(root, "docs", "b.txt"), "1");
  return root;
}

const SETTLED = SETTLED_LISTING_MS + 60_000;

/** Both ways a scanner walks a workspace: every walk rule holds for each. */
const WALKS: [string, (scanner: WorkspaceScanner) => Promise<WorkspaceSnapshot>][] = [
  ["walked in place", (scanner) => scanner.snapshot()],
  ["walked off the event loop", (scanner) => scanner.snapshotLarge()],
];

describe("WorkspaceScanner", () => {
  test("an unchanged tree with settled folders is not read again; a modified file is still seen", async () => {
    const root = await workspace();
    const { scanner, reads } = countingScanner(root, SETTLED);
    const first = await scanner.snapshot();
    expect(reads.sort()).toEqual([".", "docs", path.join("docs", "deep")]);
    reads.length = 0;
    await writeFile(path.join(root, "docs", "b.txt"), "22");
    const second = await scanner.snapshot();
    expect(reads).toEqual([]);
    expect(changedFiles(first, second)).toEqual([path.join(root, "docs", "b.txt")]);
  });

  test.each(WALKS)("a file replaced by one of the same size and modification time (an atomic save) is a change: %s", async (_name, snap) => {
    const root = await workspace();
    const target = path.join(root, "docs", "b.txt");
    const whole = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);
    await utimes(target, whole, whole);
    const { scanner } = countingScanner(root, SETTLED);
    const first = await snap(scanner);
    const before = await stat(target, { bigint: true });
    const saved = path.join(root, "docs", ".b.txt.tmp");
    await writeFile(saved, "2");
    await utimes(saved, whole, whole);
    await rename(saved, target);
    const after = await stat(target, { bigint: true });
    expect([after.mtimeNs, after.size]).toEqual([before.mtimeNs, before.size]);
    expect(changedFiles(first, await snap(scanner))).toEqual([target]);
  });

  test.each(WALKS)("a rewrite that puts the old modification time back (tar -x, cp -p) is a change: %s", async (_name, snap) => {
    const root = await workspace();
    const target = path.join(root, "docs", "b.txt");
    const old = new Date(Date.now() - 3_600_000);
    await writeFile(target, "AAAA");
    await utimes(target, old, old);
    const { scanner } = countingScanner(root, SETTLED);
    const first = await snap(scanner);
    await writeFile(target, "BBBB");
    await utimes(target, old, old);
    expect(changedFiles(first, await snap(scanner))).toEqual([target]);
    // Nothing touched it since: no change.
    const second = await snap(scanner);
    expect(changedFiles(second, await snap(scanner))).toEqual([]);
  });

  test.each(WALKS)("the .git file of a worktree or submodule (a pointer to its repository) is not listed; .gitignore is: %s", async (_name, snap) => {
    const root = await workspace();
    const { scanner } = countingScanner(root, SETTLED);
    const first = await snap(scanner);
    await mkdir(path.join(root, "wt"));
    await writeFile(path.join(root, "wt", ".git"), "gitdir: ../.git/worktrees/wt\n");
    await writeFile(path.join(root, "wt", ".gitignore"), "*.log\n");
    await writeFile(path.join(root, ".git"), "gitdir: elsewhere\n");
    expect(changedFiles(first, await snap(scanner))).toEqual([path.join(root, "wt", ".gitignore")]);
  });

  // The original's list (reference inventory §I 75), written out: a name taken out of the scanner's set fails here.
  const EXCLUDED = [".git", ".hg", ".svn", ".cache", ".mcp", ".next", ".venv", ".browser-frames", ".tool-results", "__pycache__", "build", "dist", "node_modules"];

  test.each(WALKS)("files in an excluded folder, at the top or deeper, are not listed; beside them they are: %s", async (_name, snap) => {
    const root = await workspace();
    const { scanner } = countingScanner(root, SETTLED);
    const first = await snap(scanner);
    for (const parent of [root, path.join(root, "docs", "deep")]) {
      for (const name of EXCLUDED) {
        await mkdir(path.join(parent, name, "sub"), { recursive: true });
        await writeFile(path.join(parent, name, "f.txt"), "x");
        await writeFile(path.join(parent, name, "sub", "g.txt"), "x");
      }
      await writeFile(path.join(parent, "kept.txt"), "x");
    }
    expect(changedFiles(first, await snap(scanner))).toEqual([path.join(root, "docs", "deep", "kept.txt"), path.join(root, "kept.txt")]);
  });

  describe("a file rewritten in place in the same clock tick, with the same size (racy: modified just before the walk)", () => {
    /** Rewrites `file` in place (same inode) and puts its modification time back to `at`, checking the stamp held. */
    async function rewriteInTick(file: string, content: string, at: Date): Promise<void> {
      const before = await stat(file, { bigint: true });
      await writeFile(file, content);
      await utimes(file, at, at);
      const after = await stat(file, { bigint: true });
      expect([after.ino, after.mtimeNs, after.size]).toEqual([before.ino, before.mtimeNs, before.size]);
    }

    test.each(WALKS)("is a change when its content moved, not when it was written again as it was: %s", async (_name, snap) => {
      const root = await workspace();
      const target = path.join(root, "docs", "b.txt");
      const tick = new Date(Date.now() - 50);
      await writeFile(target, "aaaa");
      await utimes(target, tick, tick);
      // The clock agrees with the file system: the file changed a moment before the walk.
      const { scanner } = countingScanner(root, 0);
      const first = await snap(scanner);
      await rewriteInTick(target, "aaaa", tick);
      const same = await snap(scanner);
      expect(changedFiles(first, same)).toEqual([]);
      await rewriteInTick(target, "bbbb", tick);
      expect(changedFiles(first, await snap(scanner))).toEqual([target]);
    });

    test("is compared by content even when the walk after it no longer finds it racy (a call that took long)", async () => {
      const root = await workspace();
      const target = path.join(root, "a.txt");
      const tick = new Date(Date.now() - 50);
      await writeFile(target, "aaaa");
      await utimes(target, tick, tick);
      let ahead = 0;
      const scanner = new WorkspaceScanner(root, { now: () => Date.now() + ahead });
      const first = await scanner.snapshot();
      ahead = SETTLED;
      await rewriteInTick(target, "aaaa", tick);
      expect(changedFiles(first, await scanner.snapshot())).toEqual([]);
      await rewriteInTick(target, "cccc", tick);
      expect(changedFiles(first, await scanner.snapshot())).toEqual([target]);
    });
  });

  test("a folder too large to walk in place is not read whole: the in-place walk stops past its budget", async () => {
    const root = await workspace();
    await mkdir(path.join(root, "many"));
    await Promise.all(Array.from({ length: 1000 }, (_, i) => writeFile(path.join(root, "many", `f${i}.txt`), "x")));
    const seen: { dir: string; limit: number; read: number }[] = [];
    const scanner = new WorkspaceScanner(root, {
      now: () => Date.now() + SETTLED,
      readDir: (dir, limit) => {
        const entries = readDirUpTo(dir, limit);
        seen.push({ dir: path.relative(root, dir) || ".", limit, read: entries.length });
        return entries;
      },
    });
    expect(scanner.snapshotInPlace()).toBeUndefined();
    const many = seen.find((s) => s.dir === "many")!;
    expect(many.read).toBe(many.limit + 1);
    expect(many.read).toBeLessThan(300);
    // Not kept: the next walk stops there again, and the walk off the event loop lists the whole tree.
    expect(scanner.snapshotInPlace()).toBeUndefined();
    const large = await scanner.snapshotLarge();
    expect(large?.size).toBe(1002);
  });

  test("a tree over the in-place budget is walked off the event loop, keeping no listings, until it is small again", async () => {
    const root = await workspace();
    await mkdir(path.join(root, "many"));
    await Promise.all(Array.from({ length: 300 }, (_, i) => writeFile(path.join(root, "many", `f${i}.txt`), "x")));
    const { scanner, reads } = countingScanner(root, SETTLED);
    let before = await scanner.snapshot();
    expect(before?.size).toBe(302);
    reads.length = 0;
    for (let i = 0; i < 20; i += 1) {
      await mkdir(path.join(root, `tmp-${i}`));
      await writeFile(path.join(root, `tmp-${i}`, "a"), "x");
      const after = await scanner.snapshot();
      expect(changedFiles(before, after)).toEqual([path.join(root, `tmp-${i}`, "a")]);
      await rm(path.join(root, `tmp-${i}`), { recursive: true });
      before = await scanner.snapshot();
    }
    // No walk in place was begun (it would read folders up to its budget first) and no listing was kept.
    expect(reads).toEqual([]);
    expect(scanner.rememberedFolders).toBe(0);
    await rm(path.join(root, "many"), { recursive: true });
    await scanner.snapshot(); // off the loop once more: it finds the tree small
    expect(scanner.snapshotInPlace()?.size).toBe(2);
    expect(scanner.rememberedFolders).toBe(3);
  });

  test(`a tree of more than ${MAX_SNAPSHOT_ENTRIES} entries is not listed, by either walk`, async () => {
    const root = await workspace();
    await mkdir(path.join(root, "huge"));
    for (let i = 0; i <= MAX_SNAPSHOT_ENTRIES; i += 500) {
      await Promise.all(Array.from({ length: 500 }, (_, j) => writeFile(path.join(root, "huge", `f${i + j}`), "")));
    }
    const scanner = new WorkspaceScanner(root);
    expect(scanner.snapshotInPlace()).toBeUndefined();
    expect(await scanner.snapshotLarge()).toBeNull();
  });

  test("a folder whose entries changed is read again, and only that folder", async () => {
    const root = await workspace();
    const { scanner, reads } = countingScanner(root, SETTLED);
    const first = await scanner.snapshot();
    reads.length = 0;
    await writeFile(path.join(root, "docs", "deep", "new.md"), "x");
    await rename(path.join(root, "a.txt"), path.join(root, "renamed.txt"));
    const second = await scanner.snapshot();
    expect(reads.sort()).toEqual([".", path.join("docs", "deep")]);
    expect(changedFiles(first, second)).toEqual([path.join(root, "docs", "deep", "new.md"), path.join(root, "renamed.txt")]);
  });

  test("a listing read while its folder's change time was recent is read again on every walk", async () => {
    const root = await workspace();
    // The clock agrees with the file system: every folder here changed a moment ago.
    const { scanner, reads } = countingScanner(root, 0);
    await scanner.snapshot();
    reads.length = 0;
    await scanner.snapshot();
    expect(reads.sort()).toEqual([".", "docs", path.join("docs", "deep")]);
  });

  test("a removed folder's listing is forgotten; a folder replaced under the same name is read", async () => {
    const root = await workspace();
    const { scanner, reads } = countingScanner(root, SETTLED);
    await scanner.snapshot();
    expect(scanner.rememberedFolders).toBe(3);
    await rm(path.join(root, "docs"), { recursive: true });
    await scanner.snapshot();
    expect(scanner.rememberedFolders).toBe(1);
    await mkdir(path.join(root, "docs"));
    await writeFile(path.join(root, "docs", "c.txt"), "1");
    reads.length = 0;
    const snapshot = await scanner.snapshot();
    expect(reads.sort()).toEqual([".", "docs"]);
    expect([...(snapshot ?? new Map()).keys()].sort()).toEqual([path.join(root, "a.txt"), path.join(root, "docs", "c.txt")]);
  });
});

/** Runs fifo-walk.ts in a child: what it printed, or "hung" when it has not returned within the bound. */
async function walkInChild(walk: "inplace" | "compare"): Promise<string> {
  const root = await realpath(await makeTempDir("mcp-scanner-fifo-"));
  const child = spawn(process.execPath, ["--require", TSX_CJS_REGISTER, path.join(__dirname, "..", "fixtures", "fifo-walk.ts"), root, walk], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => (out += String(chunk)));
  const exited = new Promise<string>((resolve) => child.once("exit", () => resolve(out.trim())));
  let timer: NodeJS.Timeout | undefined;
  // A bound, not a synchronisation: a walk blocked on the FIFO never returns.
  const hung = new Promise<string>((resolve) => (timer = setTimeout(() => resolve("hung"), 10_000)));
  const outcome = await Promise.race([exited, hung]);
  clearTimeout(timer);
  if (outcome === "hung") {
    child.kill("SIGKILL");
    await exited;
  }
  return outcome;
}

describe("a listed file a process of the thread replaces by a FIFO (no writer) during the walk", () => {
  test.each(["inplace", "compare"] as const)("%s: the walk returns; the FIFO is never opened waiting for a writer", async (walk) => {
    expect(await walkInChild(walk)).toBe("walked");
  });
});

/**
 * A file that holds more than its size says: one a process of the thread grows (or truncates larger, sparse, to 2 GiB)
 * between the stat and the read. Stood for here by procfs files, whose size is 0 whatever they hold.
 */
describe("a racy file that holds more than its size said", () => {
  const PROC_FOLDER = "/proc/sys/kernel/random";
  const hashed = (snapshot: WorkspaceSnapshot) => [...(snapshot ?? new Map()).values()].filter((stamp) => stamp.includes("#"));

  test.each(WALKS)("is not read past its size, so not hashed (%s)", async (_, walk) => {
    // A clock at the epoch: every file is racy, so each would be hashed.
    const snapshot = await walk(new WorkspaceScanner(PROC_FOLDER, { now: () => 0 }));
    expect([...(snapshot ?? new Map()).keys()]).toContain(path.join(PROC_FOLDER, "boot_id"));
    expect(hashed(snapshot)).toEqual([]);
  });

  test("whose stamp kept still is listed, not read past its size (nor hashed from part of it) to compare digests", () => {
    const file = path.join(PROC_FOLDER, "boot_id");
    const content = readFileSync(file);
    for (const read of [content, content.subarray(0, 1)]) {
      const before = new Map([[file, `1:2:0@3#${createHash("sha256").update(read).digest("base64")}`]]);
      expect(changedFiles(before, new Map([[file, "1:2:0@4"]]))).toEqual([file]);
    }
  });
});
