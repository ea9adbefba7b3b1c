/**
 * Servers that quote a credential in a form that is not the header value itself: a PIN as a JSON number, the
 * decoded Basic `user:password`, one cookie pair, a stderr line longer than the pending limit with a secret
 * split across two writes, and an interceptor answering with a Command that carries the headers into other
 * state keys and to another node. None of it reaches a ToolMessage, the state, a checkpoint or a log line.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { AIMessage, ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { Annotation, Command, END, MemorySaver, MessagesAnnotation, Send, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolCalls, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { rawHeaderValues } from "../fixtures/http-common";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";
import { stdioFixture } from "../fixtures/stdio";

const PIN = "482913";
const BASIC = `Basic ${Buffer.from("alice:hunter2pw").toString("base64")}`;
// The pair echoed is not the token after the first space (which was already a secret).
const COOKIE = "theme=dark; sid=s3ss10nV4l; tz=UTC9";
/** Letters that appear nowhere else in a stderr log line ("MCP server 'split' stderr: …", "[redacted]", "[truncated …]"). */
const SPLIT_KEY = "QZXJVWKY";
/** A key of three lines, made of the same letters; the fixture's first write ends after its first line break. */
const PEM_KEY = "QZXJ-one\nVWKY-two\nQZXJ-six";
/** A key whose `user:<key>` the fixture writes to stderr as base64 in lines of 20 (MIME-like), over two writes. */
const MIME_KEY = "sk-live-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0";
const MIME_BASE64 = Buffer.from(`user:${MIME_KEY}`).toString("base64");
/** With the 9-character tail, the fixture's first write ends right after the second line break. */
const MIME_WRAPPED = `${MIME_BASE64.replace(/.{20}/g, "$&\n")} trailing`;
/** Two characters: too short for a base64 run of its own. */
const TWO = "W7";
const CONTEXT = { user_id: "alice", secrets: { basic: BASIC, cookie: COOKIE, pin: PIN, two: TWO } };
const SECRETS = [PIN, "hunter2pw", "s3ss10nV4l", BASIC.slice(6), SPLIT_KEY];

let http: HttpFixture;
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];
let graph: ToolNodeGraph;
/** A RecordingLogger a test can wait on for a line, instead of polling it. */
class WaitingLogger extends RecordingLogger {
  readonly #waiters = new Set<{ matches: (message: string) => boolean; resolve: () => void }>();

  override debug(message: string): void {
    super.debug(message);
    for (const waiter of this.#waiters) {
      if (!waiter.matches(message)) continue;
      this.#waiters.delete(waiter);
      waiter.resolve();
    }
  }

  waitFor(matches: (message: string) => boolean): Promise<void> {
    return new Promise((resolve) => this.#waiters.add({ matches, resolve }));
  }
}

const logger = new WaitingLogger();
const checkpointer = new MemorySaver();
let thread = 0;

/** For `echo` calls with text "command": a Command quoting the headers in every place a Command can carry them. */
const commandQuotingHeaders: McpToolInterceptor = async (request, next) => {
  if (request.toolName !== "echo" || request.args.text !== "command") return next(request);
  const quoted = JSON.stringify(request.headers);
  const pin = Number(request.headers["X-Pin"]);
  return new Command({
    update: {
      messages: new ToolMessage({
        content: `headers ${quoted}`,
        artifact: { pin },
        tool_call_id: request.runtime?.toolCallId ?? "none",
        name: "parts_echo",
      }),
      copied: { headers: request.headers, pin, note: new AIMessage({ content: `copied ${quoted}`, id: "note-1" }) },
    },
    goto: new Send("audit", { seen: request.headers, pin }),
  });
};

beforeAll(async () => {
  http = await startHttpFixture({ name: "parts", toolNames: ["decode_credentials", "echo", "leak", "split_header"] });
  const split = stdioFixture({ name: "split", toolNames: ["stderr_split", "leak", "split_header"] });
  const dir = await makeTempDir("mcp-echo-parts-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      parts: {
        type: "http",
        url: http.url,
        headers_from_context: { headers: { Authorization: "basic", Cookie: "cookie", "X-Pin": "pin", "X-Two": "two" } },
      },
      split: { type: "stdio", command: split.command, args: split.args, env: { ...split.env, SPLIT_KEY: "${SPLIT_KEY}" } },
      pem: { type: "stdio", command: split.command, args: split.args, env: { ...split.env, PEM_KEY: "${PEM_KEY}" } },
      mime: { type: "stdio", command: split.command, args: split.args, env: { ...split.env, MIME_KEY: "${MIME_KEY}", MIME_WRAPPED } },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: { SPLIT_KEY, PEM_KEY, MIME_KEY }, logger, interceptors: [commandQuotingHeaders] });
  tools = await toolkit.getTools();
  graph = toolNodeGraph(tools, checkpointer);
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

function call(name: string, args: Record<string, unknown>): Promise<ToolMessage> {
  return callThroughGraph(graph, name, args, { context: CONTEXT, configurable: { thread_id: `parts-${++thread}` } });
}

async function checkpointsOf(threadId: string): Promise<string> {
  const tuples: string[] = [];
  for await (const tuple of checkpointer.list({ configurable: { thread_id: threadId } })) tuples.push(JSON.stringify(tuple));
  return tuples.join("\n");
}

function expectNoSecret(text: string): void {
  for (const secret of SECRETS) {
    for (const form of [secret, encodeURIComponent(secret), Buffer.from(secret).toString("base64")]) expect(text).not.toContain(form);
  }
}

describe("a server quoting part of a credential", () => {
  test("the credentials reached the server as sent", async () => {
    await call("parts_decode_credentials", { show: "basic" });
    const last = http.requests.filter((r) => r.rpcMethods?.includes("tools/call")).pop()!;
    expect(rawHeaderValues(last, "authorization")).toEqual([BASIC]);
    expect(rawHeaderValues(last, "cookie")).toEqual([COOKIE]);
    expect(rawHeaderValues(last, "x-pin")).toEqual([PIN]);
  });

  test("a PIN sent as a header and returned as a JSON number in structuredContent: redacted in artifact and text", async () => {
    const message = await call("parts_decode_credentials", { show: "numbers" });
    const artifact = message.artifact as { structuredContent: Record<string, unknown> };
    // Other numbers stay numbers.
    expect(artifact.structuredContent).toEqual({ "content-length": expect.any(Number), "x-pin": "[redacted]" });
    expect(JSON.parse(String(message.content))).toEqual(artifact.structuredContent);
    expectNoSecret(JSON.stringify(message.toDict()) + (await checkpointsOf(`parts-${thread}`)));
  });

  test("a server decoding Basic and echoing 'authenticated as alice:hunter2pw'", async () => {
    const message = await call("parts_decode_credentials", { show: "basic" });
    expect(message.content).toBe("authenticated as [redacted]");
  });

  test("a server echoing one cookie pair", async () => {
    const message = await call("parts_decode_credentials", { show: "cookie", name: "sid" });
    expect(message.content).toBe("cookie [redacted]");
  });
});

/** The stderr lines `server` logs while its `stderr_split` tool runs, once the tool's last line is logged. */
async function stderrOfSplit(server: string, args: { env: string; copies: number; pauseMs: number }): Promise<string[]> {
  const prefix = `MCP server '${server}' stderr: `;
  const before = logger.lines.length;
  const done = logger.waitFor((message) => message === `${prefix}stderr_split done`);
  await call(`${server}_stderr_split`, args);
  await done;
  return logger.messages().slice(before).filter((message) => message.startsWith(prefix));
}

describe("a server cutting a credential over several text blocks", () => {
  test.each([
    ["raw, over two blocks", { parts: 2 }],
    ["raw, over three blocks", { parts: 3 }],
    ["as base64, over two blocks (joined: wrapped base64)", { parts: 2, base64: true }],
    ["as base64, over two blocks of an error", { parts: 2, base64: true, error: true }],
    ["a cookie value cut in two", { name: "Cookie", parts: 2 }],
  ])("%s: no piece of it reaches the ToolMessage", async (_label, args) => {
    const message = await call("parts_split_header", { name: "Authorization", ...args });
    expect(String(message.content)).not.toContain("s3ss10nV4l".slice(0, 6));
    expect(message.status).toBe("error" in args ? "error" : "success");
    const text = JSON.stringify(message.toDict());
    const shown = String(message.content).replace(/\n/g, "");
    expect(shown).toContain("[redacted]");
    for (const secret of SECRETS) expect(shown).not.toContain(secret);
    expect(shown).not.toContain(BASIC);
    expect(shown).not.toContain(Buffer.from(BASIC).toString("base64").slice(0, 12));
    expect(Buffer.from(shown.replace(/\[redacted\]/g, ""), "base64").toString("latin1")).not.toContain("hunter2");
    expect(text).not.toContain(BASIC.slice(6));
  });
});

describe("a stdio server cutting a multi-line secret at its line breaks, one text block per line", () => {
  test("the ToolMessage, which shows the blocks one per line, shows none of its lines", async () => {
    const message = await call("pem_split_header", { name: "PEM_KEY", env: true, lines: true });
    for (const line of PEM_KEY.split("\n")) expect(String(message.content)).not.toContain(line);
    expect(String(message.content)).toContain("[redacted]");
  });
});

describe("a server echoing a two-character secret and a secret with line breaks", () => {
  test("a two-character header value in base64, alone or in 'user:<value>', is blanked with its token", async () => {
    const message = await call("parts_leak", {});
    const text = JSON.stringify(message.toDict());
    for (const form of [TWO, Buffer.from(TWO).toString("base64"), Buffer.from(`user:${TWO}`).toString("base64url")]) expect(text).not.toContain(form);
    expect(text).toContain("[redacted]");
  });

  test("a PEM-like $VAR echoed a line per content block and with CRLF line ends never comes back whole or in lines", async () => {
    const message = await call("pem_leak", { env: ["PEM_KEY"] });
    const text = JSON.stringify(message.toDict());
    for (const line of PEM_KEY.split("\n")) expect(text).not.toContain(line);
    expect(String(message.content)).toContain("[redacted]\n[redacted]\n[redacted]");
  });
});

describe("a stdio server's stderr line longer than the pending limit", () => {
  test("a secret split across two writes after more than 64 KiB is never logged, not even in part", async () => {
    // 9000 copies of "<key> " (81 000 characters) before the split one: the line is cut while the key is half-read.
    const lines = await stderrOfSplit("split", { env: "SPLIT_KEY", copies: 9000, pauseMs: 300 });
    for (const line of lines) expect(line).not.toMatch(/[QZXJVWKY]/);
    // The key's line came in two pieces at least, both scrubbed, and then the line after it.
    expect(lines.length).toBeGreaterThanOrEqual(3);
    expect(lines.filter((line) => line.includes("[redacted]")).length).toBeGreaterThanOrEqual(2);
  });
});

describe("a stdio server writing a multi-line secret to stderr in two writes", () => {
  test("each line of the secret is scrubbed, also the line logged before the rest of the secret arrived", async () => {
    expect(await stderrOfSplit("pem", { env: "PEM_KEY", copies: 0, pauseMs: 300 })).toEqual([
      "MCP server 'pem' stderr: [redacted]",
      "MCP server 'pem' stderr: [redacted]",
      "MCP server 'pem' stderr: [redacted]",
      "MCP server 'pem' stderr: stderr_split done",
    ]);
  });
});

describe("a stdio server writing a secret's base64 wrapped over lines to stderr in two writes", () => {
  test("no line of it is logged, also the lines written before the rest of the run arrived", async () => {
    expect(MIME_WRAPPED.slice(0, Math.ceil(MIME_WRAPPED.length / 2)).endsWith("\n")).toBe(true);
    const lines = await stderrOfSplit("mime", { env: "MIME_WRAPPED", copies: 0, pauseMs: 300 });
    const logged = lines.map((line) => line.slice("MCP server 'mime' stderr: ".length)).join("\n");
    for (const piece of MIME_BASE64.match(/.{20}/g)!) expect(logged).not.toContain(piece);
    expect(logged).toContain("[redacted]");
    expect(lines[lines.length - 1]).toBe("MCP server 'mime' stderr: stderr_split done");
  });
});

describe("an interceptor answering with a Command quoting the headers", () => {
  test("a single ToolMessage, another state key holding an AIMessage, and a Send's args reach the graph scrubbed", async () => {
    const State = Annotation.Root({
      ...MessagesAnnotation.spec,
      copied: Annotation<unknown>(),
      audited: Annotation<unknown[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
    });
    const commandGraph = new StateGraph(State)
      .addNode("tools", new ToolNode(tools), { ends: ["audit"] })
      .addNode("audit", (args: unknown) => ({ audited: [args] }))
      .addEdge(START, "tools")
      .addEdge("audit", END)
      .compile({ checkpointer });
    const threadId = `parts-${++thread}`;
    const state = await commandGraph.invoke(
      { messages: [toolCalls([{ name: "parts_echo", args: { text: "command" } }])] },
      { context: CONTEXT, configurable: { thread_id: threadId } },
    );

    const message = state.messages.find((m) => ToolMessage.isInstance(m))!;
    expect(String(message.content)).toMatch(/^headers \{.*\[redacted\]/);
    expect((message as ToolMessage).artifact).toEqual({ pin: "[redacted]" });
    const copied = state.copied as { headers: Record<string, string>; pin: unknown; note: AIMessage };
    expect(copied.headers.Authorization).toBe("[redacted]");
    expect(copied.pin).toBe("[redacted]");
    expect(AIMessage.isInstance(copied.note)).toBe(true);
    expect(copied.note.id).toBe("note-1");
    expect(String(copied.note.content)).toMatch(/^copied \{.*\[redacted\]/);
    expect(state.audited).toEqual([{ seen: expect.objectContaining({ Cookie: "[redacted]", "X-Pin": "[redacted]" }), pin: "[redacted]" }]);
    expectNoSecret(JSON.stringify(state) + (await checkpointsOf(threadId)));
  });
});
