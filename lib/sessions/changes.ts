import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, lstatSync, openSync, opendirSync, readSync, statSync, type BigIntStats, type Dirent } from "node:fs";
import { lstat, open, opendir, readdir, stat } from "node:fs/promises";
import * as nodePath from "node:path";
import { INTERNAL_DIR_NAME } from "./workspace";

/** Folders never listed as workspace changes, at any depth: VCS, caches, build output, the harness's own `.mcp`. */
export const EXCLUDED_DIR_NAMES: ReadonlySet<string> = new Set([
  ".git",
  ".hg",
  ".svn",
  ".cache",
  INTERNAL_DIR_NAME,
  ".next",
  ".venv",
  ".browser-frames",
  ".tool-results",
  "__pycache__",
  "build",
  "dist",
  "node_modules",
]);

/**
 * Files never listed as workspace changes, at any depth: the `.git` file a worktree or a submodule has in place of the
 * folder (`gitdir: …`, a pointer into its repository's `.git`), which `git worktree add` writes with the checkout.
 */
export const EXCLUDED_FILE_NAMES: ReadonlySet<string> = new Set([".git"]);

/**
 * A path the walk visits: a string, or the raw bytes of one with a name that is not UTF-8 (a file a tool named in
 * Latin-1, an archive's CP437 names): as a string, decoded with U+FFFD, it would name nothing, and the file, or a
 * whole folder, would go unlisted. Such a file is listed under its name as decoded.
 */
type WalkPath = string | Buffer;

const SEPARATOR = Buffer.from(nodePath.sep);

/** A folder entry's path: a string unless its name (or the folder's path) does not read back as the same bytes. */
function entryPath(dir: WalkPath, name: string | Buffer): WalkPath {
  if (typeof name === "string") return typeof dir === "string" ? nodePath.join(dir, name) : Buffer.concat([dir, SEPARATOR, Buffer.from(name)]);
  const text = name.toString();
  if (typeof dir === "string" && Buffer.from(text).equals(name)) return nodePath.join(dir, text);
  return Buffer.concat([typeof dir === "string" ? Buffer.from(dir) : dir, SEPARATOR, name]);
}

/** How a path is shown (and keyed in a snapshot). */
function shownPath(path: WalkPath): string {
  return typeof path === "string" ? path : path.toString();
}

/** A name read as a string that lost bytes: the folder is read again with raw names. */
function hasUndecodedName(entries: readonly Dirent[]): boolean {
  return entries.some((entry) => entry.name.includes("\uFFFD"));
}

/** A walk stops after this many entries: a huge workspace gets no change listing rather than a slow call. */
export const MAX_SNAPSHOT_ENTRIES = 10_000;
/**
 * Workspaces up to this many entries are walked synchronously: two walks per call through the libuv thread pool
 * cost a stdio call ~0.4 ms on a busy machine, a few microseconds in place; larger ones go async so a big tree
 * never blocks the event loop.
 */
const SYNC_WALK_ENTRIES = 256;

/** `path → stamp` of every file under a workspace (excluded folders skipped); `null` when too large. */
export type WorkspaceSnapshot = ReadonlyMap<string, string> | null;

/**
 * A file modified this recently when a snapshot stats it is "racy" (as Git calls it): timestamps come from a coarse
 * clock, so a rewrite of the same size in the same tick would leave its stamp unchanged. Such a file's stamp also
 * carries a digest of its content, up to these bounds (a larger or later one is judged by its stamp alone).
 */
export const RACY_DIGEST_MAX_BYTES = 1024 * 1024;
const RACY_DIGEST_BUDGET_BYTES = 4 * 1024 * 1024;
const DIGEST_MARK = "#";

/**
 * What tells a file's versions apart: its modification time and size, and its inode, so a file replaced by a rename
 * (an atomic save) is a change even when its time and size came out the same (timestamps are coarse). After
 * `CTIME_MARK`, its change time: a rewrite that puts the old modification time back (`tar -x`, `cp -p`, `rsync -t`)
 * still moves it, and no program can set it.
 */
function stampOf(info: BigIntStats): string {
  return `${info.ino}:${info.mtimeNs}:${info.size}${CTIME_MARK}${info.ctimeNs}`;
}

const CTIME_MARK = "@";

/** Whether a racy file of this size still fits the snapshot's digest budget (which it then takes from). */
class DigestBudget {
  private left = RACY_DIGEST_BUDGET_BYTES;

  constructor(private readonly racySinceMs: number) {}

  take(info: BigIntStats): boolean {
    const size = Number(info.size);
    if (Number(info.mtimeMs) < this.racySinceMs || size > RACY_DIGEST_MAX_BYTES || size > this.left) return false;
    this.left -= size;
    return true;
  }
}

function digestOf(content: Uint8Array): string {
  return createHash("sha256").update(content).digest("base64");
}

/**
 * A process of the thread may put a FIFO, or a link to a device, where the walk listed a file: it is opened without
 * waiting for a writer and without following a link, and read only when it is still a regular file within the bound.
 */
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

function readRegularFile(file: WalkPath): Buffer | undefined {
  const fd = openSync(file, READ_FLAGS);
  try {
    const info = fstatSync(fd);
    if (!info.isFile() || info.size > RACY_DIGEST_MAX_BYTES) return undefined;
    const buffer = Buffer.alloc(info.size + 1);
    let length = 0;
    for (let read = -1; read !== 0 && length < buffer.length; length += read) {
      read = readSync(fd, buffer, length, buffer.length - length, length);
    }
    return sizedContent(buffer, length);
  } finally {
    closeSync(fd);
  }
}

async function readRegularFileAsync(file: WalkPath): Promise<Buffer | undefined> {
  const handle = await open(file, READ_FLAGS);
  try {
    const info = await handle.stat();
    if (!info.isFile() || info.size > RACY_DIGEST_MAX_BYTES) return undefined;
    const buffer = Buffer.alloc(info.size + 1);
    let length = 0;
    for (let read = -1; read !== 0 && length < buffer.length; length += read) {
      ({ bytesRead: read } = await handle.read(buffer, length, buffer.length - length, length));
    }
    return sizedContent(buffer, length);
  } finally {
    await handle.close();
  }
}

/**
 * What was read of a file, reading at most one byte more than its size said: a file that holds more than that (one
 * growing, or truncated larger, between the stat and the read; a /proc file, size 0) is not hashed rather than read to
 * its end, which a process of the thread could put gigabytes away (`readFile` reads to the end, or a size it stats
 * again, up to 2 GiB).
 */
function sizedContent(buffer: Buffer, length: number): Buffer | undefined {
  return length < buffer.length ? buffer.subarray(0, length) : undefined;
}

/** The stamp, with the content's digest when the file is racy and can be read. */
function stampWithDigest(file: WalkPath, info: BigIntStats, digests: DigestBudget): string {
  const stamp = stampOf(info);
  if (!digests.take(info)) return stamp;
  try {
    const content = readRegularFile(file);
    return content === undefined ? stamp : `${stamp}${DIGEST_MARK}${digestOf(content)}`;
  } catch {
    return stamp;
  }
}

async function stampWithDigestAsync(file: WalkPath, info: BigIntStats, digests: DigestBudget): Promise<string> {
  const stamp = stampOf(info);
  if (!digests.take(info)) return stamp;
  try {
    const content = await readRegularFileAsync(file);
    return content === undefined ? stamp : `${stamp}${DIGEST_MARK}${digestOf(content)}`;
  } catch {
    return stamp;
  }
}

/** The file's content digest now, or undefined when it cannot be read or is too large to hash. */
function digestNow(file: string): string | undefined {
  try {
    const content = readRegularFile(file);
    return content === undefined ? undefined : digestOf(content);
  } catch {
    return undefined;
  }
}

/**
 * A folder's listing is reused only when its change time is at least this much older than the moment it was read.
 * A folder's ctime moves whenever an entry is added, removed or renamed, but timestamps come from a coarse clock
 * (a few milliseconds on Linux, 2 s on FAT): a change in the same tick as the previous one can leave it unchanged.
 * Past the margin, any later change carries a later ctime.
 */
export const SETTLED_LISTING_MS = 2_000;

interface Listing {
  /** The folder's inode and change time when it was read. */
  readonly ino: number;
  readonly ctimeMs: number;
  /** Whether the folder's ctime was past `SETTLED_LISTING_MS` when it was read: only then is the listing reused. */
  readonly settled: boolean;
  /** Entries read (excluded and other kinds included), for the size bound. */
  readonly entries: number;
  readonly dirs: readonly WalkPath[];
  readonly files: readonly WalkPath[];
  /** The last walk that reached this folder (0: none yet). */
  seen: number;
}

const EMPTY_SNAPSHOT: ReadonlyMap<string, string> = new Map();
const TOO_LARGE = Symbol("too large");

export interface WorkspaceScannerOptions {
  /** The clock compared with folder change times (default `Date.now`). */
  now?: () => number;
  /** Reads a folder's entries; more than `limit` of them may stop early (default: `readDirUpTo`). */
  readDir?: (dir: string, limit: number) => Dirent[];
}

/** A folder's entries, but no more than `limit + 1`: a huge folder is not read whole just to learn it is too big. */
export function readDirUpTo(dir: string, limit: number): Dirent[] {
  return readEntriesUpTo(dir, limit, "utf8") as Dirent[];
}

/** As `readDirUpTo`, with names as strings or (`buffer`) as their raw bytes. */
function readEntriesUpTo(dir: WalkPath, limit: number, encoding: "utf8" | "buffer"): Dirent<string | Buffer>[] {
  const handle = opendirSync(dir, { bufferSize: Math.min(Math.max(limit + 1, 32), 1024), encoding: encoding as BufferEncoding });
  try {
    const entries: Dirent<string | Buffer>[] = [];
    for (let entry = handle.readSync(); entry !== null; entry = handle.readSync()) {
      entries.push(entry);
      if (entries.length > limit) break;
    }
    return entries;
  } finally {
    handle.closeSync();
  }
}

/** How many stats a walk off the event loop has in flight at once (their completions are handled in bursts). */
const STAT_BATCH = 256;

/**
 * Snapshots of one workspace, call after call. Each folder costs a `stat`; it is read again only when its inode or
 * ctime changed (or its listing was not settled), so an unchanged tree costs one `stat` per folder and per file
 * instead of a directory read per folder. Files are always stat'ed: their changes do not touch the folder.
 */
export class WorkspaceScanner {
  private readonly listings = new Map<string, Listing>();
  private generation = 0;
  /**
   * Whether the last walk found the tree over `SYNC_WALK_ENTRIES`: then it goes off the event loop straight away,
   * without listings (a partial walk in place would stat up to the budget first, and keep listings it never prunes),
   * until a walk finds it small again.
   */
  private large = false;

  private readonly now: () => number;
  private readonly readDir: (dir: string, limit: number) => Dirent[];

  constructor(
    readonly root: string,
    options: WorkspaceScannerOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.readDir = options.readDir ?? readDirUpTo;
  }

  /** Folders whose listing is remembered (for tests and diagnostics). */
  get rememberedFolders(): number {
    return this.listings.size;
  }

  async snapshot(): Promise<WorkspaceSnapshot> {
    return this.snapshotInPlace() ?? this.snapshotLarge();
  }

  /**
   * The walk done synchronously, or `undefined` when the tree has more than `SYNC_WALK_ENTRIES` entries (then
   * `snapshotLarge()` walks it without blocking). Lets a caller skip a promise per call for the usual small tree.
   */
  snapshotInPlace(): WorkspaceSnapshot | undefined {
    if (this.large) return undefined;
    let files: Map<string, string> | undefined;
    const generation = ++this.generation;
    let digests: DigestBudget | undefined;
    let reread = false;
    let budget = SYNC_WALK_ENTRIES;
    const pending: WalkPath[] = [this.root];
    for (let dir = pending.pop(); dir !== undefined; dir = pending.pop()) {
      const listing = this.list(dir, budget);
      if (listing === TOO_LARGE) return this.becameLarge();
      if (listing === null) continue; // vanished or unreadable: nothing to list there
      if (listing.seen === 0) reread = true;
      listing.seen = generation;
      budget -= listing.entries;
      if (budget < 0) return this.becameLarge();
      for (const sub of listing.dirs) pending.push(sub);
      for (const file of listing.files) {
        try {
          const info = statSync(file, { bigint: true, throwIfNoEntry: false });
          if (!info) continue;
          digests ??= new DigestBudget(this.now() - SETTLED_LISTING_MS);
          (files ??= new Map()).set(shownPath(file), stampWithDigest(file, info, digests));
        } catch {
          // unreadable: not listed
        }
      }
    }
    // A folder read again may have lost subfolders: forget the listings this walk did not reach.
    if (reread) for (const [key, listing] of this.listings) if (listing.seen !== generation) this.listings.delete(key);
    return files ?? EMPTY_SNAPSHOT;
  }

  /** The walk in place gave up: its partial listings are dropped (the walks off the loop keep none). */
  private becameLarge(): undefined {
    this.listings.clear();
    return undefined;
  }

  /** The folder's listing; `TOO_LARGE` when it has more than `budget` entries (then it is neither read whole nor kept). */
  private list(dir: WalkPath, budget: number): Listing | typeof TOO_LARGE | null {
    // The stat comes first: a change between it and the read shows as a new stamp next time. A folder that is a
    // symbolic link (the workspace itself, replaced by a tool of the thread) is not walked: what it leads to is not
    // the thread's.
    let info;
    try {
      info = lstatSync(dir, { throwIfNoEntry: false });
    } catch {
      return null;
    }
    if (!info?.isDirectory()) return null;
    const { ino, ctimeMs } = info;
    // A raw path is keyed by its bytes (a NUL never occurs in a path).
    const key = typeof dir === "string" ? dir : `\0${dir.toString("hex")}`;
    const cached = this.listings.get(key);
    if (cached !== undefined && cached.settled && cached.ino === ino && cached.ctimeMs === ctimeMs) return cached;
    const readAt = this.now();
    let entries: Dirent<string | Buffer>[];
    try {
      const read = typeof dir === "string" ? this.readDir(dir, Math.max(budget, 0)) : undefined;
      entries = read !== undefined && (read.length > budget || !hasUndecodedName(read)) ? read : readEntriesUpTo(dir, Math.max(budget, 0), "buffer");
    } catch {
      return null;
    }
    if (entries.length > budget) return TOO_LARGE;
    const dirs: WalkPath[] = [];
    const files: WalkPath[] = [];
    for (const entry of entries) {
      if (entry.isDirectory()) {
        if (!EXCLUDED_DIR_NAMES.has(String(entry.name))) dirs.push(entryPath(dir, entry.name));
      } else if (entry.isFile()) {
        if (!EXCLUDED_FILE_NAMES.has(String(entry.name))) files.push(entryPath(dir, entry.name));
      }
    }
    const listing: Listing = { ino, ctimeMs, settled: ctimeMs < readAt - SETTLED_LISTING_MS, entries: entries.length, dirs, files, seen: 0 };
    this.listings.set(key, listing);
    return listing;
  }

  /** The walk through the thread pool, for a tree too large for `snapshotInPlace()`. */
  async snapshotLarge(): Promise<WorkspaceSnapshot> {
    const walked = await snapshotAsync(this.root, new DigestBudget(this.now() - SETTLED_LISTING_MS));
    this.large = walked === null || walked.entries > SYNC_WALK_ENTRIES;
    return walked?.files ?? null;
  }
}

/** One snapshot of a workspace, without a scanner's remembered listings. */
export async function snapshotWorkspace(root: string): Promise<WorkspaceSnapshot> {
  return new WorkspaceScanner(root).snapshot();
}

/** The files of the tree with the count of entries read, or `null` past `MAX_SNAPSHOT_ENTRIES`. */
async function snapshotAsync(root: string, digests: DigestBudget): Promise<{ files: Map<string, string>; entries: number } | null> {
  const files = new Map<string, string>();
  let budget = MAX_SNAPSHOT_ENTRIES;
  const walk = async (dir: WalkPath): Promise<boolean> => {
    let entries: Dirent<string | Buffer>[] = [];
    try {
      // A folder that is a symbolic link is not walked (see `list`).
      if (!(await lstat(dir)).isDirectory()) return true;
      // Read entry by entry, and left as soon as the tree is over the bound: a folder of 100,000 entries is not
      // turned into objects in one go on the event loop.
      for await (const entry of await opendir(dir, { bufferSize: 256 })) {
        entries.push(entry);
        if (entries.length > budget) return false;
      }
      if (hasUndecodedName(entries as Dirent[])) entries = await readdir(dir, { withFileTypes: true, encoding: "buffer" });
    } catch {
      return true; // vanished or unreadable: nothing to list there
    }
    budget -= entries.length;
    const subdirs: WalkPath[] = [];
    const stamp = async (entry: Dirent<string | Buffer>): Promise<void> => {
      const full = entryPath(dir, entry.name);
      if (entry.isDirectory()) {
        if (!EXCLUDED_DIR_NAMES.has(String(entry.name))) subdirs.push(full);
      } else if (entry.isFile() && !EXCLUDED_FILE_NAMES.has(String(entry.name))) {
        try {
          const info = await stat(full, { bigint: true });
          files.set(shownPath(full), await stampWithDigestAsync(full, info, digests));
        } catch {
          // removed meanwhile
        }
      }
    };
    for (let i = 0; i < entries.length; i += STAT_BATCH) await Promise.all(entries.slice(i, i + STAT_BATCH).map(stamp));
    for (const sub of subdirs) if (!(await walk(sub))) return false;
    return true;
  };
  return (await walk(root)) ? { files, entries: MAX_SNAPSHOT_ENTRIES - budget } : null;
}

/**
 * Files created or modified between two snapshots (deleted ones are not listed), sorted. A file whose stamp did not
 * move is a change only when it was racy in `before` and its content is not the same any more (read now when `after`
 * no longer found it racy).
 */
export function changedFiles(before: WorkspaceSnapshot, after: WorkspaceSnapshot): string[] {
  if (before === null || after === null) return [];
  const changed: string[] = [];
  for (const [file, state] of after) {
    const old = before.get(file);
    if (old !== state && (old === undefined || contentMoved(file, old, state))) changed.push(file);
  }
  return changed.sort();
}

function contentMoved(file: string, old: string, now: string): boolean {
  const [oldStamp, oldDigest] = old.split(DIGEST_MARK);
  const [stamp, digest] = now.split(DIGEST_MARK);
  const [oldVersion, oldCtime] = oldStamp.split(CTIME_MARK);
  const [version, ctime] = stamp.split(CTIME_MARK);
  if (oldVersion !== version) return true;
  // Same inode, time and size. A digest taken before (the file was racy) tells whether the content moved: written
  // again as it was is no change, though its change time moved. Without one, the change time tells.
  if (oldDigest !== undefined) return (digest ?? digestNow(file)) !== oldDigest;
  return oldCtime !== ctime;
}
