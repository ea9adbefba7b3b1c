/**
 * A timed-out call's ToolMessage names the bound that ended it with the seconds configured, not rounded to a tenth
 * (`tool_call_timeout: 0.04` read "timed out after 0.0s", `max_total_timeout: 0.25` read "0.3s").
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import type { ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { DeadlineExceededError } from "../../lib/shared/deadline";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";
import { stdioFixture } from "../fixtures/stdio";

let http: HttpFixture;
let toolkit: McpToolkit;
let tools: Record<string, DynamicStructuredTool>;

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["slow", "ticker"] });
  const configPath = await writeConfig(await makeTempDir("mcp-timeout-seconds-"), {
    mcpServers: {
      quick: { type: "stdio", ...stdioFixture({ name: "quick", toolNames: ["slow"] }), tool_call_timeout: 0.04 },
      capped: { type: "http", url: http.url, tool_call_timeout: 0.2, max_total_timeout: 0.25 },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  tools = Object.fromEntries((await toolkit.getTools()).map((t) => [t.name, t]));
});
afterAll(async () => {
  await toolkit?.close();
  await http?.close();
});

async function call(name: string, args: Record<string, unknown>): Promise<ToolMessage> {
  return (await tools[name].invoke({ type: "tool_call", id: `c-${name}`, name, args })) as ToolMessage;
}

test("tool_call_timeout: 0.04 says 0.04s", async () => {
  const message = await call("quick_slow", { ms: 5000 });
  expect(message.content).toBe("MCP tool 'slow' on server 'quick' failed: timed out after 0.04s without a result or progress (tool_call_timeout)");
});

test("max_total_timeout: 0.25 says 0.25s", async () => {
  const message = await call("capped_ticker", { intervalMs: 20, durationMs: 5000 });
  expect(message.content).toBe(
    "MCP tool 'ticker' on server 'capped' failed: timed out after 0.25s in total (max_total_timeout, which progress does not extend)",
  );
});

test("whole tenths keep their one decimal", () => {
  expect(new DeadlineExceededError(500).message).toBe("timed out after 0.5s");
  expect(new DeadlineExceededError(60_000).message).toBe("timed out after 60.0s");
  expect(new DeadlineExceededError(40).message).toBe("timed out after 0.04s");
  expect(new DeadlineExceededError(2_147_483_647, "maxTotal").message).toBe("reached its maximum total time of 2147483.647s");
});
