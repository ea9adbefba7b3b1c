import { randomBytes } from "node:crypto";
import { lstat, mkdir, open, readlink, realpath, rename, rm, stat, type FileHandle } from "node:fs/promises";
import * as nodePath from "node:path";

/**
 * Atomic replacement of a config file (SPEC §8.2, inventory §Q 148): a temp file in the same folder,
 * written, fsynced, renamed over the target, then the folder fsynced. A symlink is kept: the write goes
 * to the file it points at. The old file's mode (and owner, when running as root) is kept; a new file
 * gets 0600. On any failure before the rename the old file is untouched and the temp file removed.
 */

/** The points where a write can fail; `onStep` runs before each (tests inject failures there). */
export type WriteStep = "open" | "write" | "sync" | "rename";

export interface AtomicWriteOptions {
  onStep?: (step: WriteStep) => void | Promise<void>;
  /** Mode of a file that does not exist yet. */
  newFileMode?: number;
}

const MAX_SYMLINK_HOPS = 40;
export const NEW_CONFIG_FILE_MODE = 0o600;

/** The file a write to `path` must replace: symlinks followed (a dangling one to its missing target). */
export async function resolveWriteTarget(path: string): Promise<string> {
  let current = nodePath.resolve(path);
  for (let hop = 0; hop < MAX_SYMLINK_HOPS; hop++) {
    // The folder as the kernel resolves it: a link's `..` climbs from where the folder really is, not from its name.
    current = nodePath.join(await realFolder(nodePath.dirname(current)), nodePath.basename(current));
    let stats;
    try {
      stats = await lstat(current);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return current;
      throw err;
    }
    if (!stats.isSymbolicLink()) return current;
    current = nodePath.resolve(nodePath.dirname(current), await readlink(current));
  }
  throw new Error(`Too many levels of symbolic links at ${path}`);
}

/** `dir` with its symlinks resolved; as it is when it does not exist (a dangling link's target is created there). */
async function realFolder(dir: string): Promise<string> {
  try {
    return await realpath(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return dir;
    throw err;
  }
}

/** The temp files of `target` look like `.<name>.<hex>.tmp`, next to it. */
export function isTempFileOf(target: string, entry: string): boolean {
  const prefix = `.${nodePath.basename(target)}.`;
  return entry.startsWith(prefix) && entry.endsWith(".tmp");
}

export async function atomicWriteFile(target: string, data: string, options: AtomicWriteOptions = {}): Promise<void> {
  const step = options.onStep ?? (() => undefined);
  const dir = nodePath.dirname(target);
  let mode = options.newFileMode ?? NEW_CONFIG_FILE_MODE;
  let owner: { uid: number; gid: number } | null = null;
  try {
    const existing = await stat(target);
    mode = existing.mode & 0o7777;
    owner = { uid: existing.uid, gid: existing.gid };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    await mkdir(dir, { recursive: true });
  }

  const temp = nodePath.join(dir, `.${nodePath.basename(target)}.${randomBytes(6).toString("hex")}.tmp`);
  let handle: FileHandle | undefined;
  let created = false;
  try {
    await step("open");
    handle = await open(temp, "wx", mode);
    created = true;
    await handle.chmod(mode); // open's mode is filtered by the umask
    if (owner !== null && process.getuid?.() === 0) await handle.chown(owner.uid, owner.gid);
    await step("write");
    await handle.writeFile(data, "utf8");
    await step("sync");
    await handle.sync();
    await handle.close();
    handle = undefined;
    await step("rename");
    await rename(temp, target);
    created = false;
  } catch (err) {
    await handle?.close().catch(() => undefined);
    if (created) await rm(temp, { force: true }).catch(() => undefined);
    throw err;
  }
  await syncDirectory(dir);
}

/** Best effort: makes the rename durable where the platform allows fsync on a directory. */
async function syncDirectory(dir: string): Promise<void> {
  if (process.platform === "win32") return;
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch {
    // some file systems refuse fsync on a directory; the rename itself has happened
  } finally {
    await handle?.close().catch(() => undefined);
  }
}
