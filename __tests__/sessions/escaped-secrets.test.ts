/**
 * A credential written with backslash escapes (`a\tb`, `q\\z`) that a server decodes (printf %b, echo -e, a JSON or C
 * string literal) comes back as the characters the escapes stand for. Whatever shows those characters again escaped
 * spells the credential as written: the stderr log line (control characters shown as `\t`, `\x01`), the ToolMessage as
 * JSON (a chat API's request) and the checkpoint. Short ones too: their decoded form is a few characters.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import { MemorySaver } from "@langchain/langgraph";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { callThroughGraph, seenByModel, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { waitUntil } from "../fixtures/processes";
import { stdioFixture } from "../fixtures/stdio";
import { echoForms } from "../fixtures/tools";

/** Each a `$VAR` of the server's env, as written (backslashes and all). */
const SECRETS: Readonly<Record<string, string>> = {
  TAB: "a\\tb",
  CONTROL: "k\\x01",
  BACKSLASH: "q\\\\z",
  QUOTE: 'p\\"w',
  TRAILING: "xyz\\n",
  // JSON writes a lone surrogate as its escape again (a pair, an emoji, as it is).
  SURROGATE: "\\ud800ab",
  LOW_SURROGATE: "z\\udc00",
  // A log line writes these as their escapes again (JSON leaves them as they are).
  LINE_SEPARATOR: "a\\u2028b",
  BIDI_OVERRIDE: "a\\u202eb",
};

const logger = new RecordingLogger();
const checkpointer = new MemorySaver();
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  const dir = await makeTempDir("mcp-escaped-secrets-");
  const launch = stdioFixture({ name: "esc", toolNames: ["unescape_env"] });
  const env = Object.fromEntries(Object.keys(SECRETS).map((name) => [name, `\${${name}}`]));
  const configPath = await writeConfig(dir, { mcpServers: { esc: { type: "stdio", ...launch, env: { ...launch.env, ...env } } } });
  toolkit = createMcpToolkit({ configPath, env: { ...SECRETS }, logger, dataDir: dir });
  graph = toolNodeGraph(await toolkit.getTools(), checkpointer);
});
afterAll(async () => {
  await toolkit.close();
});

test.each(Object.keys(SECRETS))("a server's decoded %s credential reaches no ToolMessage, checkpoint or stderr log line as written", async (name) => {
  const secret = SECRETS[name];
  const threadId = `esc-${name}`;
  const stderrLines = () => logger.messages().filter((line) => line.startsWith("MCP server 'esc' stderr: decoded ")).length;
  const before = stderrLines();
  const message = await callThroughGraph(graph, "esc_unescape_env", { env: name }, { configurable: { thread_id: threadId } });
  expect(String(message.content)).toMatch(/^decoded /);
  const checkpoints: string[] = [];
  for await (const tuple of checkpointer.list({ configurable: { thread_id: threadId } })) checkpoints.push(JSON.stringify(tuple));
  // stderr is another pipe than the answer's: its line may come after the answer.
  expect(await waitUntil(() => stderrLines() > before)).toBe(true);
  const logged = logger.messages().join("\n");
  const surfaces = { "the ToolMessage": seenByModel(message), "the checkpoint": checkpoints.join("\n"), "the log": logged };
  const found = Object.entries(surfaces).flatMap(([where, text]) => echoForms(secret).filter((form) => text.includes(form)).map((form) => `${where}: ${form}`));
  expect(found).toEqual([]);
});
