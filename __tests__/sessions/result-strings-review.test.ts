/**
 * Review of `mapResultStrings` (shared by `withNamedPaths` and `translateResultPaths`): results of unusual shape are
 * rewritten where they were before and kept whole elsewhere, against a real thread folder.
 */
import { beforeAll, describe, expect, test } from "@jest/globals";
import { mkdir, realpath, writeFile } from "node:fs/promises";
import * as path from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { withNamedPaths } from "../../lib/sessions/argument-paths";
import { translateResultPaths, type PathContext } from "../../lib/sessions/paths";
import { makeTempDir } from "../fixtures/config";

const V = "/mnt/user-data/workspace";
let ctx: PathContext;
let file: string;

beforeAll(async () => {
  const userData = path.join(await realpath(await makeTempDir("mcp-result-strings-")), "threads", "t", "user-data");
  const workspace = path.join(userData, "workspace");
  await mkdir(workspace, { recursive: true });
  file = path.join(workspace, "r.txt");
  await writeFile(file, "x");
  ctx = { userData, cwd: workspace, changed: [], scrub: (text) => text };
});

function nested(depth: number, leaf: unknown): unknown {
  let value = leaf;
  for (let i = 0; i < depth; i += 1) value = { d: value };
  return value;
}

/** A result of an unusual shape, and what it is once `file` reads as `${V}/r.txt` (`F` stands for the host path). */
const shapes = (): [string, () => CallToolResult, unknown][] => [
  [
    "structuredContent an array (left: no object, as before)",
    () => ({ content: [{ type: "text", text: "ok" }], structuredContent: [file] as unknown as Record<string, unknown> }),
    { content: [{ type: "text", text: "ok" }], structuredContent: ["F"] },
  ],
  [
    "structuredContent null",
    () => ({ content: [{ type: "text", text: file }], structuredContent: null as unknown as Record<string, unknown> }),
    { content: [{ type: "text", text: `${V}/r.txt` }], structuredContent: null },
  ],
  [
    "only _meta names the file",
    () => ({ content: [{ type: "text", text: "ok" }], _meta: { where: file } }),
    { content: [{ type: "text", text: "ok" }], _meta: { where: `${V}/r.txt` } },
  ],
  [
    "_meta with reserved and own keys",
    () => ({ content: [], _meta: { "io.modelcontextprotocol/related": file, "com.example.mcp/out": file } }),
    { content: [], _meta: { "io.modelcontextprotocol/related": "F", "com.example.mcp/out": `${V}/r.txt` } },
  ],
  ["no content, a path in structuredContent", () => ({ structuredContent: { p: file } }) as unknown as CallToolResult, { structuredContent: { p: `${V}/r.txt` }, content: [] }],
  [
    "structuredContent 512 deep",
    () => ({ content: [{ type: "text", text: "ok" }], structuredContent: nested(511, file) as Record<string, unknown> }),
    { content: [{ type: "text", text: "ok" }], structuredContent: nested(511, `${V}/r.txt`) },
  ],
  [
    "a kept key",
    () => ({ content: [{ type: "text", text: "ok" }], structuredContent: { taskId: file, other: file } }),
    { content: [{ type: "text", text: "ok" }], structuredContent: { taskId: "F", other: `${V}/r.txt` } },
  ],
];

const shown = (value: unknown): unknown => JSON.parse(JSON.stringify(value).split(JSON.stringify(file).slice(1, -1)).join("F")) as unknown;

describe.each([
  ["translateResultPaths", (result: CallToolResult) => translateResultPaths(result, ctx, ["taskId"])],
  ["withNamedPaths", (result: CallToolResult) => Promise.resolve(withNamedPaths(result, new Map([[file, `${V}/r.txt`]]), ["taskId"]))],
])("%s on results of unusual shapes (as before mapResultStrings)", (_name, map) => {
  test.each(shapes())("%s", async (_label, make, expected) => {
    const result = make();
    const out = await map(result);
    expect(shown(out)).toEqual(expected);
    // What nothing changed is kept as it is.
    if (JSON.stringify(out.content) === JSON.stringify(result.content)) expect(out.content).toBe(result.content);
  });
});
