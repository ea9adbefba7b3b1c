/**
 * Path translation of the parts of a stdio result other than its text and `structuredContent`, through a real fixture
 * child in a ToolNode graph with a checkpointer: what reaches the ToolMessage (its content and artifact, hence the
 * checkpoint) names the thread's files as `/mnt/user-data/…`, never by their host path.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { mkdir, realpath, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { MemorySaver } from "@langchain/langgraph";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

const V = "/mnt/user-data";

describe("the parts of a stdio result other than its text, through a ToolNode", () => {
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  let checkpointer: MemorySaver;
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await realpath(await makeTempDir("mcp-result-fields-"));
    const configPath = await writeConfig(await makeTempDir("mcp-result-fields-cfg-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["path_fields"] }) } },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
    checkpointer = new MemorySaver();
    graph = toolNodeGraph(await toolkit.getTools(), checkpointer);
  });
  afterAll(async () => {
    await toolkit.close();
  });
  const runIn = (thread: string) => ({ context: { user_id: "u" }, configurable: { thread_id: thread } });
  const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");
  const withFile = async (thread: string, name: string) => {
    const ws = workspaceOf(thread);
    await mkdir(ws, { recursive: true });
    await writeFile(path.join(ws, name), "x");
    return path.join(ws, name);
  };
  /** The thread's last checkpoint, as JSON: what a saver would store. */
  const checkpointOf = async (thread: string) => JSON.stringify((await graph.getState(runIn(thread))).values);

  test("a result's _meta naming an existing file of the thread: shown as /mnt/user-data/… in the artifact and the checkpoint", async () => {
    const thread = "meta";
    await withFile(thread, "report.txt");
    const message = await callThroughGraph(graph, "local_path_fields", { path: "report.txt", part: "meta" }, runIn(thread));
    expect(message.content).toBe("ok");
    expect((message.artifact as { meta?: unknown }).meta).toEqual({
      file: `${V}/workspace/report.txt`,
      link: `${V}/workspace/report.txt`,
      note: `saved to ${V}/workspace/report.txt.`,
      files: [{ path: `${V}/workspace/report.txt` }],
    });
    expect(await checkpointOf(thread)).not.toContain(dataDir);
  });

  test("a result's _meta naming a missing file or one outside user-data is left as the server sent it", async () => {
    const outside = path.join(await makeTempDir("mcp-result-fields-outside-"), "elsewhere.txt");
    await writeFile(outside, "x");
    const missing = await callThroughGraph(graph, "local_path_fields", { path: "missing.txt", part: "meta" }, runIn("meta-missing"));
    expect((missing.artifact as { meta?: { file?: unknown } }).meta?.file).toBe(path.join(workspaceOf("meta-missing"), "missing.txt"));
    const away = await callThroughGraph(graph, "local_path_fields", { path: outside, part: "meta" }, runIn("meta-outside"));
    expect((away.artifact as { meta?: unknown }).meta).toEqual({
      file: outside,
      link: pathToFileURL(outside).href,
      note: `saved to ${outside}.`,
      files: [{ path: outside }],
    });
  });

  test("a host path the call was given for the model's /mnt/user-data one is shown back as it wrote it in _meta, file or not", async () => {
    const thread = "meta-named";
    await mkdir(workspaceOf(thread), { recursive: true });
    const message = await callThroughGraph(graph, "local_path_fields", { path: `${V}/workspace/not-yet.txt`, part: "meta" }, runIn(thread));
    expect((message.artifact as { meta?: unknown }).meta).toEqual({
      file: `${V}/workspace/not-yet.txt`,
      link: `file://${V}/workspace/not-yet.txt`,
      note: `saved to ${V}/workspace/not-yet.txt.`,
      files: [{ path: `${V}/workspace/not-yet.txt` }],
    });
  });

  test("a _meta key the protocol reserves (a related task's id) is left as the server sent it, file or named path", async () => {
    const thread = "meta-task";
    const host = await withFile(thread, "job.json");
    const message = await callThroughGraph(graph, "local_path_fields", { path: "job.json", part: "task" }, runIn(thread));
    expect((message.artifact as { meta?: unknown }).meta).toEqual({
      "io.modelcontextprotocol/related-task": { taskId: host },
      file: `${V}/workspace/job.json`,
    });
    // The thread's host path given for the model's /mnt/user-data one (another thread: one call per checkpoint here).
    const other = await withFile("meta-task-named", "job.json");
    const named = await callThroughGraph(graph, "local_path_fields", { path: `${V}/workspace/job.json`, part: "task" }, runIn("meta-task-named"));
    expect((named.artifact as { meta?: unknown }).meta).toEqual({
      "io.modelcontextprotocol/related-task": { taskId: other },
      file: `${V}/workspace/job.json`,
    });
  });

  test("a _meta key of the server's own that only carries an mcp label (com.example.mcp/, mcp/) is translated", async () => {
    // Reserved is a prefix whose second label is mcp or modelcontextprotocol (2025-11-25), or one such label not last
    // (2025-06-18): neither reserves these, so they are the server's data, and a host path there is the thread's.
    const thread = "meta-vendor";
    await withFile(thread, "out.txt");
    const message = await callThroughGraph(graph, "local_path_fields", { path: "out.txt", part: "vendor" }, runIn(thread));
    expect((message.artifact as { meta?: unknown }).meta).toEqual({
      "com.example.mcp/output": { file: `${V}/workspace/out.txt` },
      "mcp/file": `${V}/workspace/out.txt`,
    });
    expect(await checkpointOf(thread)).not.toContain(dataDir);
  });

  test.each(["link", "embedded", "blob"])("a %s item naming an existing file of the thread leaves no host path in the ToolMessage or checkpoint", async (part) => {
    const thread = `item-${part}`;
    await withFile(thread, "report.txt");
    const message = await callThroughGraph(graph, "local_path_fields", { path: "report.txt", part }, runIn(thread));
    expect(message.status).toBe("success");
    expect(JSON.stringify({ content: message.content, artifact: message.artifact })).not.toContain(dataDir);
    expect(await checkpointOf(thread)).not.toContain(dataDir);
  });
});
