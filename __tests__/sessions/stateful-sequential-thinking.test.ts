/**
 * The official sequential-thinking MCP server (@modelcontextprotocol/server-sequential-thinking), a stateful stdio
 * server: it keeps the thought history in its process memory. One child per (server, user, thread) (SPEC §5.1), so a
 * thread's history goes on across its calls and no other thread or user sees it. The server draws each thought as a
 * box on stderr (ANSI colours via chalk when forced): that goes to the operator's debug log, escaped and bounded, and
 * never to the model.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { readFileSync } from "node:fs";
import { realpath } from "node:fs/promises";
import * as path from "node:path";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createAgent } from "langchain";
import { z } from "zod";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, seenByModel, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { alive, pidsWithMarker, waitUntil } from "../fixtures/processes";

const SERVER = require.resolve("@modelcontextprotocol/server-sequential-thinking/dist/index.js");
const MARKER = `seqthink-marker-${process.pid}-${Date.now()}`;
const TOOL = "think_sequentialthinking";

const logger = new RecordingLogger();
let dataDir: string;
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];
let graph: ToolNodeGraph;

beforeAll(async () => {
  dataDir = await realpath(await makeTempDir("mcp-seqthink-data-"));
  const configPath = await writeConfig(await makeTempDir("mcp-seqthink-"), {
    mcpServers: {
      // FORCE_COLOR: chalk colours its boxes as it would on an operator's terminal (stdout is a pipe here).
      think: { type: "stdio", command: process.execPath, args: [SERVER, MARKER], env: { FORCE_COLOR: "3" } },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir });
  tools = await toolkit.getTools();
  graph = toolNodeGraph(tools);
});
afterAll(async () => {
  await toolkit.close();
  expect(await waitUntil(() => pidsWithMarker(MARKER).length === 0)).toBe(true);
});

const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");
/** The live child whose cwd is `thread`'s workspace and whose user is `user`'s (one per (user, thread)). */
const childrenOf = (thread: string) =>
  pidsWithMarker(MARKER).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`TMPDIR=${path.join(workspaceOf(thread), ".mcp", "tmp")}`);
    } catch {
      return false;
    }
  });

function think(thought: string, thoughtNumber: number, user: string, thread: string, extra: Record<string, unknown> = {}) {
  return callThroughGraph(
    graph,
    TOOL,
    { thought, thoughtNumber, totalThoughts: 3, nextThoughtNeeded: true, ...extra },
    { context: { user_id: user }, configurable: { thread_id: thread } },
  );
}

const historyLength = (message: ToolMessage): number => (JSON.parse(String(message.content)) as { thoughtHistoryLength: number }).thoughtHistoryLength;

describe("the thought history is per (user, thread)", () => {
  test("the tool is listed under the server's prefix with the schema the server declares", () => {
    expect(tools.map((t) => t.name)).toEqual([TOOL]);
    const schema = tools[0].schema as { properties: Record<string, unknown>; required: string[] };
    expect(schema.required).toEqual(["thought", "nextThoughtNeeded", "thoughtNumber", "totalThoughts"]);
    // What the server's zod v4 schema (a boolean-or-string union, a coerced integer) declares is passed on as it is.
    expect(schema.properties.nextThoughtNeeded).toEqual({ description: "Whether another thought step is needed", type: ["boolean", "string"] });
    expect(schema.properties.thoughtNumber).toMatchObject({ type: "integer", minimum: 1 });
  });

  test("thread A's history grows across its calls; thread B and user B on thread A start fresh, each in a child of its own", async () => {
    expect(historyLength(await think("a1", 1, "alice", "seq-a"))).toBe(1);
    expect(historyLength(await think("a2", 2, "alice", "seq-a"))).toBe(2);
    expect(historyLength(await think("b1", 1, "alice", "seq-b"))).toBe(1);
    expect(historyLength(await think("bob1", 1, "bob", "seq-a"))).toBe(1);
    expect(historyLength(await think("a3", 3, "alice", "seq-a"))).toBe(3);
    // alice and bob on seq-a: two children of that workspace; seq-b: one.
    const a = childrenOf("seq-a");
    const b = childrenOf("seq-b");
    expect(a).toHaveLength(2);
    expect(b).toHaveLength(1);
    expect(new Set([...a, ...b]).size).toBe(3);
  });

  test("the result's structured content is the message artifact; the text is the server's JSON", async () => {
    const message = await think("s1", 1, "alice", "seq-structured");
    expect(message.status).toBe("success");
    expect(JSON.parse(String(message.content))).toEqual({
      thoughtNumber: 1,
      totalThoughts: 3,
      nextThoughtNeeded: true,
      branches: [],
      thoughtHistoryLength: 1,
    });
    expect((message.artifact as { structuredContent?: unknown }).structuredContent).toEqual(JSON.parse(String(message.content)));
  });

  test("through createAgent: the agent's own thread keeps one history across its steps", async () => {
    const model = new ScriptedChatModel([
      ScriptedChatModel.toolCall(TOOL, { thought: "plan", thoughtNumber: 1, totalThoughts: 2, nextThoughtNeeded: true }, "t1"),
      ScriptedChatModel.toolCall(TOOL, { thought: "check", thoughtNumber: 2, totalThoughts: 2, nextThoughtNeeded: false }, "t2"),
      { content: "done" },
    ]);
    const agent = createAgent({ model, tools, contextSchema: z.object({ user_id: z.string() }) });
    const result = await agent.invoke(
      { messages: [new HumanMessage("think")] },
      { context: { user_id: "carol" }, configurable: { thread_id: "seq-agent" } },
    );
    const messages = (result.messages as BaseMessage[]).filter((m): m is ToolMessage => ToolMessage.isInstance(m));
    expect(messages.map((m) => [m.tool_call_id, m.status, historyLength(m)])).toEqual([
      ["t1", "success", 1],
      ["t2", "success", 2],
    ]);
  });
});

describe("arguments the server's schema refuses", () => {
  test("a thought number below 1 is one clean line naming the field; the session (and its history) is kept", async () => {
    const [pid] = childrenOf("seq-valid");
    expect(pid).toBeUndefined();
    expect(historyLength(await think("v1", 1, "alice", "seq-valid"))).toBe(1);
    const [child] = childrenOf("seq-valid");
    const message = await think("v0", 0, "alice", "seq-valid");
    expect(message.status).toBe("error");
    expect(message.content).toBe(`Invalid arguments for tool '${TOOL}'; fix them and call it again:\nthoughtNumber: expected a number >= 1`);
    expect(historyLength(await think("v2", 2, "alice", "seq-valid"))).toBe(2);
    expect(childrenOf("seq-valid")).toEqual([child]);
  });

  test("a missing required field is one clean line naming it", async () => {
    const message = await callThroughGraph(
      graph,
      TOOL,
      { thought: "x", thoughtNumber: 1, totalThoughts: 1 },
      { context: { user_id: "alice" }, configurable: { thread_id: "seq-valid" } },
    );
    expect(message.status).toBe("error");
    expect(message.content).toBe(`Invalid arguments for tool '${TOOL}'; fix them and call it again:\nnextThoughtNeeded: required field missing`);
  });

  test('the declared schema is what is checked: "false" (boolean or string) passes, numeric strings are refused per field', async () => {
    // The server's zod schema coerces "3" to 3, but the JSON schema it declares says integer: the model is told so.
    const refused = await callThroughGraph(
      graph,
      TOOL,
      { thought: "coerced", thoughtNumber: "3", totalThoughts: "3", nextThoughtNeeded: "false" },
      { context: { user_id: "alice" }, configurable: { thread_id: "seq-valid" } },
    );
    expect(refused.content).toBe(
      `Invalid arguments for tool '${TOOL}'; fix them and call it again:\nthoughtNumber: expected integer\ntotalThoughts: expected integer`,
    );
    const accepted = await callThroughGraph(
      graph,
      TOOL,
      { thought: "coerced", thoughtNumber: 3, totalThoughts: 3, nextThoughtNeeded: "false" },
      { context: { user_id: "alice" }, configurable: { thread_id: "seq-valid" } },
    );
    expect(accepted.status).toBe("success");
    expect(JSON.parse(String(accepted.content))).toMatchObject({ thoughtNumber: 3, nextThoughtNeeded: false, thoughtHistoryLength: 3 });
  });
});

describe("the server's stderr boxes", () => {
  const ESC = "\u001b";
  const FORGED = "\n[mcp-harness] forged line\r\u001b]0;title\u0007\u202eevil";
  let stderrLines: string[];

  beforeAll(async () => {
    const message = await think(`hostile${FORGED}`, 1, "alice", "seq-stderr");
    expect(message.status).toBe("success");
    // A thought far longer than a log line.
    const long = await think("L".repeat(200_000), 2, "alice", "seq-stderr");
    expect(historyLength(long)).toBe(2);
    // The boxes come on stderr, apart from the result: wait for the last box's bottom edge to be logged.
    expect(await waitUntil(() => logger.messages("debug").filter((m) => m.includes("stderr: └")).length >= 2)).toBe(true);
    stderrLines = logger.messages().filter((m) => m.startsWith("MCP server 'think' stderr: "));
  });

  test("reach the operator's debug log, one log line per box line, named by server", () => {
    expect(stderrLines.some((m) => m.includes("Sequential Thinking MCP Server running on stdio"))).toBe(true);
    expect(stderrLines.some((m) => m.includes("💭 Thought"))).toBe(true);
    expect(stderrLines.some((m) => m.includes("┌─"))).toBe(true);
    for (const line of logger.lines.filter((l) => l.message.includes("stderr:"))) expect(line.level).toBe("debug");
  });

  test("with no terminal control character left raw: chalk's colours and the model's own escapes are shown escaped", () => {
    // eslint-disable-next-line no-control-regex
    const control = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
    for (const line of logger.messages()) expect(line).not.toMatch(control);
    expect(stderrLines.some((m) => m.includes("\\x1b[34m💭 Thought"))).toBe(true);
    expect(stderrLines.some((m) => m.includes("\\x1b]0;title\\x07\\u202eevil"))).toBe(true);
    // The thought's line break began a new log line, still marked as the server's stderr: no line of ours is forged.
    expect(logger.messages().filter((m) => m.startsWith("[mcp-harness] forged line"))).toEqual([]);
    expect(stderrLines.some((m) => m.includes(ESC))).toBe(false);
  });

  test("bounded: a 200 000-character thought makes no log line longer than the bound and its note", () => {
    const longest = Math.max(...logger.messages().map((m) => m.length));
    expect(longest).toBeLessThan(700);
    expect(stderrLines.some((m) => /… \[truncated \d+ characters\]$/.test(m))).toBe(true);
  });

  test("none of it reaches the model", async () => {
    const message = await think("quiet", 3, "alice", "seq-stderr");
    expect(seenByModel(message)).not.toContain("┌");
    expect(seenByModel(message)).not.toContain("💭");
    expect(seenByModel(message)).not.toContain("\\u001b");
  });
});

describe("a per-request secret the model puts in a thought", () => {
  const SECRET = 'th0ught-"S3cret"/k+y';
  test("is blanked in the box the server draws on stderr, and in the result", async () => {
    const message = await callThroughGraph(
      graph,
      TOOL,
      { thought: `use ${SECRET} now`, thoughtNumber: 1, totalThoughts: 1, nextThoughtNeeded: false },
      { context: { user_id: "alice", secrets: { api_key: SECRET } }, configurable: { thread_id: "seq-secret" } },
    );
    expect(message.status).toBe("success");
    expect(await waitUntil(() => logger.messages().some((m) => m.includes("│ use [redacted] now")))).toBe(true);
    for (const line of logger.messages()) {
      expect(line).not.toContain(SECRET);
      expect(line).not.toContain(JSON.stringify(SECRET).slice(1, -1));
      expect(line).not.toContain("S3cret");
    }
    expect(seenByModel(message)).not.toContain("S3cret");
  });
});

describe("a child that ends between calls", () => {
  test("the next call starts a fresh child, with a fresh history (what the server held in memory is gone)", async () => {
    expect(historyLength(await think("k1", 1, "alice", "seq-kill"))).toBe(1);
    expect(historyLength(await think("k2", 2, "alice", "seq-kill"))).toBe(2);
    const [pid] = childrenOf("seq-kill");
    process.kill(pid, "SIGKILL");
    // Reaped: this process has heard of the exit.
    expect(await waitUntil(() => !alive(pid))).toBe(true);
    const next = await think("k3", 3, "alice", "seq-kill");
    expect(next.status).toBe("success");
    expect(historyLength(next)).toBe(1);
    const [fresh] = childrenOf("seq-kill");
    expect(fresh).not.toBe(pid);
  });
});

