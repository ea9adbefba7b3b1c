import { describe, expect, test } from "@jest/globals";
import { spawn } from "node:child_process";
import { chmod, lstat, mkdir, readdir, readFile, readlink, stat, symlink, utimes, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import * as path from "node:path";
import { createGatewayApp, type GatewayUser } from "../../lib";
import { breakLockPathOf, breakStaleLock, lockPathOf, lockState, withConfigWriteLock, withFileLock } from "../../lib/gateway/file-lock";
import { atomicWriteFile, resolveWriteTarget, type WriteStep } from "../../lib/gateway/write";
import { makeTempDir, writeConfig } from "../fixtures/config";

const ADMIN: GatewayUser = { userId: "root", admin: true };
const STEPS: WriteStep[] = ["open", "write", "sync", "rename"];

async function exitedPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.once("exit", resolve));
  return child.pid ?? 0;
}

describe("atomicWriteFile", () => {
  test.each(STEPS)("a failure before '%s' leaves the old file byte-identical and no temp file", async (failing) => {
    const dir = await makeTempDir("gateway-write-");
    const file = await writeConfig(dir, { mcpServers: { a: { url: "https://a.example" } } });
    const before = await readFile(file);
    const seen: WriteStep[] = [];
    const onStep = (step: WriteStep) => {
      seen.push(step);
      if (step === failing) throw new Error(`injected failure at ${step}`);
    };
    await expect(atomicWriteFile(file, '{"mcpServers": {}}\n', { onStep })).rejects.toThrow(`injected failure at ${failing}`);
    expect(seen).toEqual(STEPS.slice(0, STEPS.indexOf(failing) + 1));
    expect((await readFile(file)).equals(before)).toBe(true);
    expect(await readdir(dir)).toEqual(["extensions_config.json"]);
  });

  test("a real rename failure (the target is a non-empty directory) removes the temp file", async () => {
    const dir = await makeTempDir("gateway-write-");
    const target = path.join(dir, "extensions_config.json");
    await mkdir(target);
    await writeFile(path.join(target, "keep"), "x");
    await expect(atomicWriteFile(target, "{}\n")).rejects.toThrow();
    expect(await readdir(dir)).toEqual(["extensions_config.json"]);
  });

  test("keeps the mode of the file it replaces; a new file gets 0600", async () => {
    const dir = await makeTempDir("gateway-write-");
    const file = await writeConfig(dir, {});
    await chmod(file, 0o604);
    await atomicWriteFile(file, '{"a": 1}\n');
    expect((await stat(file)).mode & 0o777).toBe(0o604);
    expect(await readFile(file, "utf8")).toBe('{"a": 1}\n');
    const fresh = path.join(dir, "new", "config.json");
    await atomicWriteFile(fresh, "{}\n");
    expect((await stat(fresh)).mode & 0o777).toBe(0o600);
  });

  test("writes through a chain of symlinks to the file, keeping the links; a dangling link gets its target created", async () => {
    const dir = await makeTempDir("gateway-write-");
    await mkdir(path.join(dir, "a", "b"), { recursive: true });
    const real = await writeConfig(path.join(dir, "a", "b"), {}, "real.json");
    await symlink("b/real.json", path.join(dir, "a", "hop.json"));
    await symlink("a/hop.json", path.join(dir, "config.json"));
    const target = await resolveWriteTarget(path.join(dir, "config.json"));
    expect(target).toBe(real);
    await atomicWriteFile(target, '{"x": 1}\n');
    expect(await readlink(path.join(dir, "config.json"))).toBe("a/hop.json");
    expect((await lstat(path.join(dir, "a", "hop.json"))).isSymbolicLink()).toBe(true);
    expect(await readFile(path.join(dir, "config.json"), "utf8")).toBe('{"x": 1}\n');

    await symlink("missing/later.json", path.join(dir, "dangling.json"));
    const later = await resolveWriteTarget(path.join(dir, "dangling.json"));
    expect(later).toBe(path.join(dir, "missing", "later.json"));
  });

  test("a link's '..' climbs from where its folder really is, when the folder is reached through a symlink", async () => {
    const dir = await makeTempDir("gateway-write-");
    await mkdir(path.join(dir, "real", "sub"), { recursive: true });
    const shared = await writeConfig(path.join(dir, "real"), { keep: 1 }, "shared.json");
    await symlink(path.join(dir, "real", "sub"), path.join(dir, "cfgdir"));
    await symlink("../shared.json", path.join(dir, "real", "sub", "extensions_config.json"));
    expect(await resolveWriteTarget(path.join(dir, "cfgdir", "extensions_config.json"))).toBe(shared);
  });
});

describe("config writes through the API when a step fails", () => {
  test.each(STEPS)("PUT failing before '%s': 500, old file byte-identical, no temp or lock file, no toolkit reset", async (failing) => {
    const dir = await makeTempDir("gateway-fail-");
    const file = await writeConfig(dir, { mcpServers: { a: { url: "https://a.example", headers: { Authorization: "$TOKEN" } } } });
    const before = await readFile(file);
    let resets = 0;
    const app = createGatewayApp({
      configPath: file,
      env: {},
      authorize: () => ADMIN,
      toolkit: { reset: () => void (resets += 1) },
      onWriteStep: (step) => {
        if (step === failing) throw Object.assign(new Error("disk full: secret-looking detail"), { code: "ENOSPC" });
      },
    });
    const response = await app.request("/api/mcp/config", { method: "PUT", body: JSON.stringify({ mcp_servers: { b: { url: "https://b.example" } } }) });
    expect(response.status).toBe(500);
    const text = await response.text();
    expect(text).toContain("ENOSPC");
    expect(text).not.toContain("secret-looking detail");
    expect((await readFile(file)).equals(before)).toBe(true);
    expect(await readdir(dir)).toEqual(["extensions_config.json"]);
    expect(resets).toBe(0);
  });
});

describe("the sidecar file lock", () => {
  test("a lock left by a process that no longer runs is broken and the write goes ahead", async () => {
    const dir = await makeTempDir("gateway-lock-");
    const file = await writeConfig(dir, {});
    const pid = await exitedPid();
    await writeFile(lockPathOf(file), JSON.stringify({ pid, host: hostname(), token: "dead", at: Date.now() }));
    const result = await withConfigWriteLock(file, async () => "ran", { timeoutMs: 5_000 });
    expect(result).toBe("ran");
    expect(await readdir(dir)).toEqual(["extensions_config.json"]);
  });

  test("a lock older than staleMs is broken whoever holds it (another host, a reused pid)", async () => {
    const dir = await makeTempDir("gateway-lock-");
    const file = await writeConfig(dir, {});
    await writeFile(lockPathOf(file), JSON.stringify({ pid: process.pid, host: "elsewhere", token: "old", at: 0 }));
    const old = new Date(Date.now() - 120_000);
    await utimes(lockPathOf(file), old, old);
    expect(await withConfigWriteLock(file, async () => "ran", { timeoutMs: 5_000, staleMs: 60_000 })).toBe("ran");
  });

  test("a live lock is waited for; when it is not released in time the API answers 503, writes nothing and leaves the lock alone", async () => {
    const dir = await makeTempDir("gateway-lock-");
    const file = await writeConfig(dir, { mcpServers: {} });
    const before = await readFile(file);
    const live = JSON.stringify({ pid: process.pid, host: hostname(), token: "someone-else", at: Date.now() });
    await writeFile(lockPathOf(file), live);
    const app = createGatewayApp({ configPath: file, env: {}, authorize: () => ADMIN, lock: { timeoutMs: 50 } });
    const response = await app.request("/api/mcp/config", { method: "PUT", body: JSON.stringify({ mcp_servers: { a: { url: "https://a.example" } } }) });
    expect(response.status).toBe(503);
    expect((await readFile(file)).equals(before)).toBe(true);
    expect(await readFile(lockPathOf(file), "utf8")).toBe(live);
  });

  test("releasing never removes a lock that is no longer ours (ours was judged stale and another process took over)", async () => {
    const dir = await makeTempDir("gateway-lock-");
    const file = await writeConfig(dir, {});
    const theirs = JSON.stringify({ pid: process.pid, host: hostname(), token: "took-over", at: Date.now() });
    await withConfigWriteLock(file, async () => {
      await writeFile(lockPathOf(file), theirs);
    });
    expect(await readFile(lockPathOf(file), "utf8")).toBe(theirs);
  });

  test("a breaker that judged a lock stale leaves alone the lock another breaker took meanwhile", async () => {
    const dir = await makeTempDir("gateway-lock-");
    const file = await writeConfig(dir, {});
    const lockPath = lockPathOf(file);
    await writeFile(lockPath, JSON.stringify({ pid: await exitedPid(), host: hostname(), token: "dead", at: Date.now() }));
    // This breaker read the dead owner's lock; before it acts, another process breaks it and takes the lock.
    const seen = await lockState(lockPath, 30_000);
    if (seen === "gone" || seen === "live") throw new Error(`expected a stale lock, got ${seen}`);
    await withFileLock(file, async () => {
      const taken = await readFile(lockPath, "utf8");
      expect(await breakStaleLock(lockPath, seen.stale, 30_000)).toBe(false);
      expect(await readFile(lockPath, "utf8")).toBe(taken);
    });
    expect(await readdir(dir)).toEqual(["extensions_config.json"]);
  });

  test("breakers take turns on the break lock; one left by a breaker that died is cleared for the next attempt", async () => {
    const dir = await makeTempDir("gateway-lock-");
    const file = await writeConfig(dir, {});
    const lockPath = lockPathOf(file);
    const stale = JSON.stringify({ pid: await exitedPid(), host: hostname(), token: "dead", at: Date.now() });
    await writeFile(lockPath, stale);
    // Another breaker is at work: nothing is deleted.
    await writeFile(breakLockPathOf(lockPath), JSON.stringify({ pid: process.pid, host: hostname(), token: "breaking", at: Date.now() }));
    expect(await breakStaleLock(lockPath, stale, 30_000)).toBe(false);
    expect(await readFile(lockPath, "utf8")).toBe(stale);
    // That breaker died holding the break lock: this attempt clears it, the next one breaks the stale lock.
    await writeFile(breakLockPathOf(lockPath), JSON.stringify({ pid: await exitedPid(), host: hostname(), token: "died", at: Date.now() }));
    expect(await breakStaleLock(lockPath, stale, 30_000)).toBe(false);
    expect(await readFile(lockPath, "utf8")).toBe(stale);
    expect(await breakStaleLock(lockPath, stale, 30_000)).toBe(true);
    expect(await readdir(dir)).toEqual(["extensions_config.json"]);
  });

  test("in one process, writers queue on the process lock: each read-modify-write sees the previous one", async () => {
    const dir = await makeTempDir("gateway-lock-");
    const file = await writeConfig(dir, { count: 0 });
    await Promise.all(
      Array.from({ length: 25 }, () =>
        withConfigWriteLock(file, async () => {
          const current = JSON.parse(await readFile(file, "utf8")) as { count: number };
          await atomicWriteFile(file, JSON.stringify({ count: current.count + 1 }));
        }),
      ),
    );
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual({ count: 25 });
  });
});
