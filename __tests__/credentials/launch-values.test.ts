/**
 * A stdio server whose launch holds a `$VAR` value with a NUL byte (a toolkit `env` entry): Node refuses to spawn it
 * with ERR_INVALID_ARG_VALUE, whose message quotes the value through util.inspect (`'tok\x00…'`). That is not a
 * spawn system error (no `syscall`), so its text is only scrubbed: the redactor knows that `\x00` form too.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { stdioFixture } from "../fixtures/stdio";

const SECRET = "tok\u0000en-7Hq2Zp9x";
const logger = new RecordingLogger();
let toolkit: McpToolkit;

beforeAll(async () => {
  const launch = stdioFixture({ name: "nul", toolNames: ["echo"] });
  const configPath = await writeConfig(await makeTempDir("mcp-launch-nul-"), {
    mcpServers: { nul: { type: "stdio", command: launch.command, args: [...launch.args, "--token", "${API_TOKEN}"], env: launch.env } },
  });
  toolkit = createMcpToolkit({ configPath, env: { API_TOKEN: SECRET }, logger });
});
afterAll(async () => {
  await toolkit.close();
});

test("the discovery warning of a launch Node refuses shows no part of the $VAR value", async () => {
  await toolkit.getTools();
  const logged = logger.messages().join("\n");
  expect(logged).toContain("nul");
  for (const form of [SECRET, "en-7Hq2Zp9x", JSON.stringify(SECRET).slice(1, -1)]) expect(logged).not.toContain(form);
});
