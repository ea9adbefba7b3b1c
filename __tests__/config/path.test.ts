import { afterEach, beforeEach, describe, expect, it } from "@jest/globals";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { ConfigFileNotFoundError, loadExtensionsConfig, resolveExtensionsConfigPath } from "../../lib/config";

let root: string;
let cwd: string;

beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), "cfg-path-"));
  cwd = path.join(root, "packages", "app");
  await mkdir(cwd, { recursive: true });
  await writeFile(path.join(root, "package.json"), "{}");
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const touch = (file: string) => writeFile(file, "{}");

describe("resolveExtensionsConfigPath", () => {
  it("prefers the explicit configPath, resolved against cwd", async () => {
    await touch(path.join(cwd, "mine.json"));
    await touch(path.join(cwd, "extensions_config.json"));
    await touch(path.join(root, "env.json"));
    const env = { MCP_HARNESS_CONFIG: path.join(root, "env.json") };
    expect(resolveExtensionsConfigPath({ configPath: "mine.json", cwd, env })).toBe(path.join(cwd, "mine.json"));
  });

  it("throws ConfigFileNotFoundError naming the configPath option and the path", () => {
    const attempt = () => resolveExtensionsConfigPath({ configPath: "nope.json", cwd, env: {} });
    expect(attempt).toThrow(ConfigFileNotFoundError);
    try {
      attempt();
    } catch (err) {
      const error = err as ConfigFileNotFoundError;
      expect(error.source).toBe("configPath");
      expect(error.message).toContain("`configPath`");
      expect(error.message).toContain(path.join(cwd, "nope.json"));
    }
  });

  it("uses MCP_HARNESS_CONFIG before the search, relative to cwd", async () => {
    await touch(path.join(cwd, "extensions_config.json"));
    await touch(path.join(cwd, "custom.json"));
    expect(resolveExtensionsConfigPath({ cwd, env: { MCP_HARNESS_CONFIG: "custom.json" } })).toBe(
      path.join(cwd, "custom.json"),
    );
  });

  it("throws ConfigFileNotFoundError naming MCP_HARNESS_CONFIG when its file is missing", () => {
    const missing = path.join(root, "gone.json");
    const attempt = () => resolveExtensionsConfigPath({ cwd, env: { MCP_HARNESS_CONFIG: missing } });
    expect(attempt).toThrow(/environment variable `MCP_HARNESS_CONFIG` not found at/);
    try {
      attempt();
    } catch (err) {
      expect((err as ConfigFileNotFoundError).source).toBe("MCP_HARNESS_CONFIG");
      expect((err as Error).message).toContain(missing);
    }
  });

  it("ignores an empty MCP_HARNESS_CONFIG", async () => {
    await touch(path.join(cwd, "extensions_config.json"));
    expect(resolveExtensionsConfigPath({ cwd, env: { MCP_HARNESS_CONFIG: "" } })).toBe(
      path.join(cwd, "extensions_config.json"),
    );
  });

  it("searches extensions_config.json, then mcp_config.json, in cwd then the project root", async () => {
    const env = {};
    expect(resolveExtensionsConfigPath({ cwd, env })).toBeNull();

    await touch(path.join(root, "mcp_config.json"));
    expect(resolveExtensionsConfigPath({ cwd, env })).toBe(path.join(root, "mcp_config.json"));

    await touch(path.join(root, "extensions_config.json"));
    expect(resolveExtensionsConfigPath({ cwd, env })).toBe(path.join(root, "extensions_config.json"));

    await touch(path.join(cwd, "mcp_config.json"));
    expect(resolveExtensionsConfigPath({ cwd, env })).toBe(path.join(cwd, "mcp_config.json"));

    await touch(path.join(cwd, "extensions_config.json"));
    expect(resolveExtensionsConfigPath({ cwd, env })).toBe(path.join(cwd, "extensions_config.json"));
  });

  it("does not pick a directory named like a config file", async () => {
    await mkdir(path.join(cwd, "extensions_config.json"));
    await touch(path.join(cwd, "mcp_config.json"));
    expect(resolveExtensionsConfigPath({ cwd, env: {} })).toBe(path.join(cwd, "mcp_config.json"));
  });

  it("an empty config when nothing is found", async () => {
    const loaded = await loadExtensionsConfig({ cwd, env: {} });
    expect(loaded.path).toBeNull();
    expect(loaded.signature).toBeNull();
    expect(loaded.config.mcpServers).toEqual({});
    expect(loaded.skipped).toEqual([]);
  });

  it("loading an explicit missing file stays loud", async () => {
    await expect(loadExtensionsConfig({ configPath: "missing.json", cwd, env: {} })).rejects.toBeInstanceOf(
      ConfigFileNotFoundError,
    );
  });
});
