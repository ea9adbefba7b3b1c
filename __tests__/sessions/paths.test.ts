/**
 * File references in stdio results: rewritten to /mnt/user-data/… only when they resolve (symlinks followed) to an
 * existing file inside the thread's user-data; everything else is left as it is. And the workspace change list.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { mkdir, realpath, rename, symlink, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import {
  changedFiles,
  mayTranslatePaths,
  snapshotWorkspace,
  translateResultPaths,
  virtualWorkspaceChanges,
  WorkspaceScanner,
  type PathContext,
} from "../../lib/sessions";
import { protocolMetaKeys } from "../../lib/sessions/paths";
import { toolkitTaskCaller } from "../../lib/tasks";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";
import { libModule, workerRunner } from "../fixtures/worker";

let root: string;
let userData: string;
let workspace: string;
let outside: string;

beforeAll(async () => {
  root = await realpath(await makeTempDir("mcp-paths-"));
  userData = path.join(root, "threads", "t", "user-data");
  workspace = path.join(userData, "workspace");
  outside = path.join(root, "outside.txt");
  await mkdir(path.join(workspace, "sub"), { recursive: true });
  await mkdir(path.join(workspace, "dir"), { recursive: true });
  await mkdir(path.join(workspace, "a"), { recursive: true });
  await mkdir(path.join(workspace, "b"), { recursive: true });
  await mkdir(path.join(workspace, "many"), { recursive: true });
  for (let i = 0; i < 300; i += 1) await writeFile(path.join(workspace, "many", `f${String(i).padStart(3, "0")}.txt`), "x");
  for (const file of ["report.txt", "sub/data.csv", "my file.txt", "a/x.txt", "b/x.txt", "cost$$.txt", "a$&b.txt", "2024.csv", "final report.txt"]) {
    await writeFile(path.join(workspace, file), "x");
  }
  // A link out of the workspace, with a report.txt next to its target: `out/../report.txt` is that file.
  await mkdir(path.join(root, "elsewhere", "deep"), { recursive: true });
  await writeFile(path.join(root, "elsewhere", "report.txt"), "not ours");
  await symlink(path.join(root, "elsewhere", "deep"), path.join(workspace, "out"));
  await symlink(path.join(workspace, "sub"), path.join(workspace, "in"));
  await writeFile(path.join(userData, "outputs.txt"), "x");
  await writeFile(outside, "secret");
  await symlink(outside, path.join(workspace, "escape.txt"));
  await symlink(path.join(workspace, "report.txt"), path.join(workspace, "alias.txt"));
});

const V = "/mnt/user-data";

function context(changed: string[] = []): PathContext {
  return { userData, cwd: workspace, changed: changed.map((f) => path.join(workspace, f)), scrub: (text) => text };
}

async function text(input: string, changed: string[] = []): Promise<string> {
  const result = await translateResultPaths({ content: [{ type: "text", text: input }] }, context(changed));
  return (result.content[0] as { text: string }).text;
}

describe("path translation", () => {
  test.each([
    ["an absolute path to a file in the workspace", () => `saved ${workspace}/report.txt`, `saved ${V}/workspace/report.txt`],
    ["a file:// URI in text", () => `see ${pathToFileURL(path.join(workspace, "sub/data.csv")).href}`, `see ${V}/workspace/sub/data.csv`],
    ["a percent-encoded file:// URI", () => `at ${pathToFileURL(path.join(workspace, "my file.txt")).href}.`, `at ${V}/workspace/my file.txt.`],
    ["a ./relative path (against the child's cwd)", () => "open ./sub/data.csv", `open ${V}/workspace/sub/data.csv`],
    ["a dir/relative path with trailing punctuation kept", () => "(sub/data.csv), then", `(${V}/workspace/sub/data.csv), then`],
    ["a ../ path to user-data outside the workspace", () => "read ../outputs.txt!", `read ${V}/outputs.txt!`],
    ["a symlink inside that points inside", () => `link ${workspace}/alias.txt`, `link ${V}/workspace/report.txt`],
    ["'..' after a link, read after the link is followed", () => "see in/../report.txt", `see ${V}/workspace/report.txt`],
    [
      "a path after a quoted URL with no space between (JSON)",
      () => `{"source":"https://example.com/data.csv","saved":"${workspace}/report.txt"}`,
      `{"source":"https://example.com/data.csv","saved":"${V}/workspace/report.txt"}`,
    ],
    ["a path glued to the URL that follows it (a CSV row)", () => `${workspace}/report.txt,https://example.com/r.csv`, `${V}/workspace/report.txt,https://example.com/r.csv`],
    ["a markdown link's text", () => `[${workspace}/report.txt](https://example.com/x)`, `[${V}/workspace/report.txt](https://example.com/x)`],
    ["a path after a label and a colon", () => `saved:${workspace}/report.txt`, `saved:${V}/workspace/report.txt`],
    ["a path in curly quotes", () => `“${workspace}/report.txt”`, `“${V}/workspace/report.txt”`],
    ["a path before CJK punctuation", () => `已保存到 ${workspace}/report.txt。`, `已保存到 ${V}/workspace/report.txt。`],
    ["a path with an ellipsis after it", () => `${workspace}/report.txt…`, `${V}/workspace/report.txt…`],
    ["a path with a line and column after it", () => `${workspace}/report.txt:12:3: error`, `${V}/workspace/report.txt:12:3: error`],
    ["a file://localhost URI", () => `see file://localhost${workspace}/report.txt`, `see ${V}/workspace/report.txt`],
    ["an upper-case FILE:// URI", () => `see FILE://${workspace}/report.txt`, `see ${V}/workspace/report.txt`],
    [
      "a path after a URL in HTML",
      () => `<a href="https://example.com/x?f=/y">${workspace}/report.txt</a>`,
      `<a href="https://example.com/x?f=/y">${V}/workspace/report.txt</a>`,
    ],
  ])("rewritten: %s", async (_name, input, expected) => {
    expect(await text(input())).toBe(expected);
  });

  test.each([
    ["a symlink escaping the user-data folder", () => `leak ${workspace}/escape.txt`],
    ["a file outside", () => `see ${outside}`],
    ["a directory", () => `folder ${workspace}/dir`],
    ["a missing file", () => `gone ${workspace}/nope.txt`],
    ["a remote URL", () => "fetch https://example.com/workspace/report.txt"],
    ["a path into another thread", () => `other ${path.join(root, "threads", "u", "user-data", "x.txt")}`],
    ["a URL whose host and path spell a workspace file", () => `fetch https:/${workspace}/report.txt`],
    ["a network path", () => `share /${workspace}/report.txt`],
    ["'..' after a link out of the workspace (the file system reads the folder above its target)", () => "cat out/../report.txt"],
    ["a relative path inside a longer word (Unicode letters are word characters)", () => "see ésub/data.csv"],
    ["a path in a URL's query", () => `get http://h.example/?p=${workspace}/report.txt`],
    ["a path in a quoted URL's query", () => `"https://h.example/x?f=./sub/data.csv"`],
    ["a relative path glued to a word by '+' (my+sub/… is not sub/…)", () => "open my+sub/data.csv"],
    ["a path with a line number that is not a file either way", () => `${workspace}/nope.txt:12`],
  ])("left unchanged: %s", async (_name, input) => {
    expect(await text(input())).toBe(input());
  });

  // Java's File.toURI form: a file URI as file:// is, rewritten (the scheme too) or left unchanged by the same rules.
  test.each([
    ["a file in the workspace", () => `open file:${workspace}/report.txt`, `open ${V}/workspace/report.txt`],
    ["upper case, after a label", () => `saved: FILE:${workspace}/sub/data.csv.`, `saved: ${V}/workspace/sub/data.csv.`],
    ["percent-encoded", () => `at file:${workspace}/my%20file.txt`, `at ${V}/workspace/my file.txt`],
    ["with a line and column after it", () => `file:${workspace}/report.txt:12:3: error`, `${V}/workspace/report.txt:12:3: error`],
    ["a symlink inside that points inside", () => `link file:${workspace}/alias.txt`, `link ${V}/workspace/report.txt`],
    ["a symlink escaping the user-data folder", () => `leak file:${workspace}/escape.txt`, undefined],
    ["a file that does not exist", () => `gone file:${workspace}/nope.txt`, undefined],
    ["a directory", () => `folder file:${workspace}/dir`, undefined],
    ["a file outside", () => `see file:${outside}`, undefined],
    ["after another word (a label ending in 'file:', not a URI)", () => `myfile:${workspace}/report.txt`, undefined],
    ["after another word of Unicode letters", () => `éfile:${workspace}/report.txt`, undefined],
  ])("a file: URI with one slash, %s", async (_name, input, expected) => {
    expect(await text(input())).toBe(expected ?? input());
  });

  test("a file: URI with one slash as a resource link or a whole structuredContent value: as a file:// one", async () => {
    const uri = (file: string) => `file:${path.join(workspace, file)}`;
    const result = await translateResultPaths(
      {
        content: [
          { type: "resource_link", uri: uri("report.txt"), name: "report.txt" },
          { type: "resource_link", uri: uri("escape.txt"), name: "escape.txt" },
          { type: "resource_link", uri: uri("nope.txt"), name: "nope.txt" },
        ],
        structuredContent: { saved: uri("my file.txt"), leaked: uri("escape.txt") },
      },
      context(),
    );
    expect(result.content.map((c) => (c as { uri: string }).uri)).toEqual([`${V}/workspace/report.txt`, uri("escape.txt"), uri("nope.txt")]);
    expect(result.structuredContent).toEqual({ saved: `${V}/workspace/my file.txt`, leaked: uri("escape.txt") });
  });

  test("a bare file name is rewritten only when exactly one changed file has it, and never inside a longer name", async () => {
    expect(await text("wrote report.txt and myreport.txt, report.txt.bak, dir/report.txt", ["report.txt"])).toBe(
      `wrote ${V}/workspace/report.txt and myreport.txt, report.txt.bak, dir/report.txt`,
    );
    expect(await text("wrote x.txt", ["a/x.txt", "b/x.txt"])).toBe("wrote x.txt");
    expect(await text("wrote report.txt", [])).toBe("wrote report.txt");
    expect(await text("wrote été2024.csv and 2024.csv", ["2024.csv"])).toBe(`wrote été2024.csv and ${V}/workspace/2024.csv`);
  });

  test("a bare name at the end of a sentence, or with characters other than a name's (a space, '$'), is rewritten too", async () => {
    expect(await text("done: report.txt. Also my file.txt and cost$$.txt…", ["report.txt", "my file.txt", "cost$$.txt"])).toBe(
      `done: ${V}/workspace/report.txt. Also ${V}/workspace/my file.txt and ${V}/workspace/cost$$.txt…`,
    );
  });

  // No timer: searching the text once per name took ~90 s here; each run of name characters is looked up instead.
  test("a call that wrote 10,000 files and returns 16 MiB of text finds the names it mentions in one pass", async () => {
    const changed = [...Array.from({ length: 10_000 }, (_, i) => `gen/part-${i}.bin`), "report.txt"];
    const noise = "part-1 ".repeat(2_400_000);
    expect(await text(`${noise}see report.txt.`, changed)).toBe(`${noise}see ${V}/workspace/report.txt.`);
  });

  test("names with other characters are searched for within a bound on the text searched (16 MiB in all)", async () => {
    const noise = "x ".repeat(4_500_000); // 9 MiB: the first name's search fits, the second's does not
    expect(await text(`${noise}my file.txt, final report.txt`, ["my file.txt", "final report.txt"])).toBe(
      `${noise}${V}/workspace/my file.txt, final report.txt`,
    );
  });

  test("a bare name is not rewritten inside a URL (its query or fragment), only outside it", async () => {
    expect(await text("download https://example.com/get?name=report.txt#report.txt, then open report.txt", ["report.txt"])).toBe(
      `download https://example.com/get?name=report.txt#report.txt, then open ${V}/workspace/report.txt`,
    );
    expect(await text(`"https://example.com/?f=report.txt" saved ${workspace}/sub/data.csv and report.txt`, ["report.txt"])).toBe(
      `"https://example.com/?f=report.txt" saved ${V}/workspace/sub/data.csv and ${V}/workspace/report.txt`,
    );
  });

  test("a bare name is not rewritten inside a path just rewritten", async () => {
    const url = pathToFileURL(path.join(workspace, "final report.txt")).href;
    expect(await text(`updated report.txt; summary in ${url}`, ["report.txt"])).toBe(
      `updated ${V}/workspace/report.txt; summary in ${V}/workspace/final report.txt`,
    );
  });

  test("hundreds of words that only look like paths (dates) do not use up the references resolved before a real one", async () => {
    const dates = Array.from({ length: 300 }, (_, i) => `2024/01/${String(i).padStart(3, "0")}: 1 row`).join("\n");
    expect((await text(`${dates}\nreport at ${workspace}/report.txt and sub/data.csv`)).split("\n").at(-1)).toBe(
      `report at ${V}/workspace/report.txt and ${V}/workspace/sub/data.csv`,
    );
  });

  test("paths of files the call wrote are rewritten however many there are (not only the first 256 references)", async () => {
    const names = Array.from({ length: 300 }, (_, i) => `many/f${String(i).padStart(3, "0")}.txt`);
    const input = names.map((name) => `wrote ${workspace}/${name}`).join("\n");
    expect(await text(input, names)).toBe(names.map((name) => `wrote ${V}/workspace/${name}`).join("\n"));
  });

  // No timer: resolving and matching every changed name against the text took about 1 ms per name.
  test("a call that changed 20,000 files costs a lookup per name, not a file-system call and a scan of the text", async () => {
    const changed = [...Array.from({ length: 20_000 }, (_, i) => `gen/part-${i}.bin`), "report.txt"];
    expect(await text("extracted; see report.txt", changed)).toBe(`extracted; see ${V}/workspace/report.txt`);
    // Only a name the text holds is resolved (each resolved name's path is checked against the redaction).
    const scrubbed: string[] = [];
    const ctx = { ...context([...Array.from({ length: 300 }, (_, i) => `many/f${String(i).padStart(3, "0")}.txt`), "report.txt"]) };
    const result = await translateResultPaths(
      { content: [{ type: "text", text: "see report.txt" }] },
      { ...ctx, scrub: (value) => (scrubbed.push(value), value) },
    );
    expect((result.content[0] as { text: string }).text).toBe(`see ${V}/workspace/report.txt`);
    expect(scrubbed).toEqual([`${V}/workspace/report.txt`]);
  });

  test("a virtual path the call's redaction would change is never written (a secret spelled with the /mnt/user-data prefix)", async () => {
    const secret = `${V}/workspace/sub`;
    const scrub = (value: string) => value.replaceAll(secret, "[redacted]");
    const translatedWith = async (input: string, changed: string[]) =>
      ((await translateResultPaths({ content: [{ type: "text", text: input }] }, { ...context(changed), scrub })).content[0] as { text: string }).text;
    const host = `${workspace}/sub/data.csv`;
    // A path the call wrote, a path that resolves, a bare name of the one file the call wrote: each left as it is.
    expect(await translatedWith(`wrote ${host}`, ["sub/data.csv"])).toBe(`wrote ${host}`);
    expect(await translatedWith(`see ${host}`, [])).toBe(`see ${host}`);
    expect(await translatedWith("see data.csv", ["sub/data.csv"])).toBe("see data.csv");
    // The rest of the text is still translated.
    expect(await translatedWith(`see ${host} and ${workspace}/report.txt`, [])).toBe(`see ${host} and ${V}/workspace/report.txt`);
  });

  test("the bare name of the one changed file, when that file is a link escaping user-data, is left as it is", async () => {
    expect(await text("see escape.txt", ["escape.txt"])).toBe("see escape.txt");
  });

  test("a changed file's name with '$' in it is written as it is (no replacement patterns)", async () => {
    expect(await text("wrote cost$$.txt", ["cost$$.txt"])).toBe(`wrote ${V}/workspace/cost$$.txt`);
    expect(await text("wrote a$&b.txt", ["a$&b.txt"])).toBe(`wrote ${V}/workspace/a$&b.txt`);
    expect(await text(`saved ${workspace}/cost$$.txt`)).toBe(`saved ${V}/workspace/cost$$.txt`);
  });

  test("resource links are rewritten the same way; other schemes are left alone", async () => {
    const result: CallToolResult = {
      content: [
        { type: "resource_link", uri: pathToFileURL(path.join(workspace, "report.txt")).href, name: "report.txt" },
        { type: "resource_link", uri: pathToFileURL(path.join(workspace, "escape.txt")).href, name: "escape.txt" },
        { type: "resource_link", uri: "https://example.com/report.txt", name: "remote" },
      ],
    };
    const uris = (await translateResultPaths(result, context())).content.map((c) => (c as { uri: string }).uri);
    expect(uris).toEqual([`${V}/workspace/report.txt`, result.content[1] && (result.content[1] as { uri: string }).uri, "https://example.com/report.txt"]);
  });

  test("paths in structuredContent are rewritten at any depth; bare names, keys and other values stay as they are", async () => {
    const structuredContent = {
      saved: `${workspace}/report.txt`,
      name: "report.txt",
      nested: { files: [{ path: pathToFileURL(path.join(workspace, "sub/data.csv")).href, size: 1 }, `${workspace}/escape.txt`] },
      [`${workspace}/report.txt`]: "key",
      note: `see ${workspace}/report.txt.`,
      count: 3,
      none: null,
    };
    const result: CallToolResult = { content: [], structuredContent };
    expect(mayTranslatePaths({ content: [], structuredContent: { saved: `${workspace}/report.txt` } }, context())).toBe(true);
    const translated = await translateResultPaths(result, context(["report.txt"]));
    expect(translated.structuredContent).toEqual({
      saved: `${V}/workspace/report.txt`,
      name: "report.txt",
      nested: { files: [{ path: `${V}/workspace/sub/data.csv`, size: 1 }, `${workspace}/escape.txt`] },
      [`${workspace}/report.txt`]: "key",
      note: `see ${V}/workspace/report.txt.`,
      count: 3,
      none: null,
    });
    // A value that is one whole path is read whole, spaces and all; in free text a space still ends a path.
    // A file:// URL with a query keeps it: left to the free-text rules, which cut the path at `?`.
    const spaced = {
      whole: ` ${workspace}/final report.txt `,
      file: pathToFileURL(path.join(workspace, "my file.txt")).href.replace("%20", " "),
      text: `see ${workspace}/final report.txt`,
      query: `${pathToFileURL(path.join(workspace, "report.txt")).href}?version=2`,
    };
    expect((await translateResultPaths({ content: [], structuredContent: spaced }, context())).structuredContent).toEqual({
      whole: ` ${V}/workspace/final report.txt `,
      file: `${V}/workspace/my file.txt`,
      text: `see ${workspace}/final report.txt`,
      query: `${V}/workspace/report.txt?version=2`,
    });
    // A key "__proto__" (JSON.parse makes it an own key) stays a key of the copy.
    const withProto = JSON.parse(`{"__proto__":{"k":"v"},"p":"${workspace}/report.txt"}`) as Record<string, unknown>;
    const copied = (await translateResultPaths({ content: [], structuredContent: withProto }, context())).structuredContent!;
    expect(Object.getPrototypeOf(copied)).toBe(Object.prototype);
    expect(Object.keys(copied)).toEqual(["__proto__", "p"]);
    expect(copied.p).toBe(`${V}/workspace/report.txt`);
    // Nothing to rewrite: the very same object.
    const plain = { structuredContent: { name: "report.txt", at: `${workspace}/dir` }, content: [{ type: "text" as const, text: "done" }] };
    expect((await translateResultPaths(plain, context())).structuredContent).toBe(plain.structuredContent);
  });

  // No timer here: a quadratic scan of these takes minutes, a linear one milliseconds.
  test("a 12 MiB text is scanned in linear time", async () => {
    const big = "0123456789".repeat(1_200_000);
    expect(await text(`${big} ./sub/data.csv`)).toBe(`${big} ${V}/workspace/sub/data.csv`);
  });

  test("8 MiB of short words without a slash, then one path, is scanned in linear time", async () => {
    const words = "a ".repeat(4_000_000);
    expect(await text(`${words}./sub/data.csv`)).toBe(`${words}${V}/workspace/sub/data.csv`);
  });

  test("8 MiB of long words each ending in a slash is scanned in linear time", async () => {
    const words = `${"a".repeat(4094)}/ `.repeat(2000);
    expect(await text(`${words}./sub/data.csv`)).toBe(`${words}${V}/workspace/sub/data.csv`);
  });
});

describe("a thread's folders replaced by symbolic links while its server runs", () => {
  /** `<root>/threads/<thread>/user-data/workspace` made, with the context of a call in it. */
  async function threadIn(dir: string, thread: string) {
    const data = path.join(dir, "threads", thread, "user-data");
    await mkdir(path.join(data, "workspace"), { recursive: true });
    return { userData: data, workspace: path.join(data, "workspace") };
  }
  const translated = async (input: string, ctx: PathContext) =>
    ((await translateResultPaths({ content: [{ type: "text", text: input }] }, ctx)).content[0] as { text: string }).text;

  test.each([
    ["small (walked in place)", 0],
    ["large (walked off the event loop)", 300],
  ])("a %s workspace that became a link to a folder outside user-data is not walked; a file written through it keeps its path", async (_label, files) => {
    const dir = await realpath(await makeTempDir("mcp-paths-swap-"));
    const own = await threadIn(dir, "t");
    const elsewhere = path.join(dir, "elsewhere");
    await mkdir(elsewhere);
    for (let i = 0; i < files; i += 1) {
      await writeFile(path.join(own.workspace, `f${i}.txt`), "x");
      await writeFile(path.join(elsewhere, `f${i}.txt`), "x");
    }
    const scanner = new WorkspaceScanner(own.workspace);
    expect((await scanner.snapshot())?.size).toBe(files);
    await rename(own.workspace, `${own.workspace}.old`);
    await symlink(elsewhere, own.workspace);
    const before = await scanner.snapshot();
    await writeFile(path.join(elsewhere, "leak.txt"), "x");
    const changed = changedFiles(before, await scanner.snapshot());
    expect(changed).toEqual([]);
    const ctx = { userData: own.userData, cwd: own.workspace, changed, scrub: (t: string) => t };
    expect(await translated(`wrote ${own.workspace}/leak.txt`, ctx)).toBe(`wrote ${own.workspace}/leak.txt`);
    expect(virtualWorkspaceChanges(ctx)).toEqual([]);
  });

  test.each([
    ["its user-data folder", (thread: string) => path.join(thread, "user-data")],
    ["its thread folder", (thread: string) => thread],
  ])("%s, a link to another thread's: that thread's files are not rewritten, nor its own through the link", async (_label, swapped) => {
    const dir = await realpath(await makeTempDir("mcp-paths-other-"));
    const own = await threadIn(dir, "t");
    const other = await threadIn(dir, "u");
    await writeFile(path.join(other.workspace, "private.txt"), "x");
    const replaced = swapped(path.join(dir, "threads", "t"));
    await rename(replaced, `${replaced}.old`);
    await symlink(swapped(path.join(dir, "threads", "u")), replaced);
    const ctx = { userData: own.userData, cwd: own.workspace, changed: [path.join(own.workspace, "private.txt")], scrub: (t: string) => t };
    for (const input of [`see ${other.workspace}/private.txt`, `see ${own.workspace}/private.txt`, "see private.txt"]) {
      expect(await translated(input, ctx)).toBe(input);
    }
  });

  test("links above the threads folder (where the operator put the data dir) are followed", async () => {
    const dir = await realpath(await makeTempDir("mcp-paths-linked-"));
    await threadIn(path.join(dir, "real"), "t");
    await symlink(path.join(dir, "real"), path.join(dir, "data"));
    const linked = { userData: path.join(dir, "data", "threads", "t", "user-data"), workspace: path.join(dir, "data", "threads", "t", "user-data", "workspace") };
    await writeFile(path.join(linked.workspace, "r.txt"), "x");
    const ctx = { userData: linked.userData, cwd: linked.workspace, changed: [], scrub: (t: string) => t };
    expect(await translated(`see ${linked.workspace}/r.txt`, ctx)).toBe(`see ${V}/workspace/r.txt`);
  });
});

describe("workspace change listing", () => {
  test("created and modified files are listed; deleted ones and .mcp, node_modules, .git … at any depth are not", async () => {
    const ws = await realpath(await makeTempDir("mcp-changes-"));
    await writeFile(path.join(ws, "kept.txt"), "1");
    await writeFile(path.join(ws, "edited.txt"), "1");
    const before = await snapshotWorkspace(ws);
    await writeFile(path.join(ws, "edited.txt"), "22");
    await mkdir(path.join(ws, "deep", ".mcp", "tmp"), { recursive: true });
    await mkdir(path.join(ws, "deep", "node_modules"), { recursive: true });
    await mkdir(path.join(ws, ".git"), { recursive: true });
    await writeFile(path.join(ws, "deep", ".mcp", "tmp", "scratch"), "x");
    await writeFile(path.join(ws, "deep", "node_modules", "pkg.js"), "x");
    await writeFile(path.join(ws, ".git", "HEAD"), "x");
    await writeFile(path.join(ws, "deep", "new.md"), "x");
    expect(changedFiles(before, await snapshotWorkspace(ws))).toEqual([path.join(ws, "deep", "new.md"), path.join(ws, "edited.txt")]);
  });
});

describe("through a stdio tool in a ToolNode", () => {
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await realpath(await makeTempDir("mcp-paths-data-"));
    const configPath = await writeConfig(await makeTempDir("mcp-paths-cfg-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["write_file", "fs_ops"] }) } },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit.close();
  });
  const run = { context: { user_id: "u" }, configurable: { thread_id: "write" } };

  test("a written file: its path in the text and its resource link become /mnt/user-data/…, and it is listed as a change", async () => {
    const message = await callThroughGraph(graph, "local_write_file", { path: "out/report.md", content: "# hi", link: true }, run);
    expect(message.status).toBe("success");
    expect(message.content).toEqual([
      { type: "text", text: `wrote ${V}/workspace/out/report.md` },
      expect.objectContaining({ type: "file", url: `${V}/workspace/out/report.md` }),
    ]);
    expect(message.artifact).toEqual({ workspace_changes: [`${V}/workspace/out/report.md`] });
  });

  test("a file written beside user-data, in a folder whose name starts with 'user-data', keeps its host path and is not listed", async () => {
    const message = await callThroughGraph(graph, "local_write_file", { path: "../../user-data-old/notes.txt", content: "x", link: true }, run);
    const host = path.join(dataDir, "threads", "write", "user-data-old", "notes.txt");
    expect(message.status).toBe("success");
    expect(message.content).toEqual([
      { type: "text", text: `wrote ${host}` },
      expect.objectContaining({ type: "file", url: pathToFileURL(host).href }),
    ]);
    expect(message.artifact).toBeUndefined();
  });

  test("a path in structuredContent becomes /mnt/user-data/… in the artifact, and in the text shown when there is no other", async () => {
    const message = await callThroughGraph(graph, "local_write_file", { path: "out/data.json", content: "{}", structured: true, say: "" }, run);
    const expected = { path: `${V}/workspace/out/data.json`, name: "data.json", files: [{ path: `${V}/workspace/out/data.json` }] };
    expect(message.status).toBe("success");
    expect(JSON.parse(message.content as string)).toEqual(expected);
    expect(message.artifact).toEqual({ structuredContent: expected, workspace_changes: [`${V}/workspace/out/data.json`] });
  });

  test("a direct call in a thread's scope (a durable task's poll) has its paths rewritten too", async () => {
    const outcome = (await toolkit.callTool({
      server: "local",
      tool: "write_file",
      args: { path: "task/out.txt", content: "x", structured: true },
      scope: { userId: "u", threadId: "write" },
    })) as CallToolResult;
    expect(outcome.content).toEqual([{ type: "text", text: `wrote ${V}/workspace/task/out.txt` }]);
    expect(outcome.structuredContent).toEqual(expect.objectContaining({ path: `${V}/workspace/task/out.txt` }));
  });

  test("files under .mcp are not listed; a bare name of the one changed file is rewritten", async () => {
    const scratch = await callThroughGraph(graph, "local_write_file", { path: ".mcp/tmp/scratch.txt", content: "x", say: "done" }, run);
    expect(scratch.content).toBe("done");
    expect(scratch.artifact).toBeUndefined();
    const named = await callThroughGraph(graph, "local_write_file", { path: "notes/summary.txt", content: "x", say: "see summary.txt" }, run);
    expect(named.content).toBe(`see ${V}/workspace/notes/summary.txt`);
  });

  test("a file the call before wrote, rewritten in place with the same size in the same clock tick, is listed", async () => {
    // Each call's walk before it must find the file modified under SETTLED_LISTING_MS ago: a tick just passed.
    const tick = Date.now() - 20;
    const write = (content: string) => callThroughGraph(graph, "local_write_file", { path: "tick.txt", content, say: "ok", mtime_ms: tick }, run);
    expect((await write("aaaa")).artifact).toEqual({ workspace_changes: [`${V}/workspace/tick.txt`] });
    expect((await write("bbbb")).artifact).toEqual({ workspace_changes: [`${V}/workspace/tick.txt`] });
    // Written again as it was: nothing to list.
    expect((await write("bbbb")).artifact).toBeUndefined();
  });

  test("a workspace too large to walk in place (300 files) is walked off the event loop, and its change is listed", async () => {
    const many = path.join(dataDir, "threads", "big", "user-data", "workspace", "many");
    await mkdir(many, { recursive: true });
    await Promise.all(Array.from({ length: 300 }, (_, i) => writeFile(path.join(many, `f${i}.txt`), "x")));
    const big = { context: { user_id: "u" }, configurable: { thread_id: "big" } };
    const message = await callThroughGraph(graph, "local_write_file", { path: "many/f7.txt", content: "changed", say: "ok" }, big);
    expect(message.artifact).toEqual({ workspace_changes: [`${V}/workspace/many/f7.txt`] });
  });

  test("a secret of the run in a file or folder name is scrubbed from the change list and never written into a rewritten path", async () => {
    const SECRET = "Zk7-path+secret";
    const secretRun = { context: { user_id: "u", secrets: { api_key: SECRET } }, configurable: { thread_id: "secret-path" } };
    const forms = [SECRET, encodeURIComponent(SECRET), Buffer.from(SECRET).toString("base64")];
    const leaks = (message: unknown) => forms.filter((form) => JSON.stringify(message).includes(form));

    // The server names a file after the secret: it is listed, scrubbed.
    const named = await callThroughGraph(graph, "local_write_file", { path: `out/${SECRET}.txt`, content: "x", say: "done" }, secretRun);
    expect(named.artifact).toEqual({ workspace_changes: [`${V}/workspace/out/[redacted].txt`] });
    expect(leaks(named)).toEqual([]);

    // A reference without the secret that resolves (through a symlink) to that file is left as it is.
    const threadWorkspace = path.join(dataDir, "threads", "secret-path", "user-data", "workspace");
    await symlink(path.join(threadWorkspace, "out", `${SECRET}.txt`), path.join(threadWorkspace, "alias.txt"));
    const linked = await callThroughGraph(graph, "local_write_file", { path: ".mcp/tmp/x", content: "x", say: "see ./alias.txt" }, secretRun);
    expect(linked.content).toBe("see ./alias.txt");
    expect(leaks(linked)).toEqual([]);

    // A bare file name of the one changed file, inside a folder named after the secret, is left as it is.
    const nested = await callThroughGraph(graph, "local_write_file", { path: `${SECRET}/summary.txt`, content: "x", say: "see summary.txt" }, secretRun);
    expect(nested.content).toBe("see summary.txt");
    expect(nested.artifact).toEqual({ workspace_changes: [`${V}/workspace/[redacted]/summary.txt`] });
    expect(leaks(nested)).toEqual([]);
  });

  describe("file operations of a call", () => {
    let n = 0;
    const fresh = () => ({ context: { user_id: "u" }, configurable: { thread_id: `ops-${++n}` } });
    const ops = (steps: Record<string, unknown>[], thread: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      callThroughGraph(graph, "local_fs_ops", { ops: steps, ...extra }, thread);
    const changes = (message: { artifact?: unknown }) => (message.artifact as { workspace_changes?: string[] } | undefined)?.workspace_changes ?? [];

    test("an atomic save (a new file renamed over the old, same size and time) is listed; its temporary file is not", async () => {
      const thread = fresh();
      const old = Date.now() - 3_600_000;
      await ops([{ op: "write", path: "doc.txt", content: "aaaa", mtime_ms: old }], thread);
      const message = await ops(
        [
          { op: "write", path: ".doc.txt.swp", content: "bbbb", mtime_ms: old },
          { op: "rename", path: ".doc.txt.swp", to: "doc.txt" },
        ],
        thread,
      );
      expect(changes(message)).toEqual([`${V}/workspace/doc.txt`]);
    });

    test("a file created then removed during the call is not listed; one in a new deep folder is", async () => {
      const thread = fresh();
      await ops([{ op: "write", path: "keep/a.txt", content: "x" }], thread);
      const message = await ops(
        [
          { op: "write", path: "scratch.txt", content: "x" },
          { op: "write", path: "keep/new/deeper/still/b.txt", content: "x" },
          { op: "remove", path: "scratch.txt" },
        ],
        thread,
      );
      expect(changes(message)).toEqual([`${V}/workspace/keep/new/deeper/still/b.txt`]);
    });

    test("a write through a link to a folder inside the workspace is listed at the folder's own path", async () => {
      const thread = fresh();
      await ops([{ op: "mkdir", path: "real" }, { op: "symlink", path: "alias", to: "real" }], thread);
      const message = await ops([{ op: "write", path: "alias/c.txt", content: "x" }], thread);
      expect(changes(message)).toEqual([`${V}/workspace/real/c.txt`]);
    });

    test("names with spaces, accents, CJK, a line break, '%', '#' or '?' are listed as they are", async () => {
      const names = ["%41.txt", "100%.txt", "a#b?.txt", "line\nbreak.txt", "naïve 文件.txt", "with space.txt"];
      const message = await ops(names.map((name) => ({ op: "write", path: name, content: "x" })), fresh());
      expect(changes(message)).toEqual(names.map((name) => `${V}/workspace/${name}`));
    });

    test("a call whose result is an error still lists what it wrote", async () => {
      const message = await ops([{ op: "write", path: "partial.txt", content: "x" }], fresh(), { is_error: true });
      expect(message.status).toBe("error");
      expect(changes(message)).toEqual([`${V}/workspace/partial.txt`]);
    });

    test("a file truncated shorter, its time put back, is listed", async () => {
      const thread = fresh();
      const old = Date.now() - 3_600_000;
      await ops([{ op: "write", path: "t.txt", content: "abcd", mtime_ms: old }], thread);
      expect(changes(await ops([{ op: "truncate", path: "t.txt", size: 2, mtime_ms: old }], thread))).toEqual([`${V}/workspace/t.txt`]);
    });

    test.each(["small", "large"])("a file named in Latin-1 (not UTF-8), or in a folder so named, is listed (%s workspace)", async (size) => {
      const thread = fresh();
      if (size === "large") {
        const many = path.join(dataDir, "threads", thread.configurable.thread_id, "user-data", "workspace", "many");
        await mkdir(many, { recursive: true });
        await Promise.all(Array.from({ length: 300 }, (_, i) => writeFile(path.join(many, `f${i}.txt`), "x")));
      }
      const latin1 = (name: string) => Buffer.from(name, "latin1").toString("hex");
      const message = await ops(
        [
          { op: "write", hex: latin1("caf\xe9.txt"), content: "x" },
          { op: "mkdir", hex: latin1("r\xe9sum\xe9s") },
          { op: "write", hex: latin1("r\xe9sum\xe9s/cv.txt"), content: "x" },
        ],
        thread,
      );
      expect(changes(message)).toEqual([`${V}/workspace/caf\uFFFD.txt`, `${V}/workspace/r\uFFFDsum\uFFFDs/cv.txt`]);
    });
  });

  test("a workspace a tool replaced by a link out of user-data: a file written through it keeps its path and is not listed", async () => {
    const own = { context: { user_id: "u" }, configurable: { thread_id: "swap" } };
    expect((await callThroughGraph(graph, "local_write_file", { path: "first.txt", content: "x" }, own)).status).toBe("success");
    const threadWorkspace = path.join(dataDir, "threads", "swap", "user-data", "workspace");
    const elsewhere = path.join(dataDir, "elsewhere");
    await mkdir(elsewhere, { recursive: true });
    await rename(threadWorkspace, `${threadWorkspace}.old`);
    await symlink(elsewhere, threadWorkspace);
    const message = await callThroughGraph(graph, "local_write_file", { path: `${threadWorkspace}/leak.txt`, content: "x" }, own);
    expect(await realpath(path.join(threadWorkspace, "leak.txt"))).toBe(path.join(elsewhere, "leak.txt"));
    expect(message.content).toBe(`wrote ${threadWorkspace}/leak.txt`);
    expect(message.artifact).toBeUndefined();
  });

  test("a thread's user-data a tool replaced by a link to another thread's: nothing there is rewritten or listed", async () => {
    const mine = { context: { user_id: "u" }, configurable: { thread_id: "mine" } };
    const other = { context: { user_id: "u" }, configurable: { thread_id: "other" } };
    expect((await callThroughGraph(graph, "local_write_file", { path: "first.txt", content: "x" }, mine)).status).toBe("success");
    expect((await callThroughGraph(graph, "local_write_file", { path: "private.txt", content: "x" }, other)).status).toBe("success");
    const ownData = path.join(dataDir, "threads", "mine", "user-data");
    const theirs = path.join(dataDir, "threads", "other", "user-data");
    await rename(ownData, `${ownData}.old`);
    await symlink(theirs, ownData);
    const message = await callThroughGraph(graph, "local_write_file", { path: "new.txt", content: "x", say: `see ${theirs}/workspace/private.txt` }, mine);
    expect(message.content).toBe(`see ${theirs}/workspace/private.txt`);
    // new.txt was written through the link, into the other thread's workspace: not listed as this thread's change.
    expect(message.artifact).toBeUndefined();
  });

  test("a path to a file an earlier call wrote is rewritten although this call changed nothing", async () => {
    await callThroughGraph(graph, "local_write_file", { path: "kept/data.csv", content: "a,b" }, run);
    const kept = path.join(dataDir, "threads", "write", "user-data", "workspace", "kept", "data.csv");
    const message = await callThroughGraph(graph, "local_write_file", { path: ".mcp/tmp/other.txt", content: "x", say: `still at ${kept}` }, run);
    expect(message.content).toBe(`still at ${V}/workspace/kept/data.csv`);
    expect(message.artifact).toBeUndefined();
  });

  const inThread = (thread: string) => ({ context: { user_id: "u" }, configurable: { thread_id: thread } });
  const hostWorkspace = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");

  test("a path in JSON-encoded text, followed by an escape (\\n) or an escaped quote, is shown as /mnt/user-data/…", async () => {
    const host = path.join(hostWorkspace("json-text"), "out", "report.txt");
    // What many servers answer: JSON.stringify of their result object, as text.
    const say = JSON.stringify({ log: `saved ${host}\ndone`, note: `written to "${host}"` });
    const message = await callThroughGraph(graph, "local_write_file", { path: "out/report.txt", content: "x", say }, inThread("json-text"));
    expect(message.artifact).toEqual({ workspace_changes: [`${V}/workspace/out/report.txt`] });
    expect(message.content).toBe(JSON.stringify({ log: `saved ${V}/workspace/out/report.txt\ndone`, note: `written to "${V}/workspace/out/report.txt"` }));
  });

  test("a link escaping user-data whose name holds a backslash (report.txt\\backup) is left as it is, not cut at the backslash", async () => {
    await callThroughGraph(graph, "local_write_file", { path: "report.txt", content: "x", say: "ok" }, inThread("escape-tail"));
    const outsideFile = path.join(dataDir, "outside-escape.txt");
    await writeFile(outsideFile, "not the thread's");
    await symlink(outsideFile, path.join(hostWorkspace("escape-tail"), "report.txt\\backup"));
    const say = `restore from ${hostWorkspace("escape-tail")}/report.txt\\backup`;
    const message = await callThroughGraph(graph, "local_write_file", { path: ".mcp/tmp/y", content: "x", say }, inThread("escape-tail"));
    expect(message.content).toBe(say);
  });

  test("a path with JSON escapes inside it (caf\\u00e9.txt, as Python's json.dumps writes it; \\/) is shown as /mnt/user-data/…", async () => {
    const host = JSON.stringify(path.join(hostWorkspace("escaped-inside"), "café.txt"))
      .slice(1, -1)
      .replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
    const say = `{"saved":"${host}","also":"${host.replace(/\//g, "\\/")}"}`;
    const message = await callThroughGraph(graph, "local_write_file", { path: "café.txt", content: "x", say }, inThread("escaped-inside"));
    expect(message.artifact).toEqual({ workspace_changes: [`${V}/workspace/café.txt`] });
    expect(String(message.content)).not.toContain(dataDir);
    expect(JSON.parse(String(message.content))).toEqual({ saved: `${V}/workspace/café.txt`, also: `${V}/workspace/café.txt` });
  });

  test("a bare name in JSON-encoded text, followed by an escape (\\n) or an escaped quote, is rewritten", async () => {
    const say = JSON.stringify({ log: "saved report.txt\nall done", note: 'wrote "report.txt"' });
    const message = await callThroughGraph(graph, "local_write_file", { path: "report.txt", content: "x", say }, inThread("json-bare"));
    expect(message.content).toBe(JSON.stringify({ log: `saved ${V}/workspace/report.txt\nall done`, note: `wrote "${V}/workspace/report.txt"` }));
  });

  test("a rewrite that makes up a secret with the text around it is scrubbed; the text's other paths are still rewritten", async () => {
    const secret = "sk-live-9f8e7d6c5b4a";
    const head = secret.slice(0, 12);
    // The rest of the secret, its first character JSON-escaped.
    const tail = `\\u${secret.charCodeAt(12).toString(16).padStart(4, "0")}${secret.slice(13)}`;
    const run = { context: { user_id: "u", secrets: { api_key: secret } }, configurable: { thread_id: "joined" } };
    await callThroughGraph(graph, "local_write_file", { path: head, content: "x", say: "ok" }, run);
    // A link to that file, as a tool of the thread can plant one: its target's name is the secret's first half.
    await symlink(path.join(hostWorkspace("joined"), head), path.join(hostWorkspace("joined"), "x"));
    const host = path.join(hostWorkspace("joined"), "out", "report.txt");
    const say = `wrote ${host}; see ./x${tail}`;
    const message = await callThroughGraph(graph, "local_write_file", { path: "out/report.txt", content: "x", say }, run);
    expect(message.content).toBe(`wrote ${V}/workspace/out/report.txt; see ${V}/workspace/[redacted]`);
  });

  test("a durable task's poll (scrubbed by its caller later) is translated also where a string quotes a secret", async () => {
    const secret = "sk-live-5e4d3c2b1a09";
    const launch = stdioFixture({ name: "jobs", toolNames: [], tasks: true });
    const configPath = await writeConfig(await makeTempDir("mcp-paths-task-secret-"), {
      mcpServers: { jobs: { type: "stdio", ...launch, env: { ...launch.env, JOBS_KEY: "${JOBS_KEY}" } } },
    });
    const own = createMcpToolkit({ configPath, env: { JOBS_KEY: secret }, logger: new RecordingLogger(), dataDir });
    try {
      await mkdir(path.join(hostWorkspace("th-secret"), "reports"), { recursive: true });
      await writeFile(path.join(hostWorkspace("th-secret"), "reports", "q3.csv"), "a,b");
      const caller = toolkitTaskCaller(own);
      const scope = { serverName: "jobs", userId: "u", threadId: "th-secret" };
      const label = `${path.join(hostWorkspace("th-secret"), "reports", "q3.csv")} (fetched with key ${secret})`;
      const submitted = await caller.callTool({ ...scope, toolName: "start_job", arguments: { label } });
      const taskId = (submitted.result.structuredContent as { task_id: string }).task_id;
      const polled = await caller.callTool({ ...scope, toolName: "job_status", arguments: { task_id: taskId } });
      const shown = polled.scrub(polled.result) as unknown as { structuredContent: { result: { label: string } } };
      expect(shown.structuredContent.result.label).toBe(`${V}/workspace/reports/q3.csv (fetched with key [redacted])`);
    } finally {
      await own.close();
    }
  });

  test.each(["it's.txt", "notes(v2)", "draft.", "sub/x y.txt"])("a structuredContent value that is one whole path (%s) is shown as /mnt/user-data/…", async (name) => {
    const message = await callThroughGraph(graph, "local_write_file", { path: name, content: "x", structured: true, say: "" }, inThread("whole"));
    const artifact = message.artifact as { structuredContent: { path: string; files: { path: string }[] }; workspace_changes: string[] };
    expect(artifact.workspace_changes).toEqual([`${V}/workspace/${name}`]);
    expect([artifact.structuredContent.path, artifact.structuredContent.files[0].path]).toEqual([`${V}/workspace/${name}`, `${V}/workspace/${name}`]);
    expect(JSON.stringify(message.content)).not.toContain(dataDir);
  });

  test("a name that is a segment of a Windows or scp path is not a bare name", async () => {
    const say = "copied report.txt to C:\\backup\\report.txt, \\\\server\\share\\report.txt and host:report.txt";
    const message = await callThroughGraph(graph, "local_write_file", { path: "report.txt", content: "x", say }, inThread("windows"));
    expect(message.content).toBe(`copied ${V}/workspace/report.txt to C:\\backup\\report.txt, \\\\server\\share\\report.txt and host:report.txt`);
  });

  test("a path with JSON escapes inside it, then an escape that ends it (\\n, \\\"), is shown as /mnt/user-data/…", async () => {
    const host = path.join(hostWorkspace("escaped-then-tail"), "café.txt");
    // Python's json.dumps (ensure_ascii) of a log line, and PHP's json_encode (which escapes '/'), as a server's text.
    const python = JSON.stringify({ log: `saved ${host}\ndone`, note: `written to "${host}"` }).replace(/é/g, "\\u00e9");
    const php = JSON.stringify({ log: `saved ${host}\ndone` }).replace(/\//g, "\\/");
    for (const say of [python, php]) {
      const message = await callThroughGraph(graph, "local_write_file", { path: "café.txt", content: "x", say }, inThread("escaped-then-tail"));
      expect(message.artifact).toEqual({ workspace_changes: [`${V}/workspace/café.txt`] });
      expect(String(message.content)).not.toContain(dataDir);
    }
  });

  test("a markdown link whose text holds a '/' ([out/report.md](<path>)): its target is shown as /mnt/user-data/…", async () => {
    const host = path.join(hostWorkspace("markdown"), "out", "report.md");
    const say = `Saved [out/report.md](${host}) and [${host}](${host}), see [it](file://${host}).`;
    const message = await callThroughGraph(graph, "local_write_file", { path: "out/report.md", content: "# hi", say }, inThread("markdown"));
    expect(message.artifact).toEqual({ workspace_changes: [`${V}/workspace/out/report.md`] });
    // The link's text, a relative path of that file too, is rewritten as well.
    const shown = `${V}/workspace/out/report.md`;
    expect(message.content).toBe(`Saved [${shown}](${shown}) and [${shown}](${shown}), see [it](${shown}).`);
  });

  test("a large result with a run of millions of name characters and one character above U+00FF is translated, not failed", async () => {
    // A 2.4 MB binary as hex and a check mark: one unbounded regexp run over it overflowed V8's regexp stack.
    const say = `✓ wrote out.bin ${"0123456789abcdef".repeat(300_000)}`;
    const message = await callThroughGraph(graph, "local_write_file", { path: "out.bin", content: "x", say }, inThread("hex-run"));
    expect(message.status).toBe("success");
    expect(String(message.content).startsWith(`✓ wrote ${V}/workspace/out.bin 0123456789abcdef0123456789`)).toBe(true);
    expect(message.artifact).toEqual({ workspace_changes: [`${V}/workspace/out.bin`] });
  });
});

describe("an interceptor that sends a call again (a retry)", () => {
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  // The first attempt writes first.txt, then fails (an isError result, or a throw); the retry writes second.txt.
  const retry: McpToolInterceptor = async (request, next) => {
    const again = () => next(request.override({ args: { ...request.args, path: "second.txt" } }));
    try {
      const first = await next(request);
      return (first as CallToolResult).isError ? again() : first;
    } catch {
      return again();
    }
  };
  const failFirst: McpToolInterceptor = async (request, next) => {
    const outcome = await next(request);
    if (request.args.path !== "first.txt") return outcome;
    if (request.args.say === "throw") throw new Error("transient");
    return { ...(outcome as CallToolResult), isError: true };
  };
  beforeAll(async () => {
    const configPath = await writeConfig(await makeTempDir("mcp-paths-cfg-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["write_file"] }) } },
    });
    const dataDir = await realpath(await makeTempDir("mcp-paths-data-"));
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, interceptors: [retry, failFirst] });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit.close();
  });

  test.each(["ok", "throw"])("every attempt's files are listed, not only the last one's (first attempt: %s)", async (say) => {
    const run = { context: { user_id: "u" }, configurable: { thread_id: `retry-${say}` } };
    const message = await callThroughGraph(graph, "local_write_file", { path: "first.txt", content: "x", say }, run);
    expect(message.status).toBe("success");
    expect(message.artifact).toEqual({ workspace_changes: [`${V}/workspace/first.txt`, `${V}/workspace/second.txt`] });
  });
});

describe("a durable task's calls in its thread", () => {
  test("its results show /mnt/user-data/… paths, while the task id and status stay as the server sent them", async () => {
    const dataDir = await realpath(await makeTempDir("mcp-paths-task-"));
    const configPath = await writeConfig(await makeTempDir("mcp-paths-task-cfg-"), {
      mcpServers: { jobs: { type: "stdio", ...stdioFixture({ name: "jobs", toolNames: [], tasks: true }) } },
    });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
    try {
      const workspace = path.join(dataDir, "threads", "th-task", "user-data", "workspace");
      await mkdir(path.join(workspace, "reports"), { recursive: true });
      await writeFile(path.join(workspace, "reports", "q3.csv"), "a,b");
      const caller = toolkitTaskCaller(toolkit);
      const scope = { serverName: "jobs", userId: "u", threadId: "th-task" };
      // An id that is also the relative path of a file of the thread, and a label that is its host path.
      const label = path.join(workspace, "reports", "q3.csv");
      const submitted = await caller.callTool({ ...scope, toolName: "start_job", arguments: { label, remote_id: "reports/q3.csv" } });
      expect(submitted.result.structuredContent).toEqual({ task_id: "reports/q3.csv", status: "running" });
      const polled = await caller.callTool({ ...scope, toolName: "job_status", arguments: { task_id: "reports/q3.csv" } });
      expect(polled.result.structuredContent).toMatchObject({
        task_id: "reports/q3.csv",
        status: "completed",
        result: { label: `${V}/workspace/reports/q3.csv` },
      });
    } finally {
      await toolkit.close();
    }
  });
});

describe("a reference that names something refused: no shorter form of it stands for it", () => {
  let own: string;
  let ownUserData: string;
  beforeAll(async () => {
    const base = await realpath(await makeTempDir("mcp-paths-refused-"));
    ownUserData = path.join(base, "threads", "t", "user-data");
    own = path.join(ownUserData, "workspace");
    await mkdir(own, { recursive: true });
    await writeFile(path.join(own, "report.txt"), "x");
    await writeFile(path.join(base, "outside.txt"), "not the thread's");
    // A link escaping user-data, named report.txt\backup.
    await symlink(path.join(base, "outside.txt"), path.join(own, "report.txt\\backup"));
    // A dangling link, named report.txt\bad: something is there, though not a file.
    await symlink(path.join(base, "missing.txt"), path.join(own, "report.txt\\bad"));
  });
  const translated = async (input: string) =>
    ((await translateResultPaths({ content: [{ type: "text", text: input }] }, { userData: ownUserData, cwd: own, changed: [], scrub: (t) => t })).content[0] as { text: string }).text;

  test.each([
    ["as it stands", (p: string) => `restore from ${p}`],
    ["with a :line:col suffix", (p: string) => `error at ${p}:12:3`],
    ["JSON-encoded (report.txt\\\\backup)", (p: string) => JSON.stringify({ restore: p })],
  ])("%s: left as it is", async (_label, say) => {
    const text = say(`${own}/report.txt\\backup`);
    expect(await translated(text)).toBe(text);
  });

  test("a dangling link (report.txt\\bad) is something, not nothing: left as it is, not read as report.txt", async () => {
    const text = `restore from ${own}/report.txt\\bad`;
    expect(await translated(text)).toBe(text);
  });

  test("a file:// URL the URL parser refuses (an encoded '/' after a JSON escape) names nothing: its shorter form is rewritten", async () => {
    const url = pathToFileURL(path.join(own, "report.txt")).href;
    expect(await translated(JSON.stringify({ log: `saved ${url}\nnext=a%2Fb` }))).toBe(JSON.stringify({ log: `saved ${V}/workspace/report.txt\nnext=a%2Fb` }));
  });
});

describe("the _meta keys the protocol reserves", () => {
  test("a prefix whose second label, or one before its last, is mcp or modelcontextprotocol; not a server's own", () => {
    const meta = Object.fromEntries(
      ["io.modelcontextprotocol/related-task", "dev.mcp/a", "com.mcp.tools/b", "mcp.dev/c", "tools.mcp.com/d", "com.example.mcp/e", "mcp/f", "com.example/g", "h"].map((k) => [k, 1]),
    );
    expect(protocolMetaKeys(meta)).toEqual(["io.modelcontextprotocol/related-task", "dev.mcp/a", "com.mcp.tools/b", "mcp.dev/c", "tools.mcp.com/d"]);
  });
});

// No timer: the search runs in a worker, so one that does not end fails the test at its timeout instead of blocking it.
// A result is searched whole, before it is cut to the ToolMessage's bound: up to a stdio message's 64 MiB.
describe("a result's references are found in linear time", () => {
  const inWorker = workerRunner();
  const referencesInWorker = (token: string, count: number) =>
    inWorker(
      `const { pathReferences } = require(workerData.module);
       const text = workerData.token.repeat(workerData.count);
       parentPort.postMessage([...pathReferences({ content: [{ type: "text", text }] })]);`,
      { module: libModule("sessions/paths.ts"), token, count },
    );

  // Trailing punctuation was stripped by a search tried from each character of a run that does not end the token: ~12 ms
  // for each such token.
  test("paths glued to a long run of punctuation inside them (a dotted leader, then a page number): 32 MiB of them", async () => {
    const reference = `/w/notes.md${".".repeat(4000)}12`;
    expect(await referencesInWorker(`${reference} `, 8192)).toEqual([reference]);
  });

  // Each link's target was matched again to the token's end, and reported through one more callback per link.
  test("tokens made of chained markdown links (/a](/a](…): 40 MiB of them", async () => {
    expect(await referencesInWorker(`${"/a](".repeat(1000)} `, 10_485)).toEqual(["/a"]);
  });
});
