/**
 * Results nested deeper than MAX_RESULT_DEPTH give a clear error line instead of a stack overflow in one of the walks
 * of a result (redaction, path translation, conversion); up to the bound, every walk works.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { MAX_RESULT_DEPTH } from "../../lib/mcp/call";
import { nestsDeeperThan } from "../../lib/shared/plain-object";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

const SECRET = "deep-s3cret-value";
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  const dir = await makeTempDir("mcp-nesting-");
  const configPath = await writeConfig(dir, { mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["nested"] }) } } });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: dir });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(() => toolkit.close());

const run = { context: { user_id: "u", secrets: { k: SECRET } }, configurable: { thread_id: "t" } };

function leafOf(value: unknown): unknown {
  let at = value;
  while (at !== null && typeof at === "object" && "a" in at) at = (at as { a: unknown }).a;
  return at;
}

test("a result nested just within the bound is read whole, its deepest string scrubbed", async () => {
  // The result itself, its structuredContent, then the objects the tool nested.
  const message = await callThroughGraph(graph, "local_nested", { depth: MAX_RESULT_DEPTH - 2, leaf: `key ${SECRET}` }, run);
  expect(message.status).toBe("success");
  const artifact = message.artifact as { structuredContent: unknown };
  expect(leafOf(artifact.structuredContent)).toBe("key [redacted]");
});

test("a result nested deeper gives one clear error line", async () => {
  const message = await callThroughGraph(graph, "local_nested", { depth: MAX_RESULT_DEPTH + 10, leaf: SECRET }, run);
  expect(message.status).toBe("error");
  expect(message.content).toBe(`MCP tool 'nested' on server 'local' failed: its result nests deeper than ${MAX_RESULT_DEPTH} levels and was not read`);
});

test("nestsDeeperThan counts arrays and plain objects, not strings, and measures any depth", () => {
  expect(nestsDeeperThan({ a: [{ b: "x" }] }, 3)).toBe(false);
  expect(nestsDeeperThan({ a: [{ b: {} }] }, 2)).toBe(true);
  expect(nestsDeeperThan("not nested", 0)).toBe(false);
  let deep: unknown = "leaf";
  for (let i = 0; i < 200_000; i += 1) deep = [deep];
  expect(nestsDeeperThan(deep, 1000)).toBe(true);
});
