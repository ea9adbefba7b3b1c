import { describe, expect, test } from "@jest/globals";
import { execFile } from "node:child_process";
import { chmod, lstat, mkdir, readdir, readFile, stat, symlink } from "node:fs/promises";
import * as path from "node:path";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { TSX_CJS_REGISTER } from "../fixtures/stdio";
import { incrementCounter, putBody, runWriters, type WriterSummary } from "./writers";

const WRITERS_PER_PROCESS = 4; // 8 writers in all, across two processes
const OPS_PER_WRITER = 100;
/** About 10 s alone on 2 cores; room for a loaded machine (the other jest worker, fsync contention). */
const TEST_TIMEOUT_MS = 120_000;

function childWriters(configPath: string, tag = "child", ops = OPS_PER_WRITER): Promise<WriterSummary> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ["--require", TSX_CJS_REGISTER, path.join(__dirname, "writers.ts"), configPath, tag, String(WRITERS_PER_PROCESS), String(ops)],
      { maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => (error ? reject(new Error(`child writers failed: ${stderr}`)) : resolve(JSON.parse(stdout) as WriterSummary)),
    );
  });
}

/** The server list without the shared server's `enabled` flag, which PATCHes toggle. */
function withoutToggle(servers: Record<string, unknown>): string {
  const copy = structuredClone(servers) as Record<string, Record<string, unknown>>;
  delete copy.shared?.enabled;
  return JSON.stringify(copy);
}

describe("config writes under concurrency", () => {
  test("8 writers x 100 PUT/PATCH from two processes plus a polling reader: always valid JSON, the final file is one of the writes, mode and symlink kept, no temp or lock file left", async () => {
    const dir = await makeTempDir("gateway-race-");
    const realDir = path.join(dir, "real");
    await mkdir(realDir);
    const real = await writeConfig(realDir, { mcpServers: putBody("seed", 0, 0), mcpInterceptors: [], customTopLevel: { keep: 1 } });
    await chmod(real, 0o640);
    const link = path.join(dir, "extensions_config.json");
    await symlink(path.relative(dir, real), link);

    let writing = true;
    let reads = 0;
    const invalid: string[] = [];
    const reader = (async () => {
      while (writing) {
        const text = await readFile(link, "utf8");
        try {
          JSON.parse(text);
        } catch {
          invalid.push(text.slice(0, 80));
        }
        reads += 1;
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();

    let mine: WriterSummary;
    let theirs: WriterSummary;
    try {
      [mine, theirs] = await Promise.all([runWriters(link, "parent", WRITERS_PER_PROCESS, OPS_PER_WRITER), childWriters(link)]);
    } finally {
      writing = false;
      await reader;
    }

    expect(invalid).toEqual([]);
    expect(reads).toBeGreaterThan(0);
    const total = 2 * WRITERS_PER_PROCESS * OPS_PER_WRITER;
    expect(mine.statuses["200"] + theirs.statuses["200"]).toBe(total);

    const final = JSON.parse(await readFile(real, "utf8"));
    expect(final.customTopLevel).toEqual({ keep: 1 });
    expect(final.mcpInterceptors).toEqual([]);
    const candidates = new Set([...mine.bodies, ...theirs.bodies].map(withoutToggle));
    expect(candidates.size).toBe(total / 2);
    expect(candidates.has(withoutToggle(final.mcpServers))).toBe(true);
    expect(final.mcpServers.shared.env).toEqual({ TOKEN: "$SHARED_TOKEN" });

    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    expect((await stat(real)).mode & 0o777).toBe(0o640);
    expect((await readdir(realDir)).sort()).toEqual(["extensions_config.json"]);
    expect((await readdir(dir)).sort()).toEqual(["extensions_config.json", "real"]);
  }, TEST_TIMEOUT_MS);

  test("the sidecar lock makes read-modify-writes of two processes take turns: no increment is lost", async () => {
    const dir = await makeTempDir("gateway-counter-");
    const file = await writeConfig(dir, { count: 0 });
    const ops = 40;
    await Promise.all([incrementCounter(file, WRITERS_PER_PROCESS, ops), childWriters(file, "counter", ops)]);
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual({ count: 2 * WRITERS_PER_PROCESS * ops });
    expect(await readdir(dir)).toEqual(["extensions_config.json"]);
  }, TEST_TIMEOUT_MS);
});
