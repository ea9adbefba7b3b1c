/**
 * Servers that echo a credential in the less common result shapes: image/audio data holding its bytes at each base64
 * alignment, embedded resources and links, `_meta` on blocks and on the result, structuredContent keys and numbers,
 * an isError result. Nothing of it reaches the ToolMessage or the checkpoint.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import { createMcpToolkit, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolCalls, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";
import { stdioFixture } from "../fixtures/stdio";

const KEY = "sk-live-9f8e7d6c5b4a";
const PIN = "482913";
const ENV_KEY = "env-Q7r8S9t0-key";
const CONTEXT = { user_id: "alice", secrets: { api_key: KEY, pin: PIN } };
const SECRETS = [KEY, PIN, ENV_KEY];

let http: HttpFixture;
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];
let graph: ToolNodeGraph;
const checkpointer = new MemorySaver();
let thread = 0;
let toolkitConfig: string;

beforeAll(async () => {
  http = await startHttpFixture({ name: "shapes", toolNames: ["shapes"] });
  const stdio = stdioFixture({ name: "local", toolNames: ["shapes"] });
  const dir = await makeTempDir("mcp-echo-shapes-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      key: { type: "http", url: http.url, headers_from_context: { headers: { "X-Api-Key": "api_key" } } },
      pin: { type: "http", url: http.url, headers_from_context: { headers: { "X-Api-Key": "pin" } } },
      local: { type: "stdio", command: stdio.command, args: stdio.args, env: { ...stdio.env, SHAPES_VALUE: "${ENV_KEY}" } },
    },
  });
  toolkitConfig = configPath;
  toolkit = createMcpToolkit({ configPath, env: { ENV_KEY } });
  tools = await toolkit.getTools();
  graph = toolNodeGraph(tools, checkpointer);
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

async function call(name: string, args: Record<string, unknown>): Promise<{ message: ToolMessage; stored: string }> {
  const threadId = `shapes-${++thread}`;
  const message = await callThroughGraph(graph, name, args, { context: CONTEXT, configurable: { thread_id: threadId } });
  const tuples: string[] = [];
  for await (const tuple of checkpointer.list({ configurable: { thread_id: threadId } })) tuples.push(JSON.stringify(tuple));
  return { message, stored: `${JSON.stringify(message.toDict())}\n${tuples.join("\n")}` };
}

/** Every base64/base64url run of the text, decoded from each of its first four digits. */
function decodedRuns(text: string): string[] {
  const runs = text.match(/[A-Za-z0-9+/_-]{4,}/g) ?? [];
  return runs.flatMap((run) => [0, 1, 2, 3].map((start) => Buffer.from(run.slice(start), "base64").toString("latin1")));
}

function expectNoSecret(text: string): void {
  const decoded = decodedRuns(text).join("\n");
  for (const secret of SECRETS) {
    for (const form of [secret, JSON.stringify(secret).slice(1, -1), encodeURIComponent(secret)]) expect(text).not.toContain(form);
    expect(decoded).not.toContain(secret);
  }
}

describe.each([
  ["an HTTP server echoing a headers_from_context value", "key_shapes"],
  ["an HTTP server echoing a PIN", "pin_shapes"],
  ["a stdio server echoing a $VAR value", "local_shapes"],
])("%s", (_label, tool) => {
  test.each(["media", "resources", "structured", "text", "padded"])("in a %s result, success and isError: nothing in the ToolMessage or the checkpoint", async (shape) => {
    for (const error of [false, true]) {
      const { message, stored } = await call(tool, { shape, error });
      expect(message.content).not.toEqual("");
      if (!(error && shape === "media")) expect(stored).toContain("[redacted]");
      expectNoSecret(stored);
    }
  });

  test("progress notifications echoing it: no event carries it", async () => {
    const stream = await graph.stream(
      { messages: [toolCalls([{ name: tool, args: { shape: "progress" } }])] },
      { context: CONTEXT, configurable: { thread_id: `progress-${++thread}` }, streamMode: ["custom", "values"] },
    );
    const events: unknown[] = [];
    for await (const [mode, chunk] of stream) if (mode === "custom") events.push(chunk);
    expect(events.length).toBeGreaterThan(0);
    expectNoSecret(JSON.stringify(events));
  });

  test("a result over maxResultChars whose bound falls inside the value: no part of it is kept", async () => {
    for (const cut of [3, 8]) {
      const bounded = createMcpToolkit({ configPath: toolkitConfig, env: { ENV_KEY }, maxResultChars: 1000 - cut });
      try {
        const small = toolNodeGraph(await bounded.getTools(), checkpointer);
        const message = await callThroughGraph(small, tool, { shape: "padded" }, { context: CONTEXT, configurable: { thread_id: `cut-${++thread}` } });
        expect(String(message.content)).toContain("[result truncated");
        expect(String(message.content)).not.toMatch(/x(sk|48|en)/);
        expectNoSecret(JSON.stringify(message.toDict()));
      } finally {
        await bounded.close();
      }
    }
  });
});
