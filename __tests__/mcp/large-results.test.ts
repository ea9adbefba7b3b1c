import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { ContentBlock, ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createMcpToolkit, DEFAULT_MAX_RESULT_CHARS, RecordingLogger, type McpToolArtifact, type McpToolkit } from "../../lib";
import { boundConvertedResult, convertCallToolResult } from "../../lib/mcp/results";
import { responseIdOf, StdioLineBuffer } from "../../lib/sessions/stdio-buffer";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { stdioFixture, type StdioFixtureLaunch } from "../fixtures/stdio";

const MiB = 1024 * 1024;
const digits = (n: number) => "0123456789".repeat(Math.ceil(n / 10)).slice(0, n);
const note = (total: number, kept: number, max = DEFAULT_MAX_RESULT_CHARS) =>
  `[result truncated: showing ${kept} of ${total} characters (limit ${max}); the full result was not kept]`;

interface Harness {
  toolkit: McpToolkit;
  tools: Record<string, DynamicStructuredTool>;
  logger: RecordingLogger;
}

async function harness(name: string, launch: StdioFixtureLaunch, stdioMaxMessageBytes?: number): Promise<Harness> {
  const configPath = await writeConfig(await makeTempDir(`mcp-large-${name}-`), {
    // A discarded response must fail its call at once, long before this timeout.
    mcpServers: { [name]: { type: "stdio", ...launch, tool_call_timeout: 45 } },
  });
  const logger = new RecordingLogger();
  const toolkit = createMcpToolkit({ configPath, env: {}, logger, stdioMaxMessageBytes });
  return { toolkit, logger, tools: Object.fromEntries((await toolkit.getTools()).map((t) => [t.name, t])) };
}

let local: Harness;
let strict: Harness;
let id = 0;

beforeAll(async () => {
  [local, strict] = await Promise.all([
    harness("local", stdioFixture({ name: "local", toolNames: ["large", "pid"] })),
    harness("strict", stdioFixture({ name: "strict", toolNames: ["large", "pid"] }), MiB),
  ]);
});
afterAll(async () => {
  await Promise.all([local?.toolkit.close(), strict?.toolkit.close()]);
});

async function call(h: Harness, name: string, args: Record<string, unknown> = {}): Promise<ToolMessage> {
  return (await h.tools[name].invoke({ type: "tool_call", id: `l${++id}`, name, args })) as ToolMessage;
}

describe("large stdio results", () => {
  test("a 12 MiB result keeps the session and reaches the ToolMessage as a bounded preview with a note", async () => {
    const pid = (await call(local, "local_pid")).content;
    const chars = 12 * MiB;
    const message = await call(local, "local_large", { chars });
    expect(message.status).toBe("success");
    expect(message.content).toBe(`${digits(DEFAULT_MAX_RESULT_CHARS)}\n… ${note(chars, DEFAULT_MAX_RESULT_CHARS)}`);
    expect((await call(local, "local_pid")).content).toBe(pid);
  });

  test("structuredContent stays in the artifact only when its JSON fits the bound; otherwise a note says it was left out", async () => {
    const over = await call(local, "local_large", { chars: DEFAULT_MAX_RESULT_CHARS, structured: true });
    expect(over.content).toBe(digits(DEFAULT_MAX_RESULT_CHARS));
    const artifact = over.artifact as McpToolArtifact;
    expect(artifact.structuredContent).toBeUndefined();
    expect(artifact.note).toBe(
      `structuredContent (${DEFAULT_MAX_RESULT_CHARS + 11} characters of JSON) left out: larger than the limit of ${DEFAULT_MAX_RESULT_CHARS} characters; not kept`,
    );
  });

  test("a small result is unchanged", async () => {
    const small = await call(local, "local_large", { chars: 1000, structured: true });
    expect(small.content).toBe(digits(1000));
    expect(small.artifact).toEqual({ structuredContent: { data: digits(1000) } });
  });

  test("a message above stdioMaxMessageBytes fails its call with a clear error; the session (same pid) goes on", async () => {
    const pid = (await call(strict, "strict_pid")).content;
    const message = await call(strict, "strict_large", { chars: 2 * MiB });
    expect(message.status).toBe("error");
    expect(message.content).toMatch(
      /^MCP tool 'large' on server 'strict' failed: .*the server's response of \d+ bytes is larger than the stdio message limit of 1048576 bytes \(stdioMaxMessageBytes\); it was discarded$/,
    );
    expect((await call(strict, "strict_pid")).content).toBe(pid);
    expect(strict.logger.lines.some((r) => r.level === "warn" && /stdio message of \d+ bytes, above the limit/.test(r.message))).toBe(true);
  });
});

describe("boundConvertedResult", () => {
  // A block weighs its strings (text, data, URL, MIME type) and one more for itself.
  test("blocks past the bound are left out and a note ends the preview", () => {
    const image: ContentBlock.Standard = { type: "image", mimeType: "image/png", data: "A".repeat(80) };
    const bounded = boundConvertedResult(
      { content: [{ type: "text", text: "x".repeat(30) }, image, { type: "text", text: "y".repeat(50) }], artifact: undefined, isError: false },
      100,
    );
    expect(bounded.content).toEqual([
      { type: "text", text: "x".repeat(30) },
      { type: "text", text: "y".repeat(50) },
      { type: "text", text: note(172, 82, 100) },
    ]);
  });

  test("a workspace change list whose JSON passes the bound keeps its first paths, and the note says how many", () => {
    const changes = Array.from({ length: 12 }, (_, i) => `/mnt/user-data/workspace/f${String(i).padStart(2, "0")}`);
    const artifact = { structuredContent: { big: "s".repeat(200) }, workspace_changes: changes };
    const bounded = boundConvertedResult({ content: "ok", artifact, isError: false }, 100);
    // Each path is 30 characters of JSON with its quotes; three of them and the brackets and commas make 94.
    expect(bounded.artifact).toEqual({
      workspace_changes: changes.slice(0, 3),
      note:
        "structuredContent (210 characters of JSON) left out: larger than the limit of 100 characters; not kept; " +
        "workspace_changes lists 3 of 12 changed files: the list is limited to 100 characters of JSON",
    });
    expect(JSON.stringify(bounded.artifact?.workspace_changes).length).toBeLessThanOrEqual(100);
    // Four paths are 125 characters of JSON: exactly at the bound they fit, one below it they do not.
    const listed = (max: number) =>
      boundConvertedResult({ content: "ok", artifact: { workspace_changes: changes }, isError: false }, max).artifact?.workspace_changes;
    expect(listed(125)).toEqual(changes.slice(0, 4));
    expect(listed(124)).toEqual(changes.slice(0, 3));
    expect(artifact.workspace_changes).toHaveLength(12);
    const fits = { content: "ok", artifact: { workspace_changes: changes.slice(0, 3) }, isError: false };
    expect(boundConvertedResult(fits, 100)).toBe(fits);
  });

  test("text is cut to the bound", () => {
    const bounded = boundConvertedResult({ content: [{ type: "text", text: "z".repeat(150) }], artifact: undefined, isError: false }, 100);
    expect(bounded.content).toEqual([
      { type: "text", text: "z".repeat(99) },
      { type: "text", text: note(151, 100, 100) },
    ]);
  });

  /** No lone surrogate (what a cut inside a pair leaves). */
  const wellFormed = (text: string) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);

  test("a cut never splits a surrogate pair (an emoji), in text or in blocks", () => {
    const emoji = "😀".repeat(60);
    const text = boundConvertedResult({ content: emoji, artifact: undefined, isError: false }, 101).content as string;
    expect(text.startsWith(`${"😀".repeat(50)}\n…`)).toBe(true);
    const blocks = boundConvertedResult({ content: [{ type: "image", mimeType: "image/png", data: "A" }, { type: "text", text: emoji }], artifact: undefined, isError: false }, 40);
    for (const block of blocks.content as { text?: string }[]) expect(block.text === undefined || wellFormed(block.text)).toBe(true);
    const error = boundConvertedResult({ content: emoji, artifact: undefined, isError: true }, 101).content as string;
    expect(wellFormed(error)).toBe(true);
  });

  test("a long MIME type, or many empty blocks, count against the bound", () => {
    const link = { type: "file", url: "https://x/y", mimeType: `image/${"x".repeat(500)}` } as ContentBlock.Standard;
    expect((boundConvertedResult({ content: [link], artifact: undefined, isError: false }, 100).content as unknown[]).length).toBe(1);
    const empty = Array.from({ length: 1000 }, () => ({ type: "file", mimeType: "", data: "" }) as ContentBlock.Standard);
    expect((boundConvertedResult({ content: empty, artifact: undefined, isError: false }, 100).content as unknown[]).length).toBe(101);
  });

  test("an error's text is cut once, at the smaller bound, and its note counts what the server sent", () => {
    const converted = convertCallToolResult({ isError: true, content: [{ type: "text", text: "e".repeat(5000) }] });
    expect(boundConvertedResult(converted, 1000).content).toBe(`${"e".repeat(1000)}… [truncated 4000 characters]`);
    expect(boundConvertedResult(converted, DEFAULT_MAX_RESULT_CHARS).content).toBe(`${"e".repeat(4000)}… [truncated 1000 characters]`);
  });

  test("an error carried only in an embedded text resource or in structuredContent is shown to the model", () => {
    const embedded = convertCallToolResult({ isError: true, content: [{ type: "resource", resource: { uri: "x:/e", text: "quota exceeded" } }] });
    expect(embedded.content).toBe("quota exceeded");
    const structured = convertCallToolResult({ isError: true, content: [], structuredContent: { code: "E42" } });
    expect(structured.content).toBe('{"code":"E42"}');
  });

  test("structuredContent that is no object is shown as text, not kept as the artifact", () => {
    const array = convertCallToolResult({ content: [], structuredContent: [1, 2] as never });
    expect([array.content, array.artifact]).toEqual(["[1,2]", undefined]);
    const text = convertCallToolResult({ content: [], structuredContent: "plain" as never });
    expect([text.content, text.artifact]).toEqual(['"plain"', undefined]);
  });

  test("an artifact value with no JSON (a BigInt an interceptor returned) is left out with a note, and the call succeeds", () => {
    const converted = convertCallToolResult({ content: [{ type: "text", text: "ok" }], structuredContent: { id: 123n } as never });
    const bounded = boundConvertedResult(converted, 1000);
    expect(bounded.content).toBe("ok");
    expect(bounded.artifact).toEqual({ note: "structuredContent left out: not JSON-serializable; not kept" });
  });
});

describe("StdioLineBuffer", () => {
  test("reads messages split across chunks and several per chunk", () => {
    const buffer = new StdioLineBuffer(1024);
    const a = JSON.stringify({ jsonrpc: "2.0", id: 1, result: { ok: 1 } });
    const b = JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "t", progress: 1 } });
    buffer.append(Buffer.from(a.slice(0, 10)));
    expect(buffer.readMessage()).toBeNull();
    buffer.append(Buffer.from(`${a.slice(10)}\n${b}\r\n`));
    expect(buffer.readMessage()).toEqual(JSON.parse(a));
    expect(buffer.readMessage()).toEqual(JSON.parse(b));
    expect(buffer.readMessage()).toBeNull();
  });

  test("an oversized response becomes an error response for its id; the next message is read", () => {
    const discarded: unknown[] = [];
    const buffer = new StdioLineBuffer(100, (d) => discarded.push(d));
    const big = JSON.stringify({ result: { content: [{ type: "text", text: "q".repeat(500), id: 9 }] }, jsonrpc: "2.0", id: 7 });
    for (let i = 0; i < big.length; i += 64) buffer.append(Buffer.from(big.slice(i, i + 64)));
    buffer.append(Buffer.from(`\n${JSON.stringify({ jsonrpc: "2.0", id: 8, result: {} })}\n`));
    expect(buffer.readMessage()).toMatchObject({ jsonrpc: "2.0", id: 7, error: { code: -32603 } });
    expect(buffer.readMessage()).toEqual({ jsonrpc: "2.0", id: 8, result: {} });
    expect(discarded).toEqual([{ bytes: big.length, id: 7 }]);
  });

  test("an oversized response whose id comes last is recognised when only its last short read is over the limit", () => {
    const shape = (n: number) => JSON.stringify({ result: { content: [{ type: "text", text: "x".repeat(n) }] }, jsonrpc: "2.0", id: 7 });
    const message = shape(1024 + 2 - shape(0).length); // 2 bytes over: all but its last 4 bytes fit
    for (const cut of [message.length - 4, message.length - 1]) {
      const buffer = new StdioLineBuffer(1024);
      for (let i = 0; i < cut; i += 300) buffer.append(Buffer.from(message.slice(i, Math.min(i + 300, cut))));
      buffer.append(Buffer.from(`${message.slice(cut)}\n`));
      expect(buffer.readMessage()).toMatchObject({ id: 7, error: { code: -32603 } });
    }
  });

  test("blank lines are skipped, and a line over the limit is discarded even when one chunk holds all of it", () => {
    const discarded: unknown[] = [];
    const buffer = new StdioLineBuffer(100, (d) => discarded.push(d));
    const big = JSON.stringify({ jsonrpc: "2.0", id: 4, result: { text: "é".repeat(80) } });
    const small = { jsonrpc: "2.0", id: 5, result: { text: "é" } };
    buffer.append(Buffer.from(`\n \r\n${big}\n\t\n${JSON.stringify(small)}\r\n\n`));
    expect(buffer.readMessage()).toMatchObject({ id: 4, error: { code: -32603 } });
    expect(buffer.readMessage()).toEqual(small);
    expect(buffer.readMessage()).toBeNull();
    expect(discarded).toEqual([{ bytes: Buffer.byteLength(big), id: 4 }]);
  });

  test("a message of exactly the limit is read also when it ends in CRLF, whole or split anywhere across chunks", () => {
    const message = { jsonrpc: "2.0", id: 6, result: { text: "" } };
    message.result.text = "x".repeat(100 - JSON.stringify(message).length);
    const line = `${JSON.stringify(message)}\r\n`;
    expect(Buffer.byteLength(line)).toBe(102);
    for (let cut = 0; cut <= line.length; cut += 1) {
      const discarded: unknown[] = [];
      const buffer = new StdioLineBuffer(100, (d) => discarded.push(d));
      buffer.append(Buffer.from(line.slice(0, cut)));
      buffer.append(Buffer.from(line.slice(cut)));
      expect([buffer.readMessage(), discarded]).toEqual([message, []]);
    }
    // One byte more is over the limit, CR or not.
    const over = new StdioLineBuffer(100);
    over.append(Buffer.from(`${JSON.stringify(message)} \r\n`));
    expect(over.readMessage()).toMatchObject({ id: 6, error: { code: -32603 } });
  });

  test("response ids are found at either end, and only for responses", () => {
    expect(responseIdOf('{"jsonrpc":"2.0","id":"a\\"b","result":{"x":', "")).toBe('a"b');
    expect(responseIdOf('{"result":{"content":[', ',"id":9}]},"jsonrpc":"2.0","id":3}')).toBe(3);
    expect(responseIdOf('{"result":{"content":[', '"id":9}]}}')).toBeUndefined();
    expect(responseIdOf('{"method":"sampling/createMessage","params":{', ',"jsonrpc":"2.0","id":0}')).toBeUndefined();
  });
});
