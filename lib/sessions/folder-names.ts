import { opendir } from "node:fs/promises";

/** Up to `count` names of the entries of `dir`, in directory order: a folder of a million entries is not listed whole. */
export async function firstNames(dir: string, count: number): Promise<string[]> {
  const handle = await opendir(dir, { bufferSize: Math.min(count, 256) });
  const names: string[] = [];
  try {
    while (names.length < count) {
      const entry = await handle.read();
      if (entry === null) break;
      names.push(entry.name);
    }
  } finally {
    await handle.close().catch(() => undefined);
  }
  return names;
}
