/**
 * SPEC §5: `session_init_timeout` still bounds the handshake of every transport once it bounds a stdio start as a whole:
 * a stdio child that never answers `initialize` fails the call with the unchanged line (no step named) and is ended,
 * its thread's folder removed once it is gone; SSE still times out at the bound.
 */
import { afterEach, expect, test } from "@jest/globals";
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { McpServerSchema } from "../../lib/config/schema";
import { SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { StartStepTimeoutError } from "../../lib/sessions/start-failure";
import { threadPaths } from "../../lib/sessions/workspace";
import { DeadlineExceededError } from "../../lib/shared/deadline";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { alive } from "../fixtures/processes";
import { startSseFixture, type SseFixtureOptions } from "../fixtures/sse-server";

const toolkits: McpToolkit[] = [];
afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((toolkit) => toolkit.close()));
});

test("a stdio child that never answers initialize: the start fails at session_init_timeout without a step; the child is ended and the thread's folder removed by close()", async () => {
  const dataDir = await makeTempDir("mcp-start-handshake-data-");
  const log = path.join(await makeTempDir("mcp-start-handshake-log-"), "pid");
  const pool = new SessionPool(new RecordingLogger(), { dataDir });
  // Reads its input and never answers.
  const server = McpServerSchema.parse({ type: "stdio", command: "bash", args: ["-c", 'echo $$ > "$0"; exec sleep 600', log] });
  let failure: unknown;
  try {
    failure = await pool.acquire("mute", server, { headers: EMPTY_HEADERS, initTimeoutMs: 500, scope: sessionScope("u", "mute") }).then(
      () => undefined,
      (err: unknown) => err,
    );
  } finally {
    await pool.close();
  }
  expect(failure).toBeInstanceOf(DeadlineExceededError);
  expect(failure).not.toBeInstanceOf(StartStepTimeoutError);
  expect((failure as Error).message).toBe("timed out after 0.5s");
  const pid = Number(readFileSync(log, "utf8"));
  expect(alive(pid)).toBe(false);
  expect(existsSync(path.dirname(threadPaths(dataDir, "mute").userData))).toBe(false);
}, 30_000);

test("SSE: a server that never answers initialize fails the call at session_init_timeout with the usual line", async () => {
  const options: SseFixtureOptions = { name: "slow", toolNames: ["echo"] };
  const fx = await startSseFixture(options);
  try {
    const configPath = await writeConfig(await makeTempDir("mcp-start-handshake-sse-"), {
      mcpServers: { slow: { type: "sse", url: fx.url, session_init_timeout: 0.5, headers_from_context: { headers: { "X-Api-Key": "api_key" } } } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    toolkits.push(toolkit);
    const [echo] = await toolkit.getTools();
    options.hangOnInitialize = true;
    const message = (await echo.invoke(
      { type: "tool_call", id: "sse-1", name: echo.name, args: { text: "x" } },
      { context: { secrets: { api_key: "k-1" } } },
    )) as { status: string; content: unknown };
    expect({ status: message.status, content: message.content }).toEqual({
      status: "error",
      content: "MCP tool 'echo' on server 'slow' was not called: its MCP session did not start within 0.5s (session_init_timeout)",
    });
  } finally {
    await fx.close();
  }
}, 30_000);
