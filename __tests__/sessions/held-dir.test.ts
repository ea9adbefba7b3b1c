/**
 * Folders held open (`HeldDir`) where `/proc/self/fd/<fd>/<name>` cannot be used though `/proc` is there: under Node's
 * permission model a path there is outside every `--allow-fs-write` folder (ERR_ACCESS_DENIED), so a name is joined to
 * the folder's path instead, as where there is no `/proc`.
 */
import { describe, expect, test } from "@jest/globals";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { lstat, mkdir, readdir, rename, stat } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { holdChecked } from "../../lib/sessions/held-dir";
import { ensureThreadPaths, threadPaths } from "../../lib/sessions/workspace";
import { makeTempDir } from "../fixtures/config";
import { TSX_CJS_REGISTER } from "../fixtures/stdio";

const REMOVER = path.join(__dirname, "..", "fixtures", "skeleton-remover.ts");
/** `--permission` since Node 22.13 and 23.5; `--experimental-permission` before. */
const PERMISSION_FLAG = process.allowedNodeEnvironmentFlags.has("--permission") ? "--permission" : "--experimental-permission";

/** Runs the fixture under Node's permission model, writes allowed in the temp folder (the data dir is in it). */
async function underPermissionModel(...args: string[]): Promise<{ code: number | null; out: string; err: string[] }> {
  // tsx keeps its cache in the temp folder; esbuild, behind tsx, runs a worker.
  const flags = [PERMISSION_FLAG, "--allow-fs-read=*", `--allow-fs-write=${os.tmpdir()}`, "--allow-worker"];
  const child = spawn(process.execPath, [...flags, "--require", TSX_CJS_REGISTER, REMOVER, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
  const [code] = (await once(child, "exit")) as [number | null];
  return { code, out, err: err.split("\n").filter((line) => line.includes("skeleton-remover")) };
}

describe("a host under Node's permission model, allowed to write in the data dir", () => {
  test("prepares a thread's private temp folder (fchmod is refused there: the folder is made private by its path)", async () => {
    const dataDir = await makeTempDir("mcp-held-dir-permission-");
    const paths = threadPaths(dataDir, "permission-model");
    const { code, out, err } = await underPermissionModel(dataDir, "permission-model", "prepare");
    expect({ code, err }).toEqual({ code: 0, err: [] });
    expect(JSON.parse(out)).toEqual({ problem: null });
    for (const dir of [path.dirname(paths.tmp), paths.tmp]) expect((await stat(dir)).mode & 0o777).toBe(0o700);
  });

  test("a .mcp swapped for another folder once held is not used: the folder made private by its path is not the one held", async () => {
    const dataDir = await makeTempDir("mcp-held-dir-permission-");
    const { code, out, err } = await underPermissionModel(dataDir, "swapped", "prepare-swapped");
    expect({ code, err }).toEqual({ code: 0, err: [] });
    expect(JSON.parse(out)).toEqual({ problem: ".mcp replaced meanwhile" });
  });

  test("removes an empty thread skeleton, as at its last session's close (the folder is not left behind for good)", async () => {
    const dataDir = await makeTempDir("mcp-held-dir-permission-");
    const paths = threadPaths(dataDir, "permission-model");
    expect(await ensureThreadPaths(paths)).toBeNull();
    const { code, out, err } = await underPermissionModel(dataDir, "permission-model");
    expect({ code, err }).toEqual({ code: 0, err: [] });
    expect(JSON.parse(out)).toEqual({ removed: true });
    expect(await readdir(path.join(dataDir, "threads"))).toEqual([]);
  });
});

describe("holdChecked", () => {
  const openFds = async (): Promise<number> => (await readdir("/proc/self/fd")).length;

  test("holds the folder a check saw, and not a plain folder put in its place after the check (closed again)", async () => {
    const root = await makeTempDir("mcp-held-dir-checked-");
    const dir = path.join(root, ".mcp");
    await mkdir(dir);
    const checked = await lstat(dir);
    const held = await holdChecked(dir, checked);
    expect(held?.path).toBe(dir);
    await held?.handle.close();

    // A tool of the thread renames its own folder into the checked name between the check and the open.
    await rename(dir, path.join(root, "moved"));
    await mkdir(dir);
    const before = await openFds();
    expect(await holdChecked(dir, checked)).toBeUndefined();
    expect(await openFds()).toBe(before);
  });
});
