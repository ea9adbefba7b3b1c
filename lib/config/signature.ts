import { createHash } from "node:crypto";
import { open, stat, type FileHandle } from "node:fs/promises";

/**
 * The content signature of a watched file (SPEC §2.4), compared by equality, never `mtime >`.
 * `sha256` is `null` when the file could be stat-ed but not read.
 */
export interface ConfigSignature {
  mtimeMs: number;
  size: number;
  sha256: string | null;
}

export interface SignedFile {
  bytes: Buffer;
  signature: ConfigSignature;
}

/**
 * Opens the file once, fstats and reads it through that handle, so the signature describes exactly
 * the bytes returned. Throws whatever the file system throws.
 */
export async function readSignedFile(path: string): Promise<SignedFile> {
  const handle = await open(path, "r");
  try {
    const stats = await handle.stat();
    const bytes = await readAll(handle, stats.size);
    return { bytes, signature: { mtimeMs: stats.mtimeMs, size: stats.size, sha256: sha256Hex(bytes) } };
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/**
 * The one signature helper for every config file the project watches. `null` when the file cannot be
 * stat-ed (deleted, never existed); `sha256: null` when it can be stat-ed but not read.
 */
export async function getConfigSignature(path: string): Promise<ConfigSignature | null> {
  try {
    return (await readSignedFile(path)).signature;
  } catch {
    return statOnly(path);
  }
}

export function signaturesEqual(a: ConfigSignature | null, b: ConfigSignature | null): boolean {
  if (a === null || b === null) return a === b;
  return a.mtimeMs === b.mtimeMs && a.size === b.size && a.sha256 === b.sha256;
}

/** The open or read failed; the file may still exist but be unreadable, which is "stat-ed, not read". */
async function statOnly(path: string): Promise<ConfigSignature | null> {
  try {
    const stats = await stat(path);
    return { mtimeMs: stats.mtimeMs, size: stats.size, sha256: null };
  } catch {
    return null;
  }
}

const CHUNK = 64 * 1024;

/**
 * Reads `size` bytes (the fstat size) into one buffer, avoiding the second fstat `FileHandle.readFile`
 * does; a file that reports size 0 (procfs and friends) is read in chunks to EOF.
 */
async function readAll(handle: FileHandle, size: number): Promise<Buffer> {
  if (size > 0) {
    const buffer = Buffer.allocUnsafe(size);
    let filled = 0;
    while (filled < size) {
      const { bytesRead } = await handle.read(buffer, filled, size - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return filled === size ? buffer : buffer.subarray(0, filled);
  }
  const chunks: Buffer[] = [];
  for (;;) {
    const chunk = Buffer.allocUnsafe(CHUNK);
    const { bytesRead } = await handle.read(chunk, 0, CHUNK, null);
    if (bytesRead === 0) break;
    chunks.push(bytesRead === CHUNK ? chunk : chunk.subarray(0, bytesRead));
  }
  return Buffer.concat(chunks);
}

function sha256Hex(bytes: Buffer): string {
  return createHash("sha256").update(bytes).digest("hex");
}
