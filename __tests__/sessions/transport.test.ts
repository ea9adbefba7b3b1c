import { expect, test } from "@jest/globals";
import { McpServerSchema, RecordingLogger } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { stdioFixture } from "../fixtures/stdio";
import { waitUntil } from "../fixtures/processes";

test("a stdio child's stderr reaches the debug log with terminal controls shown, not acted on", async () => {
  const launch = stdioFixture({ name: "local", toolNames: ["pid"] });
  // Clears the screen, retitles the terminal and forges a log line of its own with a lone CR.
  const noise = String.raw`\033[2J\033]0;pwned\007hello\r[mcp-harness] FORGED warning\n`;
  const server = McpServerSchema.parse({
    type: "stdio",
    command: "sh",
    args: ["-c", `printf '${noise}' >&2; exec "$0" "$@"`, launch.command, ...launch.args],
    env: launch.env,
  });
  const logger = new RecordingLogger();
  const pool = new SessionPool(logger);
  try {
    (await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null })).release();
    const logged = () => logger.messages("debug").find((m) => m.includes("hello"));
    expect(await waitUntil(() => logged() !== undefined)).toBe(true);
    expect(logged()).toBe(String.raw`MCP server 'local' stderr: \x1b[2J\x1b]0;pwned\x07hello\r[mcp-harness] FORGED warning`);
  } finally {
    await pool.close();
  }
});
