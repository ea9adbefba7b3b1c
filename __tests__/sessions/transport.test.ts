import { expect, test } from "@jest/globals";
import { McpServerSchema, RecordingLogger } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { stdioFixture } from "../fixtures/stdio";
import * as path from "node:path";
import { REDACTED } from "../../lib/shared/redact";
import { pidsWithMarker, waitUntil } from "../fixtures/processes";

const SH_SERVER = path.join(__dirname, "..", "fixtures", "sh-server.sh");

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

/**
 * The stderr lines logged for the server (sh-server.sh) run behind a shell that started a background process sharing
 * its stderr: when the session closes, the shell writes `lastWrite` (quoting `$API_TOKEN`, the secret) without a final
 * newline and exits, while the background process still holds the pipe. Waits until `awaited` is logged.
 */
async function stderrOfEndedChild(secret: string, lastWrite: string, awaited: string, sleeper: string): Promise<string[]> {
  const script = `sleep ${sleeper} & bash "$0"; printf ${lastWrite} >&2`;
  const server = McpServerSchema.parse({ type: "stdio", command: "bash", args: ["-c", script, SH_SERVER], env: { API_TOKEN: secret } });
  const logger = new RecordingLogger();
  const pool = new SessionPool(logger, { secretsFor: () => [secret] });
  try {
    (await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: null })).release();
  } finally {
    await pool.close();
  }
  expect(pidsWithMarker(sleeper)).toEqual([]);
  const stderr = () => logger.messages("debug").filter((m) => m.startsWith("MCP server 'local' stderr: "));
  expect(await waitUntil(() => stderr().some((m) => m.includes(awaited)))).toBe(true);
  return stderr();
}

test("a stdio child that ends while a process it started holds its stderr: its last lines still reach the log, scrubbed", async () => {
  // A line held back as a possible wrapped base64 run, then a last line without a newline quoting the whole secret.
  const lines = await stderrOfEndedChild("tok-last-words-7Qx", `'closing\\nQUJDREVGR0hJSktMTU5PUA==\\nlast words: %s' "$API_TOKEN"`, "last words", `31${process.pid}.7`);
  expect(lines).toEqual([
    "MCP server 'local' stderr: closing",
    "MCP server 'local' stderr: QUJDREVGR0hJSktMTU5PUA==",
    `MCP server 'local' stderr: last words: ${REDACTED}`,
  ]);
});

test("a stdio child that ends while a process it started holds its stderr, in the middle of a line: its last word is not logged", async () => {
  // The last line stops after the first characters of the secret (the rest of a write never came).
  const lines = await stderrOfEndedChild("tok-cut-short-8Rw", `'closing\\nusage: server --token %s' "\${API_TOKEN:0:4}"`, "usage", `32${process.pid}.7`);
  expect(lines).toEqual(["MCP server 'local' stderr: closing", "MCP server 'local' stderr: usage: server --token [cut]"]);
});

test("a stdio child that ends while a process it started holds its stderr, in the middle of a passphrase: none of its first words is logged", async () => {
  // The last line stops in the third word of a secret holding spaces: the last word alone would leave the first two.
  const lines = await stderrOfEndedChild("correct horse battery staple", `'closing\\nlogin with %s' "\${API_TOKEN% *}"`, "login", `33${process.pid}.7`);
  expect(lines).toEqual(["MCP server 'local' stderr: closing", "MCP server 'local' stderr: login with [cut]"]);
});
