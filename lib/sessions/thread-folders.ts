import { randomUUID } from "node:crypto";
import { constants, type Stats } from "node:fs";
import { link, lstat, open, readdir, readFile, readlink, realpath, rename, rmdir, stat, unlink } from "node:fs/promises";
import * as nodePath from "node:path";
import { freshRuns } from "../shared/fresh-runs";
import { firstNames } from "./folder-names";
import { entryOf, holdChecked, type FileId, type HeldDir } from "./held-dir";
import { internalDirSeams } from "./internal-dir-seams";
import { inBatches, procPids } from "./session-processes";
import { INTERNAL_GITIGNORE, INTERNAL_GITIGNORE_STAGED, INTERNAL_GITIGNORE_TEXT, type ThreadPaths } from "./workspace";

/**
 * Removal of the thread folders the harness created and nothing else used: `<data dir>/threads/<thread>` holding only
 * `user-data/workspace/.mcp/tmp` (or a prefix of that chain), every level an empty real folder but for the next one
 * (and `.mcp` for the `.gitignore` the harness wrote there).
 * Such a folder is left by every stdio session of a thread that never wrote anything: a stateless run's temporary
 * thread (the LangGraph server deletes the thread, never our folder), a thread deleted through the API, or one whose
 * tools only read. Only empty folders are removed (`rmdir`), so a file anyone wrote meanwhile stops the removal there.
 * One exception: the private temp folder of a temporary thread (see `clearTemporaryTmp`).
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
 * workspace before that keeps the folder; one that joins after waits (`threadFolderRemoval`). With `tempFilesSince` (the
 * last session of a stateless run's thread, which the server deleted, and when its sessions began), what its sessions
 * left in its `.mcp/tmp` since then does not keep it: the temp files of processes that are gone are removed first
 * (`clearTemporaryTmp`). With `changedBefore` (epoch ms; the sweep of folders a killed host left, see
 * `sweepThreadFolders`), a level whose change time is later keeps the folder: another host sharing the data dir may be
 * preparing a session there (its `ensureThreadPaths` creates levels or makes `.mcp` and `.mcp/tmp` private again, which
 * moves their change time) and no count of this process knows it. Resolves to whether the folder was removed; never
 * rejects.
 */
export function removeThreadSkeleton(paths: ThreadPaths, unused: () => boolean, tempFilesSince?: number, changedBefore?: number): Promise<boolean> {
  const folder = threadFolderOf(paths);
  const before = removals.get(folder);
  if (before === undefined && !unused()) return Promise.resolve(false);
  // Another removal of the folder under way (one whose session's creation was abandoned meanwhile): this one follows it.
  const removing = (before ?? Promise.resolve()).then(() => (unused() ? removeIfSkeleton(folder, paths, tempFilesSince, changedBefore) : false)).catch(() => false);
  const settled = removing.then(() => undefined);
  removals.set(folder, settled);
  void settled.then(() => {
    if (removals.get(folder) === settled) removals.delete(folder);
  });
  return removing;
}

async function removeIfSkeleton(folder: string, paths: ThreadPaths, tempFilesSince: number | undefined, changedBefore?: number): Promise<boolean> {
  const internal = nodePath.resolve(nodePath.dirname(paths.tmp));
  const chain = [folder, nodePath.resolve(paths.userData), nodePath.resolve(paths.workspace), internal, nodePath.resolve(paths.tmp)];
  const present: string[] = [];
  /** The levels present as the scan found them. */
  const found: Stats[] = [];
  /** The `.mcp/.gitignore` `ensureThreadPaths` wrote, part of the skeleton: removed with it. */
  let ownGitignore = false;
  /** Its `.gitignore` under a staging name, left by a host killed while writing or removing it: removed with it too. */
  let staged: string[] = [];
  /** The identities of the levels present (see `someProcessIn`). */
  const identities = new Set<string>();
  const uid = process.geteuid?.();
  /** Set when the skeleton is complete but for what its temp folder holds, which `tempFilesSince` lets go. */
  let tmpToClear: TmpToClear | undefined;
  for (const [index, dir] of chain.entries()) {
    const info = await lstat(dir).catch(() => undefined);
    // lstat: a symbolic link (or a file) anywhere is not what the harness created, and is never followed.
    if (info === undefined || info.isSymbolicLink() || !info.isDirectory()) return false;
    // Another user's folder is not one this process created, and that user's processes may be hidden from /proc here.
    if (uid !== undefined && info.uid !== uid) return false;
    if (changedBefore !== undefined && changedSince(info, changedBefore)) return false;
    present.push(dir);
    found.push(info);
    identities.add(identityOf(info));
    // Two names tell whether it is the next level alone (in `.mcp`, three beside its `.gitignore` and what killed hosts
    // left of it): a workspace of 100,000 files is not listed whole.
    let names = await firstNames(dir, dir === internal ? 3 + MAX_STAGED : 2);
    if (dir === internal && names.includes(INTERNAL_GITIGNORE)) {
      if (!(await isOwnGitignore(nodePath.join(dir, INTERNAL_GITIGNORE), uid, "part"))) return false;
      ownGitignore = true;
      names = names.filter((name) => name !== INTERNAL_GITIGNORE);
    }
    if (dir === internal) {
      staged = names.filter((name) => INTERNAL_GITIGNORE_STAGED.test(name));
      // More may be unlisted (the listing stops at 3 + MAX_STAGED), `tmp` or the `.gitignore` among them: the folder
      // stays whole rather than be half removed.
      if (staged.length > MAX_STAGED) return false;
      for (const name of staged) if (!(await isOwnGitignore(nodePath.join(dir, name), uid, stagedKind(name)))) return false;
      names = names.filter((name) => !staged.includes(name));
    }
    if (names.length === 0) break;
    const next = chain[index + 1];
    // Only where `someProcessIn` can see the processes that may still use it (Linux's /proc).
    if (next === undefined && tempFilesSince !== undefined && uid !== undefined && process.platform === "linux") {
      tmpToClear = { uid, since: tempFilesSince };
      break;
    }
    if (next === undefined || names.length > 1 || names[0] !== nodePath.basename(next)) return false;
  }
  // A process running in the folder (a child of another host process sharing the data dir, a process a server left
  // that kept its cwd, one given its temp folder) may still write there. The kernel names a working directory by its
  // real path: a data dir reached through a link is compared as that; one reached through another path (a bind mount, a
  // container's volume) by the folders' identities.
  const real = await realpath(folder).catch(() => undefined);
  if (real === undefined || (await someProcessIn(real, identities))) return false;
  // Asked again after the scan of /proc (the longest step): a host that began preparing a session meanwhile is seen
  // now; one that begins between this and the removal is the race `sweepThreadFolders` explains.
  if (changedBefore !== undefined && !(await unchangedSince(present, changedBefore))) return false;
  // Unlinking, unlike rmdir, also takes what a live process still uses there though it works elsewhere with a temp
  // folder of its own (one a server left, its environment replaced): a file it holds open, a socket it listens on.
  if (tmpToClear !== undefined && (await someProcessHolds([real, folder]))) return false;
  // A tool of the thread may swap a level (`.mcp` above all) for a link at any moment: each level is held open from
  // here on, checked to be the one the scan saw, and what is removed is removed from its parent as held (see `HeldDir`),
  // never by a path that a swap since would lead elsewhere (an rmdir of `.mcp/tmp` through a link takes an empty
  // folder there, an unlink of `.mcp/.gitignore` a repository's `.gitignore`).
  const held: HeldDir[] = [];
  try {
    for (const [index, dir] of present.entries()) {
      const at = index === 0 ? dir : entryOf(held[index - 1], nodePath.basename(dir));
      const level = await holdChecked(at, found[index], dir).catch(() => undefined);
      if (level === undefined) return false;
      held.push(level);
    }
    if (tmpToClear !== undefined) {
      await internalDirSeams.clearing?.(internal);
      if (!(await clearTemporaryTmp(held[held.length - 1], found[found.length - 1].dev, tmpToClear))) return false;
    }
    for (let index = present.length - 1; index >= 0; index -= 1) {
      if (present[index] === internal && !(await removeStaged(held[index], staged, uid))) return false;
      if (present[index] === internal && ownGitignore && !(await removeOwnGitignore(held[index], uid))) return false;
      // The thread's own folder is an entry of `<data dir>/threads`, which is the operator's, not the thread's.
      const entry = index === 0 ? present[0] : entryOf(held[index - 1], nodePath.basename(present[index]));
      // Something was created meanwhile (ENOTEMPTY), or the folder went (ENOENT): what is left stays.
      if (!(await rmdir(entry).then(() => true, () => false))) return false;
    }
    return true;
  } finally {
    await Promise.all(held.map((level) => level.handle.close().catch(() => undefined)));
  }
}

/**
 * Removes the `.gitignore` `ensureThreadPaths` wrote in `.mcp` (held open). A tool of the thread may meanwhile have put
 * a `.gitignore` of its own in place of the harness's: the file is renamed aside and checked again under that name,
 * which no one else uses; one that is not the harness's is put back (and keeps the folder). Resolves to whether the
 * harness's was removed.
 */
async function removeOwnGitignore(internal: HeldDir, uid: number | undefined): Promise<boolean> {
  await internalDirSeams.removing?.(internal.path);
  const aside = entryOf(internal, `${INTERNAL_GITIGNORE}.${randomUUID()}.removed`);
  if (!(await rename(entryOf(internal, INTERNAL_GITIGNORE), aside).then(() => true, () => false))) return false;
  await internalDirSeams.gitignoreAside?.(internal.path);
  if (await isOwnGitignore(aside, uid, "part")) return unlink(aside).then(() => true, () => false);
  // Under its name again, unless another file took that name meanwhile (then both stay); renamed back where the file
  // system has no hard links.
  const name = entryOf(internal, INTERNAL_GITIGNORE);
  await link(aside, name).then(
    () => unlink(aside),
    (err: NodeJS.ErrnoException) => (err.code === "EEXIST" ? undefined : rename(aside, name)),
  ).catch(() => undefined);
  return false;
}

/** Staged copies of the `.gitignore` (see `INTERNAL_GITIGNORE_STAGED`) one removal takes: one per host killed there. */
const MAX_STAGED = 4;

/** A staged copy set aside holds the whole text; one being written, a part of it (none, if killed at once). */
function stagedKind(name: string): "whole" | "part" {
  return name.endsWith(".removed") ? "whole" : "part";
}

/** Unlinks the staged copies of the `.gitignore` that `.mcp` (held open) holds, each checked again first. */
async function removeStaged(internal: HeldDir, names: readonly string[], uid: number | undefined): Promise<boolean> {
  for (const name of names) {
    const entry = entryOf(internal, name);
    if (!(await isOwnGitignore(entry, uid, stagedKind(name)))) return false;
    if (!(await unlink(entry).then(() => true, () => false))) return false;
  }
  return true;
}

const OWN_GITIGNORE = Buffer.from(INTERNAL_GITIGNORE_TEXT);

/**
 * Whether `file` is the `.gitignore` `ensureThreadPaths` writes: a file (not a link) of `uid` holding its text alone
 * (`part`: the start of its text, as a host killed while writing it leaves it; `.gitignore` itself is taken so too:
 * hosts before the staged write, and a write in place where there are no hard links, created it empty first).
 * A process of the thread may put something else in its place after the check: it is read without following a link
 * (to a /proc file that reads on for gigabytes), without waiting for a FIFO's writer (which would hold a thread of
 * libuv's pool for good), and no further than the text.
 */
async function isOwnGitignore(file: string, uid: number | undefined, text: "whole" | "part" = "whole"): Promise<boolean> {
  const info = await lstat(file).catch(() => undefined);
  if (info === undefined || !info.isFile() || (uid !== undefined && info.uid !== uid)) return false;
  if (text === "whole" ? info.size !== OWN_GITIGNORE.length : info.size > OWN_GITIGNORE.length) return false;
  try {
    const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const content = Buffer.alloc(OWN_GITIGNORE.length + 1);
      const { bytesRead } = await handle.read(content, 0, content.length, 0);
      const read = content.subarray(0, bytesRead);
      return text === "whole" ? read.equals(OWN_GITIGNORE) : read.length <= OWN_GITIGNORE.length && read.equals(OWN_GITIGNORE.subarray(0, read.length));
    } finally {
      await handle.close();
    }
  } catch {
    return false;
  }
}

/** Whether a folder's contents or attributes changed at `since` (epoch ms) or later. */
function changedSince(info: { ctimeMs: number; mtimeMs: number }, since: number): boolean {
  return Math.max(info.ctimeMs, info.mtimeMs) >= since;
}

async function unchangedSince(dirs: readonly string[], since: number): Promise<boolean> {
  for (const dir of dirs) {
    const info = await lstat(dir).catch(() => undefined);
    if (info === undefined || changedSince(info, since)) return false;
  }
  return true;
}

/** Entries one clearing of a temporary thread's temp folder removes at most: a larger tree stays, and keeps the folder. */
export const TMP_CLEAR_MAX_ENTRIES = 10_000;
/** Folder depth below `.mcp/tmp` it descends to at most. */
const TMP_CLEAR_MAX_DEPTH = 32;

/**
 * Empties the temp folder `tmp` (`.mcp/tmp` of a temporary thread, held open, checked to be a real folder of `uid` on
 * device `dev` that no process works in or was given as its temp folder): what is there belongs to processes that are
 * gone, and the thread is gone too. Only entries of `uid` on the same device changed `since` its sessions began are
 * removed (an older one is no work of theirs: a kept thread's run's of the same thread id); a symbolic link is removed
 * itself, never followed; a folder of another user, a mount point, a tree deeper or larger than the bounds, or an entry
 * that cannot be removed stays, and so does the thread folder. Resolves to whether `tmp` is empty now. Each folder
 * below is held open too, checked to be the one `lstat` saw, and emptied through that (see `HeldDir`). Between an
 * entry's `lstat` and its removal only a process of the host's user could swap the entry itself (the folders are
 * 0700), and none uses the folder.
 */
async function clearTemporaryTmp(tmp: HeldDir, dev: number, { uid, since }: TmpToClear): Promise<boolean> {
  const budget = { left: TMP_CLEAR_MAX_ENTRIES };
  const clear = async (dir: HeldDir, depth: number): Promise<boolean> => {
    // No more names than the budget leaves room for (and one to tell it is over): a folder of a million temp files is
    // not listed whole on the event loop to learn it stays.
    const names = await firstNames(entryOf(dir, "."), budget.left + 1).catch(() => undefined);
    if (names === undefined) return false;
    let emptied = true;
    for (const name of names) {
      if (budget.left <= 0) return false;
      budget.left -= 1;
      const entry = entryOf(dir, name);
      const info = await lstat(entry).catch(() => undefined);
      if (info === undefined) continue;
      if (info.uid !== uid || info.dev !== dev || info.ctimeMs < since) {
        emptied = false;
        continue;
      }
      const removed = info.isDirectory()
        ? depth < TMP_CLEAR_MAX_DEPTH && (await withHeldDir(entry, info, (sub) => clear(sub, depth + 1))) && (await rmdir(entry).then(() => true, () => false))
        : await unlink(entry).then(() => true, () => false);
      if (!removed) emptied = false;
    }
    return emptied;
  };
  return clear(tmp, 0);
}

interface TmpToClear {
  uid: number;
  since: number;
}

/** `work` on the folder `at` held open, if it is the folder `checked` (else false). */
async function withHeldDir(at: string, checked: FileId, work: (dir: HeldDir) => Promise<boolean>): Promise<boolean> {
  const dir = await holdChecked(at, checked).catch(() => undefined);
  if (dir === undefined) return false;
  try {
    return await work(dir);
  } finally {
    await dir.handle.close().catch(() => undefined);
  }
}

const PROC = "/proc";

/** A folder's device and inode, the same whatever path (link, bind mount, another mount namespace) reaches it. */
function identityOf(info: FileId): string {
  return `${info.dev}:${info.ino}`;
}

/**
 * Whether a process this one may inspect works in `folder` (a real path) or in one of the folders `identities` names
 * (its levels): its working directory is there, or its temp folder (TMPDIR, TMP or TEMP: a child of a server whose
 * operator set `cwd` keeps the thread's `.mcp/tmp`). /proc names a working directory by the path its process sees: one
 * in another mount namespace that reaches the data dir through a bind mount (a container's volume) is found by identity
 * only. Linux; elsewhere none is found.
 */
async function someProcessIn(folder: string, identities: ReadonlySet<string>): Promise<boolean> {
  const inside = folder + nodePath.sep;
  const places = await freshPlaces();
  return places.paths.some((place) => place === folder || place.startsWith(inside)) || [...identities].some((id) => places.identities.has(id));
}

/** The variables a stdio child's temp folder is given in (see `stdioLaunch`). */
const TEMP_KEYS = ["TMPDIR=", "TMP=", "TEMP="].map((key) => Buffer.from(key));

/** The temp folders named in a process's environment (`/proc/<pid>/environ`), as given. */
function tempFoldersIn(environ: Buffer, into: Set<string>): void {
  for (const key of TEMP_KEYS) {
    for (let at = environ.indexOf(key); at >= 0; at = environ.indexOf(key, at + 1)) {
      if (at > 0 && environ[at - 1] !== 0) continue;
      const end = environ.indexOf(0, at);
      const value = environ.subarray(at + key.length, end < 0 ? environ.length : end).toString();
      if (nodePath.isAbsolute(value)) into.add(value);
      break;
    }
  }
}

interface Places {
  /** The working directories and temp folders (real paths) of the processes this one may inspect. */
  readonly paths: string[];
  /** Their identities (`identityOf`), each temp folder looked up from its process's root. */
  readonly identities: ReadonlySet<string>;
}

async function scanPlaces(): Promise<Places> {
  const pids = await procPids();
  const temps = new Set<string>();
  const identities = new Set<string>();
  const noteIdentity = (target: string): Promise<void> => stat(target).then((info) => void identities.add(identityOf(info)), () => undefined);
  const cwds = await inBatches(pids, async (pid) => {
    const [cwd, environ] = await Promise.all([
      readlink(`${PROC}/${pid}/cwd`).catch(() => ""),
      readFile(`${PROC}/${pid}/environ`).catch(() => undefined),
      noteIdentity(`${PROC}/${pid}/cwd`),
    ]);
    if (environ !== undefined) {
      const own = new Set<string>();
      tempFoldersIn(environ, own);
      for (const dir of own) temps.add(dir);
      // Looked up from the process's own root, where its path means what it means to it.
      await Promise.all([...own].map((dir) => noteIdentity(`${PROC}/${pid}/root${dir}`)));
    }
    return cwd;
  });
  // Spelled as each process was given them (a data dir through a link): compared as real paths. Few distinct ones.
  const real = await inBatches([...temps], (dir) => realpath(dir).catch(() => nodePath.resolve(dir)));
  return { paths: [...cwds.filter((cwd) => cwd !== ""), ...real], identities };
}

/** A scan that starts after this call, shared by the removals that ask meanwhile (see `freshRuns`). */
const freshPlaces = freshRuns(scanPlaces);

/**
 * Whether a process this one may inspect holds a file in one of `folders` (the folder as a real path, and as the data
 * dir spells it: a socket is listed as it was bound) open, or a Unix socket bound there listens. Asked only before a
 * temporary thread's temp files are removed, so the common removal reads no fds.
 */
async function someProcessHolds(folders: readonly string[]): Promise<boolean> {
  const inside = folders.map((folder) => folder + nodePath.sep);
  return (await freshOpenFiles()).some((file) => inside.some((prefix) => file.startsWith(prefix)));
}

/** The files the processes this one may inspect hold open (`/proc/<pid>/fd`), and the paths of bound Unix sockets. */
async function scanOpenFiles(): Promise<string[]> {
  const pids = await procPids();
  const files: string[] = [];
  await inBatches(pids, async (pid) => {
    const fds = await readdir(`${PROC}/${pid}/fd`).catch(() => [] as string[]);
    const links = await inBatches(fds, (fd) => readlink(`${PROC}/${pid}/fd/${fd}`).catch(() => ""));
    for (const link of links) if (link.startsWith("/")) files.push(link);
  });
  // A socket's fd names no path; the kernel's table of Unix sockets does (the last field, when bound to one).
  const unix = await readFile(`${PROC}/net/unix`, "utf8").catch(() => "");
  for (const line of unix.split("\n").slice(1)) {
    const at = line.indexOf(" /");
    if (at >= 0) files.push(line.slice(at + 1));
  }
  return files;
}

/** Shared like `freshPlaces`. */
const freshOpenFiles = freshRuns(scanOpenFiles);
