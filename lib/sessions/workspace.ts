import { createHash, randomUUID } from "node:crypto";
import { constants, type Stats } from "node:fs";
import { chmod, link, lstat, mkdir, open, unlink } from "node:fs/promises";
import * as nodePath from "node:path";
import type { McpServerConfig } from "../config";
import { entryOf, holdChecked, sameFile, type HeldDir } from "./held-dir";
import { internalDirSeams } from "./internal-dir-seams";
import { startsPythonFromCwd } from "./python-cwd-path";
export { DATA_DIR_ENV_VAR, DEFAULT_DATA_DIR, resolveDataDir } from "../shared/data-dir";

/** Where the model sees a thread's `user-data` folder. */
export const VIRTUAL_USER_DATA = "/mnt/user-data";
/** The harness's own folder inside a workspace; never listed as a change. */
export const INTERNAL_DIR_NAME = ".mcp";
const TEMP_ENV_KEYS = ["TMPDIR", "TMP", "TEMP"] as const;
/**
 * Given to a child started in the thread workspace as `python3 -m` or `-c`: Python (3.11+) then leaves the cwd off
 * `sys.path`, where `python3 -m <module>` would run a `<module>.py` (or a `json.py` it imports) that a tool wrote there.
 */
const PYTHON_SAFE_PATH_ENV = "PYTHONSAFEPATH";
const SAFE_THREAD_ID = /^[A-Za-z0-9_-]{1,128}$/;
/** The most a thread folder the harness creates allows (the umask may take more away). */
const FOLDER_MODE = 0o755;

/**
 * A thread id as a folder name. Ids of `[A-Za-z0-9_-]{1,128}` are used as they are; anything else (`../x`, `a/b`,
 * `.`, non-ASCII, too long) becomes `~` + its sha256, a name no safe id can take and no id can steer. The hash reads
 * the id's UTF-8, or its UTF-16 code units when it holds a lone surrogate (which UTF-8 would turn into U+FFFD, so
 * `t\uD800` and `t\uFFFD` would share a folder).
 */
export function threadFolderName(threadId: string): string {
  if (SAFE_THREAD_ID.test(threadId)) return threadId;
  const hash = createHash("sha256");
  // 0xFF first: a byte no UTF-8 text holds, so these bytes never equal another id's UTF-8.
  if (LONE_SURROGATE.test(threadId)) hash.update(Buffer.from([0xff])).update(Buffer.from(threadId, "utf16le"));
  else hash.update(threadId, "utf8");
  return `~${hash.digest("hex")}`;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export interface ThreadPaths {
  /** `<data dir>/threads/<thread>/user-data`: what `/mnt/user-data` stands for. */
  readonly userData: string;
  /** `<user-data>/workspace`: a stdio child's default cwd. */
  readonly workspace: string;
  /** `<workspace>/.mcp/tmp` (mode 0700): a stdio child's default TMPDIR/TMP/TEMP. */
  readonly tmp: string;
}

export function threadPaths(dataDir: string, threadId: string): ThreadPaths {
  return threadPathsOfFolder(dataDir, threadFolderName(threadId));
}

/** A name `threadFolderName` gives: a safe id as it is, or `~` and a sha256 in hex. */
const THREAD_FOLDER_NAME = /^(?:[A-Za-z0-9_-]{1,128}|~[0-9a-f]{64})$/;

/** Whether `name`, an entry of `<data dir>/threads`, is one `threadFolderName` could have given. */
export function isThreadFolderName(name: string): boolean {
  return THREAD_FOLDER_NAME.test(name);
}

/** `threadPaths` of the folder `<data dir>/threads/<folder>` (a name `threadFolderName` gave). */
export function threadPathsOfFolder(dataDir: string, folder: string): ThreadPaths {
  const userData = nodePath.join(dataDir, "threads", folder, "user-data");
  const workspace = nodePath.join(userData, "workspace");
  return { userData, workspace, tmp: nodePath.join(workspace, INTERNAL_DIR_NAME, "tmp") };
}

/**
 * Creates the thread's workspace (a failure throws, also a symbolic link in place of the thread's folder, its
 * `user-data` or its `workspace`) and its private temp folder: `.mcp` and `.mcp/tmp` 0700 even if they existed with
 * a wider mode, and not used when another user owns either. Returns `null` when the temp folder is ready, else why not
 * (an error code): the workspace belongs to the thread's tools, so `.mcp` may be a file, or a symlink to a folder
 * elsewhere, which is never made private or used.
 */
export async function ensureThreadPaths(paths: ThreadPaths): Promise<string | null> {
  // A link planted in the thread's own folders (by a server of that thread) would move its next child elsewhere:
  // each level is checked before anything is created in it.
  // Never writable by others, whatever the umask (000 is not unheard of for daemons): whoever may rename a folder's
  // entries could put a plain folder of theirs, which no link check sees, in place of a thread's workspace.
  const thread = nodePath.dirname(paths.userData);
  await mkdir(nodePath.dirname(thread), { recursive: true, mode: FOLDER_MODE });
  let workspace: Stats | undefined;
  for (const dir of [thread, paths.userData, paths.workspace]) {
    await mkdir(dir, { mode: FOLDER_MODE }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "EEXIST") throw err;
    });
    const info = await lstat(dir);
    if (dir === paths.workspace) workspace = info;
    if (info.isSymbolicLink()) {
      const where = nodePath.relative(nodePath.dirname(thread), dir).split(nodePath.sep).slice(1).join("/") || "its folder";
      throw Object.assign(new Error("symbolic link in a thread workspace path"), { code: `a symbolic link at ${where}` });
    }
  }
  // The tools of the thread may swap `.mcp` (or the workspace) for a link at any moment: everything below is done
  // in the folders as opened and checked (see `HeldDir`), never by a path that a swap since would lead elsewhere.
  const held: HeldDir[] = [];
  try {
    let parent = workspace === undefined ? undefined : await holdChecked(paths.workspace, workspace);
    if (parent === undefined) return REPLACED;
    held.push(parent);
    for (const dir of [nodePath.dirname(paths.tmp), paths.tmp]) {
      const at = entryOf(parent, nodePath.basename(dir));
      await mkdir(at, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== "EEXIST") throw err;
      });
      const info = await lstat(at);
      if (info.isSymbolicLink()) return "a symlink";
      if (!info.isDirectory()) return "ENOTDIR";
      parent = await holdChecked(at, info, dir);
      if (parent === undefined) return REPLACED;
      held.push(parent);
      if (dir !== paths.tmp) await internalDirSeams.prepared?.(dir);
    }
    const [, internal, tmp] = held;
    // `.mcp` too: whoever may rename its entries could put a folder of theirs in place of `tmp` while the child uses it.
    for (const dir of [internal, tmp]) {
      const problem = await makePrivate(dir);
      if (problem !== null) return problem;
    }
    await ignoreInternalDir(internal);
    // The child is given its temp folder by path: that path must still lead to the folder prepared.
    for (const dir of held) {
      const now = await lstat(dir.path).catch(() => undefined);
      if (now === undefined || !sameFile(now, await dir.handle.stat())) return REPLACED;
    }
    return null;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? "error";
  } finally {
    await Promise.all(held.map((dir) => dir.handle.close().catch(() => undefined)));
  }
}

/** Why the temp folder is not used when `.mcp` (or the workspace) was swapped while it was prepared. */
const REPLACED = ".mcp replaced meanwhile";

/** The file that keeps `.mcp` out of version control, and what the harness writes in it. */
export const INTERNAL_GITIGNORE = ".gitignore";
export const INTERNAL_GITIGNORE_TEXT = "# langgraph-mcp-harness: this thread's internal folder (its servers' temp files); never versioned\n*\n";

/**
 * The names the harness gives its `.gitignore` on its way in (`new`: written there, then linked as `.gitignore`) and
 * out (`removed`: set aside to be checked and unlinked): a host killed in between leaves the file under that name, which
 * the removal of the skeleton takes for the harness's own when it holds the harness's text (a part of it for `new`).
 */
export const INTERNAL_GITIGNORE_STAGED = /^\.gitignore\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.(new|removed)$/;

/**
 * Writes `.mcp/.gitignore` (`*`) unless there is an entry of that name: a repository at the workspace's root (the
 * model's `git init` there) would otherwise show `.mcp/` as untracked, and `git add .` would commit what the thread's
 * servers left in their temp folder. Written whole under a name of its own, then linked as `.gitignore` (which fails
 * when one is there), so a host killed while writing never leaves a `.gitignore` without its text, which would stay
 * for good and keep the folder. Created new in the folder held open, never through a link; a failure only leaves the
 * folder unignored. Where the file system has no hard links it is written in place.
 */
async function ignoreInternalDir(internal: HeldDir): Promise<void> {
  const target = entryOf(internal, INTERNAL_GITIGNORE);
  if (await exists(target)) return;
  const staged = entryOf(internal, `${INTERNAL_GITIGNORE}.${randomUUID()}.new`);
  let inPlace = false;
  try {
    await writeNew(staged, internal.path);
    // EEXIST: a `.gitignore` came meanwhile (the thread's tool's), which is kept. ENOENT: the staged copy (or `.mcp`)
    // was removed meanwhile (another host's removal of the skeleton, a tool): nothing is written in place either.
    await link(staged, target).catch((err: NodeJS.ErrnoException) => void (inPlace = err.code !== "EEXIST" && err.code !== "ENOENT"));
  } catch {
    // not writable: the folder stays unignored
  } finally {
    await unlink(staged).catch(() => undefined);
  }
  if (inPlace) await writeNew(target, internal.path).catch(() => undefined);
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

/** Creates `path` in `.mcp` (never through a link, never over an entry) with the harness's `.gitignore` text. */
async function writeNew(path: string, internal: string): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const handle = await open(path, flags, 0o600);
  try {
    await internalDirSeams.gitignoreCreated?.(internal);
    await handle.writeFile(INTERNAL_GITIGNORE_TEXT);
  } finally {
    await handle.close();
  }
}

/** Makes the held folder 0700, unless another user owns it (a mode of ours would leave it theirs; as root the chmod succeeds). */
async function makePrivate(dir: HeldDir): Promise<string | null> {
  const uid = process.geteuid?.();
  if (uid !== undefined && (await dir.handle.stat()).uid !== uid) return "owned by another user";
  try {
    await dir.handle.chmod(0o700);
  } catch (err) {
    // Node's permission model refuses fchmod whatever it allows: the folder is named by its path there, as every step
    // is (see `HeldDir`); the check that each path still leads to the folder held, at the end, sees a swap.
    if ((err as NodeJS.ErrnoException).code !== "ERR_ACCESS_DENIED") throw err;
    await chmod(dir.path, 0o700);
  }
  return null;
}

export interface StdioLaunch {
  cwd: string | undefined;
  env: Record<string, string>;
}

/**
 * Where a stdio child runs: the operator's `cwd` and temp variables win; otherwise the thread workspace and its
 * `.mcp/tmp`, unless that folder could not be made ready (`tmpReady` false: the host's temp folder then), with
 * `PYTHONSAFEPATH=1` for a command line that has Python read modules from its cwd, unless the server's `env` sets it.
 * The rest of the server's `env` is kept as configured.
 */
export function stdioLaunch(server: McpServerConfig, paths: ThreadPaths | undefined, tmpReady = true): StdioLaunch {
  const env = { ...server.env };
  if (!paths) return { cwd: server.cwd || undefined, env };
  if (tmpReady) for (const key of TEMP_ENV_KEYS) if (!Object.hasOwn(env, key)) env[key] = paths.tmp;
  if (server.cwd) return { cwd: server.cwd, env };
  if (!Object.hasOwn(env, PYTHON_SAFE_PATH_ENV) && startsPythonFromCwd(server.command ?? "", server.args ?? [])) {
    env[PYTHON_SAFE_PATH_ENV] = "1";
  }
  return { cwd: paths.workspace, env };
}
