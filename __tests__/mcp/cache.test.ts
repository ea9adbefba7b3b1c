import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import { readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";

let alpha: HttpFixture;
let bravo: HttpFixture;
const toolkits: McpToolkit[] = [];

beforeAll(async () => {
  alpha = await startHttpFixture({ name: "alpha", toolNames: ["echo"] });
  bravo = await startHttpFixture({ name: "bravo", toolNames: ["echo"] });
});
afterAll(async () => {
  await Promise.all([alpha.close(), bravo.close()]);
});
afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((t) => t.close()));
});

function track(toolkit: McpToolkit): McpToolkit {
  toolkits.push(toolkit);
  return toolkit;
}

/** Two configs of identical byte length that name different servers ("alpha"/"bravo" are both 5 letters). */
function configFor(server: "alpha" | "bravo") {
  return { mcpServers: { [server]: { type: "http", url: (server === "alpha" ? alpha : bravo).url } } };
}

async function names(toolkit: McpToolkit): Promise<string[]> {
  return (await toolkit.getTools()).map((t) => t.name).sort();
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("content-signature cache", () => {
  test("an edit with the same size and a restored mtime is detected", async () => {
    const dir = await makeTempDir("mcp-cache-");
    const file = await writeConfig(dir, configFor("alpha"));
    const pinned = new Date("2024-01-01T00:00:00Z");
    await utimes(file, pinned, pinned);
    const toolkit = track(createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger() }));
    expect(await names(toolkit)).toEqual(["alpha_echo"]);

    const before = await stat(file);
    const next = JSON.stringify(configFor("bravo"), null, 2) + "\n";
    expect(Buffer.byteLength(next)).toBe(before.size);
    await writeFile(file, next);
    await utimes(file, pinned, pinned);
    const after = await stat(file);
    expect(after.mtimeMs).toBe(before.mtimeMs);
    expect(after.size).toBe(before.size);

    expect(await names(toolkit)).toEqual(["bravo_echo"]);
  });

  test("switching MCP_HARNESS_CONFIG to an older file is detected", async () => {
    const dir = await makeTempDir("mcp-cache-");
    const older = await writeConfig(dir, configFor("bravo"), "older.json");
    const newer = await writeConfig(dir, configFor("alpha"), "newer.json");
    const past = new Date(Date.now() - 86_400_000);
    await utimes(older, past, past);
    const env: NodeJS.ProcessEnv = { MCP_HARNESS_CONFIG: newer };
    const toolkit = track(createMcpToolkit({ env, logger: new RecordingLogger() }));
    expect(await names(toolkit)).toEqual(["alpha_echo"]);
    env.MCP_HARNESS_CONFIG = older;
    expect(await names(toolkit)).toEqual(["bravo_echo"]);
  });

  test("deleting the file keeps the last tools", async () => {
    const dir = await makeTempDir("mcp-cache-");
    const file = await writeConfig(dir, configFor("alpha"));
    const logger = new RecordingLogger();
    const toolkit = track(createMcpToolkit({ configPath: file, env: {}, logger }));
    const first = await toolkit.getTools();
    await rm(file);
    const second = await toolkit.getTools();
    expect(second).toBe(first);
    // and they still work
    const message = await second[0].invoke({ type: "tool_call", id: "d1", name: second[0].name, args: { text: "still here" } });
    expect((message as { content: unknown }).content).toBe("still here");
    // loading for use stays loud about the vanished explicit path
    await toolkit.reset();
    await expect(toolkit.getTools()).rejects.toThrow(/configPath/);
  });

  test("an unchanged file is not reloaded and two concurrent first calls share one discovery", async () => {
    const counted = await startHttpFixture({ name: "counted", toolNames: ["echo"], initDelayMs: 150 });
    try {
      const dir = await makeTempDir("mcp-cache-");
      const file = await writeConfig(dir, { mcpServers: { counted: { url: counted.url } } });
      const toolkit = track(createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger() }));
      const [a, b] = await Promise.all([toolkit.getTools(), toolkit.getTools()]);
      expect(a).toBe(b);
      expect(counted.initializeCount()).toBe(1);
      expect(await toolkit.getTools()).toBe(a);
      expect(counted.initializeCount()).toBe(1);
      // A touch that changes nothing but mtime: the content is equal but the signature differs → reload.
      const now = new Date(Date.now() + 5000);
      await utimes(file, now, now);
      const c = await toolkit.getTools();
      expect(c).not.toBe(a);
      expect(counted.initializeCount()).toBe(2);
    } finally {
      await counted.close();
    }
  });

  test("a reset() during a load discards that load's result and the waiters get a fresh one", async () => {
    const slow = await startHttpFixture({ name: "slow", toolNames: ["echo"], initDelayMs: 300 });
    try {
      const dir = await makeTempDir("mcp-cache-");
      const file = await writeConfig(dir, { mcpServers: { slow: { url: slow.url } } });
      const logger = new RecordingLogger();
      const toolkit = track(createMcpToolkit({ configPath: file, env: {}, logger }));
      const pending = toolkit.getTools();
      await until(() => slow.initializeCount() === 1, "the first initialize");
      await toolkit.reset();
      const tools = await pending;
      expect(tools.map((t) => t.name)).toEqual(["slow_echo"]);
      expect(slow.initializeCount()).toBe(2);
      expect(logger.messages("info").some((m) => m.includes("discarding that load"))).toBe(true);
      // the first load's session was retired and closed: only the second session stays open
      await until(() => slow.activeSessionIds().length === 1, "the discarded session to close");
      expect(await toolkit.getTools()).toBe(tools);
    } finally {
      await slow.close();
    }
  });

  test("a content change during a load discards that load's result", async () => {
    const slow = await startHttpFixture({ name: "slow", toolNames: ["echo"], initDelayMs: 300 });
    try {
      const dir = await makeTempDir("mcp-cache-");
      const file = await writeConfig(dir, { mcpServers: { slow: { url: slow.url } } });
      const toolkit = track(createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger() }));
      const pending = toolkit.getTools();
      await until(() => slow.initializeCount() === 1, "the first initialize");
      await writeConfig(dir, { mcpServers: { slow: { url: slow.url, tool_name_prefix: false } } });
      expect((await pending).map((t) => t.name)).toEqual(["echo"]);
    } finally {
      await slow.close();
    }
  });

  test("an old tool keeps working after a reload, on the new generation's sessions", async () => {
    const dir = await makeTempDir("mcp-cache-");
    const file = await writeConfig(dir, configFor("alpha"));
    const toolkit = track(createMcpToolkit({ configPath: file, env: {}, logger: new RecordingLogger() }));
    const [old] = await toolkit.getTools();
    await writeFile(file, (await readFile(file, "utf8")).replace('"http"', '"http", "description": "x"'));
    await toolkit.getTools();
    const message = await old.invoke({ type: "tool_call", id: "o1", name: old.name, args: { text: "old wrapper" } });
    expect((message as { content: unknown }).content).toBe("old wrapper");
    // a removed server gives a clear error to its old wrappers
    await writeConfig(dir, configFor("bravo"));
    await toolkit.getTools();
    const gone = await old.invoke({ type: "tool_call", id: "o2", name: old.name, args: { text: "x" } });
    expect((gone as { content: unknown; status?: string }).status).toBe("error");
    expect((gone as { content: unknown }).content).toBe("MCP server 'alpha' is no longer configured; reload the tools");
  });

  test("search mode: deleting the file found in the working directory keeps the last tools", async () => {
    const dir = await makeTempDir("mcp-cache-");
    await writeFile(path.join(dir, "package.json"), "{}");
    const file = await writeConfig(dir, configFor("alpha"));
    const toolkit = track(createMcpToolkit({ cwd: dir, env: {}, logger: new RecordingLogger() }));
    const first = await toolkit.getTools();
    expect(first.map((t) => t.name)).toEqual(["alpha_echo"]);
    await rm(file);
    const second = await toolkit.getTools();
    expect(second).toBe(first);
    const message = await second[0].invoke({ type: "tool_call", id: "s1", name: second[0].name, args: { text: "still searched" } });
    expect((message as { content: unknown }).content).toBe("still searched");
  });

  test("search mode: a config file that appears later is picked up", async () => {
    const dir = await makeTempDir("mcp-cache-");
    await writeFile(path.join(dir, "package.json"), "{}");
    const toolkit = track(createMcpToolkit({ cwd: dir, env: {}, logger: new RecordingLogger() }));
    expect(await names(toolkit)).toEqual([]);
    await writeConfig(dir, configFor("alpha"), "mcp_config.json");
    expect(await names(toolkit)).toEqual(["alpha_echo"]);
  });
});
