import { afterEach, beforeEach, describe, expect, it } from "@jest/globals";
import { rm } from "node:fs/promises";
import {
  ConfigValidationError,
  DEFAULT_TOOL_CALL_TIMEOUT_SECONDS,
  loadExtensionsConfig,
  MAX_TIMEOUT_SECONDS,
} from "../../lib/config";
import { RecordingLogger } from "../../lib/shared/logger";
import { makeTempDir, writeConfig } from "../fixtures/config";

let dir: string;
beforeEach(async () => {
  dir = await makeTempDir("cfg-timeouts-");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(server: Record<string, unknown>) {
  const configPath = await writeConfig(dir, { mcpServers: { github: { command: "npx", ...server } } });
  return loadExtensionsConfig({ configPath, env: {}, logger: new RecordingLogger() });
}

const FIELDS = ["session_init_timeout", "tool_call_timeout", "max_total_timeout"] as const;

describe("timeouts are bounded by what a timer holds", () => {
  it.each(FIELDS)("%s above 2^31-1 ms is rejected with an error naming the field", async (field) => {
    const error = await load({ [field]: 1e10 }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(ConfigValidationError);
    const { issues, message } = error as ConfigValidationError;
    expect(issues.map((i) => i.path)).toEqual([`mcpServers.github.${field}`]);
    expect(message).toContain(`mcpServers.github.${field}: must be at most ${MAX_TIMEOUT_SECONDS} seconds`);
  });

  it.each(FIELDS)("%s at the limit loads", async (field) => {
    const loaded = await load({ [field]: MAX_TIMEOUT_SECONDS });
    expect(loaded.config.mcpServers.github?.[field]).toBe(MAX_TIMEOUT_SECONDS);
    expect(MAX_TIMEOUT_SECONDS * 1000).toBeLessThanOrEqual(2 ** 31 - 1);
  });

  it("tool_call_timeout defaults to DEFAULT_TOOL_CALL_TIMEOUT_SECONDS; null means no bound; max_total_timeout is optional", async () => {
    const defaults = (await load({})).config.mcpServers.github!;
    expect(defaults.tool_call_timeout).toBe(DEFAULT_TOOL_CALL_TIMEOUT_SECONDS);
    expect(DEFAULT_TOOL_CALL_TIMEOUT_SECONDS).toBe(60);
    expect(defaults.max_total_timeout).toBeUndefined();
    const unbounded = (await load({ tool_call_timeout: null, max_total_timeout: null })).config.mcpServers.github!;
    expect(unbounded.tool_call_timeout).toBeNull();
    expect(unbounded.max_total_timeout).toBeNull();
  });

  it("max_total_timeout must be positive", async () => {
    const error = (await load({ max_total_timeout: 0 }).catch((err: unknown) => err)) as ConfigValidationError;
    expect(error.issues.map((i) => i.path)).toEqual(["mcpServers.github.max_total_timeout"]);
  });
});

