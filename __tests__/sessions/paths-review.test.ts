/**
 * Path translation and workspace changes of stdio results, through real fixture children in a ToolNode: cases a
 * review found.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { mkdir, realpath, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { MAX_SNAPSHOT_ENTRIES } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

const V = "/mnt/user-data";

describe("through a stdio tool in a ToolNode", () => {
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await realpath(await makeTempDir("mcp-paths-review-"));
    const configPath = await writeConfig(await makeTempDir("mcp-paths-review-cfg-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["write_file"] }) } },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit.close();
  });
  const runIn = (thread: string) => ({ context: { user_id: "u" }, configurable: { thread_id: thread } });
  const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");

  test.each([",", ";"])("paths joined by '%s' without a space (a CSV row) are each shown as /mnt/user-data/…", async (glue) => {
    const thread = `joined-${glue === "," ? "comma" : "semicolon"}`;
    const ws = workspaceOf(thread);
    await callThroughGraph(graph, "local_write_file", { path: "out/a.csv", content: "a", say: "ok" }, runIn(thread));
    const say = `1${glue}${ws}/out/a.csv${glue}${ws}/out/b.csv${glue}./out/a.csv${glue}out/b.csv`;
    const message = await callThroughGraph(graph, "local_write_file", { path: "out/b.csv", content: "b", say }, runIn(thread));
    expect(message.content).toBe(`1${glue}${V}/workspace/out/a.csv${glue}${V}/workspace/out/b.csv${glue}${V}/workspace/out/a.csv${glue}${V}/workspace/out/b.csv`);
  });

  test("a folder whose name holds ',' followed by a path segment is still read whole", async () => {
    const thread = "comma-folder";
    const message = await callThroughGraph(graph, "local_write_file", { path: "2024,/q1.csv", content: "a" }, runIn(thread));
    expect(message.content).toBe(`wrote ${V}/workspace/2024,/q1.csv`);
  });

  test("a file:// link's fragment (a line anchor) is kept after the path it is rewritten to", async () => {
    const thread = "fragment";
    const ws = workspaceOf(thread);
    await mkdir(ws, { recursive: true });
    await writeFile(path.join(ws, "main.py"), "print(1)\n");
    const url = `${pathToFileURL(path.join(ws, "main.py")).href}#L1`;
    const message = await callThroughGraph(graph, "local_write_file", { path: ".mcp/tmp/x", content: "x", say: `error at ${url}: boom` }, runIn(thread));
    expect(message.content).toBe(`error at ${V}/workspace/main.py#L1: boom`);
  });

  test("a file: URI with one slash (Java's File.toURI) is rewritten as a file:// one; a missing file's is left as it is", async () => {
    const thread = "one-slash";
    const ws = workspaceOf(thread);
    await mkdir(ws, { recursive: true });
    await writeFile(path.join(ws, "Main.java"), "class Main {}\n");
    const say = `compiled file:${ws}/Main.java, not file:${ws}/Gone.java`;
    const message = await callThroughGraph(graph, "local_write_file", { path: ".mcp/tmp/x", content: "x", say }, runIn(thread));
    expect(message.content).toBe(`compiled ${V}/workspace/Main.java, not file:${ws}/Gone.java`);
  });

  test("a path through another thread's folder, climbing back with '..', does not tell whether that folder exists", async () => {
    const victim = workspaceOf("victim");
    await mkdir(path.join(victim, "private-plans"), { recursive: true });
    const thread = "prober";
    await callThroughGraph(graph, "local_write_file", { path: "report.txt", content: "x", say: "ok" }, runIn(thread));
    const via = (folder: string) => `${path.join(victim, folder)}/../../../../${thread}/user-data/workspace/report.txt`;
    const say = `${via("private-plans")} ${via("no-such-folder")}`;
    const message = await callThroughGraph(graph, "local_write_file", { path: ".mcp/tmp/x", content: "x", say }, runIn(thread));
    expect(message.content).toBe(say);
  });

  test.each(["Q1 Report.pdf", "notes (draft).md", "it's.txt"])("the host path of a file the call wrote, its name holding '%s', is shown as /mnt/user-data/…", async (name) => {
    const thread = `spaced-${name.replace(/[^a-z0-9]/gi, "")}`;
    const message = await callThroughGraph(graph, "local_write_file", { path: `out/${name}`, content: "x" }, runIn(thread));
    expect(message.content).toBe(`wrote ${V}/workspace/out/${name}`);
  });

  test(`a workspace of more than ${MAX_SNAPSHOT_ENTRIES} entries: the artifact says its changes were not listed`, async () => {
    const thread = "huge";
    const many = path.join(workspaceOf(thread), "data");
    await mkdir(many, { recursive: true });
    for (let i = 0; i <= MAX_SNAPSHOT_ENTRIES; i += 500) {
      await Promise.all(Array.from({ length: 500 }, (_, j) => writeFile(path.join(many, `f${i + j}`), "")));
    }
    const message = await callThroughGraph(graph, "local_write_file", { path: "report.txt", content: "x", say: "ok" }, runIn(thread));
    expect(message.content).toBe("ok");
    expect(message.artifact).toEqual({ note: expect.stringContaining("workspace_changes not listed") });
  });
});

describe("bare names of changed files", () => {
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  beforeAll(async () => {
    const dataDir = await realpath(await makeTempDir("mcp-paths-review-bare-"));
    const configPath = await writeConfig(await makeTempDir("mcp-paths-review-bare-cfg-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["write_file"] }) } },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit.close();
  });

  test.each([
    ["output", "Wrote the output: 3 lines of output."],
    ["a", "Created a file."],
    ["my notes", "Saved my notes."],
  ])("a name without an extension (%s) is an ordinary word in the text: left as it is, and listed", async (name, say) => {
    const run = { context: { user_id: "u" }, configurable: { thread_id: `bare-${name.replace(/ /g, "-")}` } };
    const message = await callThroughGraph(graph, "local_write_file", { path: `out/${name}`, content: "x", say }, run);
    expect(message.content).toBe(say);
    expect(message.artifact).toEqual({ workspace_changes: [`${V}/workspace/out/${name}`] });
  });

  test("a name with an extension, or a dotfile's, is still rewritten", async () => {
    const run = { context: { user_id: "u" }, configurable: { thread_id: "bare-ext" } };
    expect((await callThroughGraph(graph, "local_write_file", { path: "out/notes.md", content: "x", say: "Saved notes.md." }, run)).content).toBe(
      `Saved ${V}/workspace/out/notes.md.`,
    );
    expect((await callThroughGraph(graph, "local_write_file", { path: "cfg/.env", content: "x", say: "Set it in .env" }, run)).content).toBe(
      `Set it in ${V}/workspace/cfg/.env`,
    );
  });
});
