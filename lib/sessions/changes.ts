import { readdirSync, statSync, type Dirent } from "node:fs";
import { readdir, stat } from "node:fs/promises";
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

/** A walk stops after this many entries: a huge workspace gets no change listing rather than a slow call. */
export const MAX_SNAPSHOT_ENTRIES = 10_000;
/**
 * Workspaces up to this many entries are walked synchronously: two walks per call through the libuv thread pool
 * cost a stdio call ~0.4 ms on a busy machine, a few microseconds in place; larger ones go async so a big tree
 * never blocks the event loop.
 */
const SYNC_WALK_ENTRIES = 256;

/** `path → "mtimeNs:size"` of every file under a workspace (excluded folders skipped); `null` when too large. */
export type WorkspaceSnapshot = ReadonlyMap<string, string> | null;

export async function snapshotWorkspace(root: string): Promise<WorkspaceSnapshot> {
  return snapshotInPlace(root) ?? snapshotAsync(root);
}

/** The walk done synchronously, or `undefined` when the tree has more than `SYNC_WALK_ENTRIES` entries. */
function snapshotInPlace(root: string): WorkspaceSnapshot | undefined {
  const files = new Map<string, string>();
  let budget = SYNC_WALK_ENTRIES;
  const pending = [root];
  for (let dir = pending.pop(); dir !== undefined; dir = pending.pop()) {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      continue; // vanished or unreadable: nothing to list there
    }
    budget -= entries.length;
    if (budget < 0) return undefined;
    for (const entry of entries) {
      const full = nodePath.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!EXCLUDED_DIR_NAMES.has(entry.name)) pending.push(full);
      } else if (entry.isFile()) {
        try {
          const info = statSync(full, { bigint: true, throwIfNoEntry: false });
          if (info) files.set(full, `${info.mtimeNs}:${info.size}`);
        } catch {
          // unreadable: not listed
        }
      }
    }
  }
  return files;
}

async function snapshotAsync(root: string): Promise<WorkspaceSnapshot> {
  const files = new Map<string, string>();
  let budget = MAX_SNAPSHOT_ENTRIES;
  const walk = async (dir: string): Promise<boolean> => {
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return true; // vanished or unreadable: nothing to list there
    }
    budget -= entries.length;
    if (budget < 0) return false;
    const subdirs: string[] = [];
    await Promise.all(
      entries.map(async (entry) => {
        const full = nodePath.join(dir, entry.name);
        if (entry.isDirectory()) {
          if (!EXCLUDED_DIR_NAMES.has(entry.name)) subdirs.push(full);
        } else if (entry.isFile()) {
          try {
            const info = await stat(full, { bigint: true });
            files.set(full, `${info.mtimeNs}:${info.size}`);
          } catch {
            // removed meanwhile
          }
        }
      }),
    );
    for (const sub of subdirs) if (!(await walk(sub))) return false;
    return true;
  };
  return (await walk(root)) ? files : null;
}

/** Files created or modified between two snapshots (deleted ones are not listed), sorted. */
export function changedFiles(before: WorkspaceSnapshot, after: WorkspaceSnapshot): string[] {
  if (before === null || after === null) return [];
  const changed: string[] = [];
  for (const [file, state] of after) if (before.get(file) !== state) changed.push(file);
  return changed.sort();
}
