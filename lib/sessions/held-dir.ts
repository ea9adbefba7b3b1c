import { constants, existsSync } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import * as nodePath from "node:path";

/**
 * Folders held open, so that what is done in them happens in the folder that was checked even when one of its
 * ancestors is swapped for a symbolic link meanwhile (`O_NOFOLLOW` guards only a path's last component). Node has no
 * `openat`; on Linux `/proc/self/fd/<fd>/<name>` resolves through the open folder instead. Elsewhere (no /proc, or
 * Node's permission model, which checks a path's text and allows no write under /proc) a name is joined to the
 * folder's path, as before: the swap is not guarded there.
 */
export interface HeldDir {
  readonly path: string;
  readonly handle: FileHandle;
}

/** What tells one file from another: its device and inode. */
export interface FileId {
  readonly dev: number;
  readonly ino: number;
}

let procFd: boolean | undefined;

function throughProc(): boolean {
  procFd ??= process.platform === "linux" && existsSync("/proc/self/fd") && (process.permission?.has("fs.write", "/proc/self/fd") ?? true);
  return procFd;
}

/** Opens the folder `at` (never through a link there: ENOTDIR or ELOOP), known as `path`. */
export async function holdDir(at: string, path = at): Promise<HeldDir> {
  return { path, handle: await open(at, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW) };
}

/**
 * `holdDir`, kept only if the folder opened is the one a check saw (`checked`, its `lstat` say): else it is closed and
 * the answer is undefined (an open that fails throws, as `holdDir`).
 */
export async function holdChecked(at: string, checked: FileId, path = at): Promise<HeldDir | undefined> {
  const dir = await holdDir(at, path);
  let same = false;
  try {
    same = sameFile(await dir.handle.stat(), checked);
  } finally {
    if (!same) await dir.handle.close().catch(() => undefined);
  }
  return same ? dir : undefined;
}

/** The entry `name` of the held folder, for calls that take a path. */
export function entryOf(dir: HeldDir, name: string): string {
  return throughProc() ? `/proc/self/fd/${dir.handle.fd}/${name}` : nodePath.join(dir.path, name);
}

/** Whether two stats are of one file (device and inode). */
export function sameFile(a: FileId, b: FileId): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}
