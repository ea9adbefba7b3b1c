/**
 * A `${VAR}` password written percent-encoded into a URL's user info (as it must be) is a secret in its decoded form
 * too (`urlCredentials` reads the URL as the server will): the server decodes the URL and echoes the password as it
 * uses it.
 */
import { afterAll, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { STDIO_SERVER_PATH, stdioFixture, TSX_CJS_REGISTER } from "../fixtures/stdio";
import { echoForms } from "../fixtures/tools";

const ENCODED = "p%40ss%2Fw%3Ard-Kq9";
const DECODED = "p@ss/w:rd-Kq9";

const toolkits: McpToolkit[] = [];
afterAll(async () => {
  await Promise.all(toolkits.map((t) => t.close()));
});

describe("a server that decodes its URL and echoes the password", () => {
  test("the decoded password reaches neither the ToolMessage nor a log line, in any form", async () => {
    const fixture = stdioFixture({ name: "db", toolNames: ["leak"] });
    const script =
      'process.env.DECODED = decodeURIComponent(new URL(process.env.DB_URL).password); process.stderr.write("connecting with " + process.env.DECODED + "\\n");' +
      `require(${JSON.stringify(TSX_CJS_REGISTER)}); require(${JSON.stringify(STDIO_SERVER_PATH)});`;
    const logger = new RecordingLogger();
    const configPath = await writeConfig(await makeTempDir("mcp-decoded-secrets-"), {
      mcpServers: {
        db: { type: "stdio", command: process.execPath, args: ["-e", script], env: { ...fixture.env, DB_URL: "postgresql://app:${DB_PASSWORD}@db:5432/app" } },
      },
    });
    const toolkit = createMcpToolkit({ configPath, env: { DB_PASSWORD: ENCODED }, logger, dataDir: await makeTempDir("mcp-decoded-secrets-data-") });
    toolkits.push(toolkit);
    const message = await callThroughGraph(toolNodeGraph(await toolkit.getTools()), "db_leak", { env: ["DECODED"] }, { configurable: { thread_id: "t" } });
    expect(String(message.content)).toContain("[redacted]");
    const seen = [JSON.stringify(message.content), JSON.stringify(message.artifact ?? null), ...logger.messages()].join("\n");
    expect(logger.messages("debug")).toContain("MCP server 'db' stderr: connecting with [redacted]");
    for (const form of echoForms(DECODED)) expect(seen).not.toContain(form);
  });
});
