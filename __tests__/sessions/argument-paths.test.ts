/**
 * The model sees the thread's files as /mnt/user-data/…; when it hands such a path back to a stdio tool, the server
 * is sent the host path of the thread's user-data folder, and the server's echo of it is shown as the model wrote it.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { readFile, realpath } from "node:fs/promises";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import type { ToolMessage } from "@langchain/core/messages";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { hostArguments, threadFolderName, withNamedPaths } from "../../lib/sessions";
import type { McpToolInterceptor } from "../../lib/shared/interceptor";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolCalls, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";
import { stdioFixture } from "../fixtures/stdio";

const V = "/mnt/user-data";
const HOST = "/data/threads/t/user-data";

function sent(value: unknown): unknown {
  return (hostArguments({ value }, HOST)?.args ?? { value }).value;
}

describe("hostArguments", () => {
  test.each([
    ["a whole path", `${V}/workspace/a.txt`, `${HOST}/workspace/a.txt`],
    ["a whole path with spaces", `${V}/workspace/Q1 report.pdf`, `${HOST}/workspace/Q1 report.pdf`],
    ["the folder itself", V, HOST],
    ["a file:// URL", `file://${V}/workspace/my%20file.txt#L3`, `${pathToFileURL(HOST).href}/workspace/my%20file.txt#L3`],
    ["'..' that stays inside", `${V}/workspace/../outputs/r.md`, `${HOST}/workspace/../outputs/r.md`],
  ])("translated: %s", (_name, input, expected) => {
    expect(sent(input)).toBe(expected);
  });

  test.each([
    ["a path leaving the folder with '..'", `${V}/../../etc/passwd`],
    ["a path leaving it after a space", `${V}/workspace/a b/../../../x`],
    ["paths in a command line", `cat ${V}/workspace/a.txt ${V}/outputs/b.md|wc -l`],
    ["a path after an option", `--out=${V}/outputs/r.md`],
    ["a file's content linking a path (for a UI that knows the folder)", `# Report\n![chart](${V}/outputs/chart.png)`],
    ["two paths", `${V}/a.txt ${V}/b.txt`],
    ["a path and a second line", `${V}/a.txt\nmore`],
    ["a longer folder name", `${V}-old/a.txt`],
    ["a path inside a URL", `https://example.com${V}/a.txt`],
    ["a remote path (scp)", `host:${V}/a.txt`],
    ["a path inside a longer path", `/srv${V}/a.txt`],
    ["an encoded '..' in a URL", `file://${V}/%2e%2e/%2e%2e/etc/passwd`],
    ["a NUL", `${V}/a\u0000b`],
  ])("left as it is: %s", (_name, input) => {
    expect(sent(input)).toBe(input);
    expect(hostArguments({ value: input }, HOST)).toBeUndefined();
  });

  test("strings at any depth are read, keys are not, and untouched parts are the same objects", () => {
    const untouched = { n: 1, list: ["plain"] };
    const args = { [`${V}/key`]: { deep: [[`${V}/a.txt`]] }, untouched };
    const out = hostArguments(args, HOST)!;
    expect(out.args).toEqual({ [`${V}/key`]: { deep: [[`${HOST}/a.txt`]] }, untouched });
    expect(out.args.untouched).toBe(untouched);
    expect([...out.named]).toEqual([[`${HOST}/a.txt`, `${V}/a.txt`]]);
    expect(hostArguments({ a: "x", b: [1, { c: "y" }] }, HOST)).toBeUndefined();
  });

  test("the server's echo of a named host path is shown as the model wrote it, a longer name first", () => {
    const named = new Map([
      [`${HOST}/workspace`, `${V}/workspace`],
      [`${HOST}/workspace/new file.txt`, `${V}/workspace/new file.txt`],
    ]);
    const result = withNamedPaths(
      {
        content: [
          { type: "text", text: `ENOENT: open '${HOST}/workspace/new file.txt' in ${HOST}/workspace` },
          { type: "resource_link", uri: `${HOST}/workspace/new file.txt`, name: "f" },
        ],
        structuredContent: { path: `${HOST}/workspace/new file.txt`, taskId: `${HOST}/workspace` },
      },
      named,
      ["taskId"],
    );
    expect(result.content).toEqual([
      { type: "text", text: `ENOENT: open '${V}/workspace/new file.txt' in ${V}/workspace` },
      { type: "resource_link", uri: `${V}/workspace/new file.txt`, name: "f" },
    ]);
    expect(result.structuredContent).toEqual({ path: `${V}/workspace/new file.txt`, taskId: `${HOST}/workspace` });
  });
});

describe("the echo of a named host path", () => {
  const named = (value: string) => hostArguments({ value }, HOST)!.named;
  const restoreNamedPaths = (text: string, map: ReadonlyMap<string, string>): unknown =>
    withNamedPaths({ content: [{ type: "text", text }] }, map).content[0];

  test("is not restored where it is the tail of a longer path or URL, which names something else", () => {
    const map = named(`${V}/outputs/a.txt`);
    const text = [
      `saved ${HOST}/outputs/a.txt`,
      `backup /var/backups${HOST}/outputs/a.txt`,
      `download http://127.0.0.1:8000${HOST}/outputs/a.txt`,
      `copied to host:${HOST}/outputs/a.txt`,
      `link file://${HOST}/outputs/a.txt`,
    ].join("\n");
    expect(restoreNamedPaths(text, map)).toEqual({
      type: "text",
      text: [
        `saved ${V}/outputs/a.txt`,
        `backup /var/backups${HOST}/outputs/a.txt`,
        `download http://127.0.0.1:8000${HOST}/outputs/a.txt`,
        `copied to host:${HOST}/outputs/a.txt`,
        `link file://${V}/outputs/a.txt`,
      ].join("\n"),
    });
  });

  test("is restored in a file: URI with one slash (Java's File.toURI), the server's link to the path it was given", () => {
    const map = named(`${V}/outputs/a.txt`);
    expect(restoreNamedPaths(`wrote file:${HOST}/outputs/a.txt and FILE:${HOST}/outputs/a.txt, not profile:${HOST}/outputs/a.txt`, map)).toEqual({
      type: "text",
      text: `wrote file:${V}/outputs/a.txt and FILE:${V}/outputs/a.txt, not profile:${HOST}/outputs/a.txt`,
    });
  });

  test("of a file:// URL the model wrote unnormalized is restored as the server's URL parser gives it back, also from a data dir a URL escapes", () => {
    const host = "/data dir/threads/t/user-data";
    for (const written of [`file://${V}/workspace/sub/../my%20a.txt`, `file://${V}/workspace/./my%20a.txt`]) {
      const { args, named: map } = hostArguments({ value: written }, host)!;
      // What `new URL(arg).href` (Node, a browser engine) or Java's `URI.normalize()` answers: the dot segments resolved.
      const echoed = new URL(args.value as string).href;
      expect(echoed).toBe("file:///data%20dir/threads/t/user-data/workspace/my%20a.txt");
      expect(withNamedPaths({ content: [{ type: "text", text: `cannot open ${echoed}` }] }, map).content[0]).toEqual({
        type: "text",
        text: `cannot open file://${V}/workspace/my%20a.txt`,
      });
    }
  });

  test.each([
    ["the workspace", `${HOST}/workspace`, `${V}/workspace`],
    ["a folder outside user-data the operator set", "/srv/tool", "/srv/tool"],
  ])("of a file:// URL a server took as a path relative to its cwd (%s) is restored as the model would read it", (_label, cwd, shownCwd) => {
    const { args, named: map } = hostArguments({ value: `file://${V}/workspace/a.txt` }, HOST, cwd)!;
    // What a server that takes no URLs opens: `path.resolve(cwd, arg)`, as the official filesystem server does.
    const opened = path.resolve(cwd, args.value as string);
    expect(opened).toBe(`${cwd}/file:${HOST}/workspace/a.txt`);
    expect(restoreNamedPaths(`ENOENT: open '${opened}'`, map)).toEqual({ type: "text", text: `ENOENT: open '${shownCwd}/file:${V}/workspace/a.txt'` });
  });

  test("of a file:// URL is also restored as the path it names, which a server given a URL answers with", () => {
    const map = named(`file://${V}/workspace/my%20notes.txt#L2`);
    expect(restoreNamedPaths(`cannot open ${HOST}/workspace/my notes.txt`, map)).toEqual({ type: "text", text: `cannot open ${V}/workspace/my notes.txt` });
    expect(restoreNamedPaths(`see ${pathToFileURL(HOST).href}/workspace/my%20notes.txt#L2`, map)).toEqual({
      type: "text",
      text: `see file://${V}/workspace/my%20notes.txt#L2`,
    });
  });
});

describe("through stdio and HTTP tools in a ToolNode", () => {
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  let dataDir: string;
  let http: HttpFixture;
  const run = { context: { user_id: "u" }, configurable: { thread_id: "argpaths" } };
  const decoded = (message: ToolMessage): unknown => JSON.parse(Buffer.from(String(message.content), "base64").toString());

  beforeAll(async () => {
    dataDir = await realpath(await makeTempDir("mcp-argpaths-data-"));
    http = await startHttpFixture({ name: "remote", toolNames: ["received"] });
    const configPath = await writeConfig(await makeTempDir("mcp-argpaths-cfg-"), {
      mcpServers: {
        local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["write_file", "echo", "received", "open_file", "rpc_error", "progress"] }) },
        remote: { type: "http", url: http.url },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit.close();
    await http.close();
  });

  const userData = () => path.join(dataDir, "threads", threadFolderName("argpaths"), "user-data");

  test("a file written at a /mnt/user-data path lands in the thread's folder and is shown and listed as that path", async () => {
    const message = await callThroughGraph(graph, "local_write_file", { path: `${V}/outputs/notes/a b.md`, content: "hello", link: true }, run);
    expect(await readFile(path.join(userData(), "outputs", "notes", "a b.md"), "utf8")).toBe("hello");
    expect(message.content).toEqual([
      { type: "text", text: `wrote ${V}/outputs/notes/a b.md` },
      expect.objectContaining({ url: `${V}/outputs/notes/a b.md` }),
    ]);
    expect(JSON.stringify(message.content)).not.toContain(dataDir);
  });

  test("the stdio server is sent host paths for whole paths; a path leaving the folder, or inside a longer text, is sent as written", async () => {
    const value = { path: `${V}/workspace/x.txt`, list: [`${V}/outputs`], cmd: `ls ${V}/outputs`, escape: `${V}/../../etc/passwd`, key: { [`${V}/k`]: 1 } };
    const message = await callThroughGraph(graph, "local_received", { value }, run);
    expect(decoded(message)).toEqual({
      path: `${userData()}/workspace/x.txt`,
      list: [`${userData()}/outputs`],
      cmd: `ls ${V}/outputs`,
      escape: `${V}/../../etc/passwd`,
      key: { [`${V}/k`]: 1 },
    });
  });

  test("a missing file the model named is echoed back as the model wrote it, not as the host path", async () => {
    // The echo fixture answers the text it was sent: the host path of a file that does not exist.
    const message = await callThroughGraph(graph, "local_echo", { text: `${V}/workspace/missing.txt` }, run);
    expect(message.content).toBe(`${V}/workspace/missing.txt`);
  });

  test("a missing file named by a file:// URL, which the server answers with the path it names, is shown as the model wrote it", async () => {
    const message = await callThroughGraph(graph, "local_open_file", { path: `file://${V}/workspace/my%20missing.txt` }, run);
    expect(message.content).toBe(`cannot open ${V}/workspace/my missing.txt`);
  });

  test("a path the model wrote unnormalized (`//`, `./`, `..`, a trailing slash), which the server answers resolved, is shown as /mnt/user-data/…", async () => {
    for (const [written, shown] of [
      [`${V}/workspace//missing a.txt`, `${V}/workspace/missing a.txt`],
      [`${V}/workspace/./sub/../missing b.txt`, `${V}/workspace/missing b.txt`],
      [`${V}/outputs/`, `${V}/outputs`],
      [`file://${V}/workspace//my%20missing%20c.txt`, `${V}/workspace/my missing c.txt`],
    ]) {
      const message = await callThroughGraph(graph, "local_open_file", { path: written }, run);
      expect(message.content).toBe(`cannot open ${shown}`);
    }
  });

  test("a JSON-RPC error quoting the host path it was given shows it as the model wrote it", async () => {
    const message = await callThroughGraph(graph, "local_rpc_error", { message: `${V}/outputs/locked.txt` }, run);
    expect(message.status).toBe("error");
    expect(message.content).toContain(`${V}/outputs/locked.txt`);
    expect(String(message.content)).not.toContain(dataDir);
  });

  test("a progress message quoting the host path it was given reaches the stream as the model wrote it", async () => {
    const stream = await graph.stream(
      { messages: [toolCalls([{ name: "local_progress", args: { steps: 1, say: `${V}/uploads/big.csv` } }])] },
      { ...run, streamMode: "custom" },
    );
    const events: unknown[] = [];
    for await (const chunk of stream) events.push(chunk);
    expect(events).toEqual([expect.objectContaining({ type: "mcp_progress", message: `${V}/uploads/big.csv` })]);
  });

  test("an HTTP server has no thread folder: it is sent the arguments as written", async () => {
    const value = { path: `${V}/workspace/x.txt` };
    expect(decoded(await callThroughGraph(graph, "remote_received", { value }, run))).toEqual(value);
  });
});

describe("attempts an interceptor sends with other arguments", () => {
  test("each answer shows the host paths its own attempt was given as the model wrote them", async () => {
    const dataDir = await realpath(await makeTempDir("mcp-argpaths-retry-data-"));
    // Asks for the file the model named, then for another one (an audit, a fallback), and answers the first.
    const both: McpToolInterceptor = async (request, next) => {
      const first = await next(request);
      await next(request.override({ args: { text: `${V}/workspace/other.txt` } }));
      return first;
    };
    const configPath = await writeConfig(await makeTempDir("mcp-argpaths-retry-cfg-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo"] }) } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, interceptors: [both] });
    try {
      const graph = toolNodeGraph(await toolkit.getTools());
      const message = await callThroughGraph(graph, "local_echo", { text: `${V}/workspace/missing.txt` }, { configurable: { thread_id: "retry" } });
      expect(message.content).toBe(`${V}/workspace/missing.txt`);
    } finally {
      await toolkit.close();
    }
  });
});
