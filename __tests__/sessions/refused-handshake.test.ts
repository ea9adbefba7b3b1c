/**
 * A stdio server that refuses the handshake (here: our protocol version) and runs on after its input ends, as one
 * holding a browser or a database pool may: the caller hears of the refusal at once, not after the seconds the SDK
 * gives such a child before a signal; close() ends the child.
 */
import { expect, test } from "@jest/globals";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { RecordingLogger } from "../../lib";
import { McpServerSchema } from "../../lib/config/schema";
import { SessionPool } from "../../lib/sessions/pool";
import { UnsupportedProtocolError } from "../../lib/sessions/protocol-version";
import { sessionScope } from "../../lib/sessions/scope";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { makeTempDir } from "../fixtures/config";
import { alive } from "../fixtures/processes";
import { stdioFixture } from "../fixtures/stdio";

test("a refused handshake fails the start while the child still runs; close() ends it", async () => {
  const dataDir = await makeTempDir("mcp-refused-handshake-");
  const pidFile = path.join(dataDir, "pid");
  const launch = stdioFixture({ mode: "refuse" });
  const server = McpServerSchema.parse({ type: "stdio", ...launch, env: { ...launch.env, FIXTURE_PID_FILE: pidFile } });
  const pool = new SessionPool(new RecordingLogger(), { dataDir });
  let pid: number | undefined;
  try {
    const failure = await pool.acquire("old", server, { headers: EMPTY_HEADERS, initTimeoutMs: 60_000, scope: sessionScope("u", "t") }).then(
      () => undefined,
      (err: unknown) => err,
    );
    pid = Number(readFileSync(pidFile, "utf8"));
    expect(failure).toBeInstanceOf(UnsupportedProtocolError);
    expect((failure as Error).message).toMatch(/^the MCP server 'old' does not accept this client's MCP protocol version \S+ \(it serves 2030-01-01\)$/);
    expect(alive(pid)).toBe(true);
  } finally {
    await pool.close();
  }
  expect(alive(pid)).toBe(false);
}, 60_000);
