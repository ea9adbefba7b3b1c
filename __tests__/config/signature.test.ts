import { afterEach, beforeEach, describe, expect, it } from "@jest/globals";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, rm, stat, unlink, utimes, writeFile } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { getConfigSignature, readSignedFile, signaturesEqual, type ConfigSignature } from "../../lib/config";

let dir: string;
const FIXED = new Date("2024-01-02T03:04:05.000Z");

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "cfg-sig-"));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function writeWithMtime(file: string, text: string): Promise<void> {
  await writeFile(file, text);
  await utimes(file, FIXED, FIXED);
}

const sha = (text: string) => createHash("sha256").update(text).digest("hex");

describe("getConfigSignature", () => {
  it("is (mtimeMs, size, sha256) of the file", async () => {
    const file = path.join(dir, "a.json");
    await writeFile(file, '{"a":1}');
    const stats = await stat(file);
    expect(await getConfigSignature(file)).toEqual({ mtimeMs: stats.mtimeMs, size: 7, sha256: sha('{"a":1}') });
  });

  it("catches a same-size edit whose mtime was restored", async () => {
    const file = path.join(dir, "extensions_config.json");
    await writeWithMtime(file, '{"mcpServers":{"a":{}}}');
    const before = await getConfigSignature(file);
    await writeWithMtime(file, '{"mcpServers":{"b":{}}}');
    const after = await getConfigSignature(file);

    expect(after?.mtimeMs).toBe(before?.mtimeMs);
    expect(after?.size).toBe(before?.size);
    expect(after?.sha256).not.toBe(before?.sha256);
    expect(signaturesEqual(before, after)).toBe(false);
  });

  it("tells apart another file with the same size and mtime", async () => {
    const first = path.join(dir, "one.json");
    const second = path.join(dir, "two.json");
    await writeWithMtime(first, '{"x":1}');
    await writeWithMtime(second, '{"x":2}');
    const a = await getConfigSignature(first);
    const b = await getConfigSignature(second);
    expect(a?.mtimeMs).toBe(b?.mtimeMs);
    expect(signaturesEqual(a, b)).toBe(false);
  });

  it("is stable for an untouched file", async () => {
    const file = path.join(dir, "c.json");
    await writeFile(file, "{}");
    expect(signaturesEqual(await getConfigSignature(file), await getConfigSignature(file))).toBe(true);
  });

  it("is null for a missing or deleted file", async () => {
    const file = path.join(dir, "gone.json");
    expect(await getConfigSignature(file)).toBeNull();
    await writeFile(file, "{}");
    expect(await getConfigSignature(file)).not.toBeNull();
    await unlink(file);
    expect(await getConfigSignature(file)).toBeNull();
  });

  it("has sha256 null when the path can be stat-ed but not read", async () => {
    const folder = path.join(dir, "folder.json");
    await mkdir(folder);
    const signature = await getConfigSignature(folder);
    expect(signature).not.toBeNull();
    expect(signature?.sha256).toBeNull();
  });

  it("hashes an empty file", async () => {
    const file = path.join(dir, "empty.json");
    await writeFile(file, "");
    expect((await getConfigSignature(file))?.sha256).toBe(sha(""));
  });

  it("agrees with readSignedFile, which returns the bytes it signed", async () => {
    const file = path.join(dir, "d.json");
    const text = JSON.stringify({ big: "x".repeat(200_000) });
    await writeFile(file, text);
    const signed = await readSignedFile(file);
    expect(signed.bytes.toString("utf8")).toBe(text);
    expect(signed.signature).toEqual(await getConfigSignature(file));
  });
});

describe("signaturesEqual", () => {
  const s: ConfigSignature = { mtimeMs: 1, size: 2, sha256: "ab" };
  it("compares all three fields and handles null", () => {
    expect(signaturesEqual(null, null)).toBe(true);
    expect(signaturesEqual(s, null)).toBe(false);
    expect(signaturesEqual(null, s)).toBe(false);
    expect(signaturesEqual(s, { ...s })).toBe(true);
    expect(signaturesEqual(s, { ...s, mtimeMs: 0 })).toBe(false);
    expect(signaturesEqual(s, { ...s, size: 3 })).toBe(false);
    expect(signaturesEqual(s, { ...s, sha256: null })).toBe(false);
    expect(signaturesEqual(s, { ...s, sha256: "cd" })).toBe(false);
  });
});
