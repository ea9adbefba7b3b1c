import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { MAX_ERROR_TEXT_CHARS } from "../../lib/mcp/results";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import type { HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { PDF_HEADER_BASE64, TINY_PNG_BASE64 } from "../fixtures/tools";

let http: HttpFixture;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["fail", "resources"] });
  const dir = await makeTempDir("mcp-results-");
  const configPath = await writeConfig(dir, { mcpServers: { remote: { type: "http", url: http.url } } });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

describe("isError text is bounded at 4000 characters", () => {
  test("a longer text is cut to its first 4000 characters with a note saying how much was cut", async () => {
    expect(MAX_ERROR_TEXT_CHARS).toBe(4000);
    const head = "h".repeat(3999) + "|";
    const message = await callThroughGraph(graph, "remote_fail", { message: `${head}${"t".repeat(1234)}` });
    expect(message.status).toBe("error");
    expect(message.content).toBe(`${head}… [truncated 1234 characters]`);
  });

  test("exactly 4000 characters are kept whole", async () => {
    const text = "e".repeat(4000);
    expect((await callThroughGraph(graph, "remote_fail", { message: text })).content).toBe(text);
  });
});

describe("resource links and blob resources", () => {
  test("an image link becomes an image block by URL; blobs become image or file blocks with their MIME type", async () => {
    const message = await callThroughGraph(graph, "remote_resources", {});
    expect(message.status).toBe("success");
    expect(message.content).toEqual([
      { type: "image", url: "https://example.test/chart.png", mimeType: "image/png" },
      { type: "image", mimeType: "image/png", data: TINY_PNG_BASE64 },
      { type: "file", mimeType: "application/pdf", data: PDF_HEADER_BASE64 },
      { type: "file", mimeType: "application/octet-stream", data: "AAEC" },
    ]);
  });
});
