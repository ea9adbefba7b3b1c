import { lstat, readdir, readlink, rmdir } from "node:fs/promises";
import * as nodePath from "node:path";
import type { ThreadPaths } from "./workspace";

/**
 * Removal of the thread folders the harness created and nothing else used: `<data dir>/threads/<thread>` holding only
 * `user-data/workspace/.mcp/tmp` (or a prefix of that chain), every level an empty real folder but for the next one.
 * Such a folder is left by every stdio session of a thread that never wrote anything: a stateless run's temporary
 * thread (the LangGraph server deletes the thread, never our folder), a thread deleted through the API, or one whose
 * tools only read. Only empty folders are removed (`rmdir`), so a file anyone wrote meanwhile stops the removal there.
 *
 * Process-wide, like `WorkspaceSecrets`: a session of the thread that starts while its folder is being removed (in this
 * pool, or in one retired by a reload or its successor) waits for the removal before it creates the folder again.
 */

/** Removals under way, by resolved thread folder. */
const removals = new Map<string, Promise<void>>();

/** `<data dir>/threads/<thread>` of `paths`, resolved. */
function threadFolderOf(paths: ThreadPaths): string {
  return nodePath.resolve(nodePath.dirname(paths.userData));
}

/** A removal of the thread folder of `paths` under way, which a new session of the thread waits for; usually none. */
export function threadFolderRemoval(paths: ThreadPaths): Promise<void> | undefined {
  return removals.get(threadFolderOf(paths));
}

/**
 * Removes the thread folder of `paths` if it holds only the empty skeleton `ensureThreadPaths` creates and no process
 * runs in it. `unused` is asked at once, before the removal is registered: a session of the thread that joined its
 * workspace before that keeps the folder; one that joins after waits (`threadFolderRemoval`). Resolves to whether the
 * folder was removed; never rejects.
 */
export function removeThreadSkeleton(paths: ThreadPaths, unused: () => boolean): Promise<boolean> {
  const folder = threadFolderOf(paths);
  const before = removals.get(folder);
  if (before === undefined && !unused()) return Promise.resolve(false);
  // Another removal of the folder under way (one whose session's creation was abandoned meanwhile): this one follows it.
  const removing = (before ?? Promise.resolve()).then(() => (unused() ? removeIfSkeleton(folder, paths) : false)).catch(() => false);
  const settled = removing.then(() => undefined);
  removals.set(folder, settled);
  void settled.then(() => {
    if (removals.get(folder) === settled) removals.delete(folder);
  });
  return removing;
}

async function removeIfSkeleton(folder: string, paths: ThreadPaths): Promise<boolean> {
  const chain = [folder, nodePath.resolve(paths.userData), nodePath.resolve(paths.workspace), nodePath.resolve(nodePath.dirname(paths.tmp)), nodePath.resolve(paths.tmp)];
  const present: string[] = [];
  for (const [index, dir] of chain.entries()) {
    const info = await lstat(dir).catch(() => undefined);
    // lstat: a symbolic link (or a file) anywhere is not what the harness created, and is never followed.
    if (info === undefined || info.isSymbolicLink() || !info.isDirectory()) return false;
    present.push(dir);
    const names = await readdir(dir);
    if (names.length === 0) break;
    const next = chain[index + 1];
    if (next === undefined || names.length > 1 || names[0] !== nodePath.basename(next)) return false;
  }
  // A process running in the folder (a child of another host process sharing the data dir, a process a server left
  // that kept its cwd) may still write there.
  if (await someProcessIn(folder)) return false;
  for (const dir of present.reverse()) {
    try {
      await rmdir(dir);
    } catch {
      // Something was created meanwhile (ENOTEMPTY), or the folder went (ENOENT): what is left stays.
      return false;
    }
  }
  return true;
}

const PROC = "/proc";
const READ_BATCH = 64;

/** Whether a process this one may inspect has its working directory in `folder` (Linux; elsewhere: none found). */
async function someProcessIn(folder: string): Promise<boolean> {
  const pids = await readdir(PROC).then(
    (names) => names.filter((name) => /^[0-9]+$/.test(name)),
    () => [] as string[],
  );
  const inside = folder + nodePath.sep;
  for (let i = 0; i < pids.length; i += READ_BATCH) {
    const cwds = await Promise.all(pids.slice(i, i + READ_BATCH).map((pid) => readlink(`${PROC}/${pid}/cwd`).catch(() => "")));
    if (cwds.some((cwd) => cwd === folder || cwd.startsWith(inside))) return true;
  }
  return false;
}
