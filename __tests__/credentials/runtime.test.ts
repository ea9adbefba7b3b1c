import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { createAgent } from "langchain";
import { z } from "zod";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, rawHeaderValues, type HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { toolCalls } from "../fixtures/graph";

const RunContext = z.object({ user_id: z.string(), secrets: z.record(z.string(), z.string()) });

let http: HttpFixture;
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];
const seen: { toolCallId: string | undefined; context: unknown }[] = [];

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
  const dir = await makeTempDir("mcp-runtime-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      remote: {
        type: "http",
        url: http.url,
        user_auth: { header: "X-User-Token", users: { alice: "alice-token-1", mallory: "mallory-token-1" } },
        headers_from_context: { headers: { "X-Api-Key": "api_key" } },
      },
    },
  });
  const capture: McpToolInterceptor = (request, next) => {
    seen.push({ toolCallId: request.runtime?.toolCallId, context: request.runtime?.context });
    return next(request);
  };
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [capture] });
  tools = await toolkit.getTools();
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

function contextGraph() {
  return new StateGraph(MessagesAnnotation, RunContext)
    .addNode("tools", new ToolNode(tools))
    .addEdge(START, "tools")
    .addEdge("tools", END)
    .compile();
}

function lastToolMessage(messages: BaseMessage[]): ToolMessage {
  return messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m)).at(-1)!;
}

describe("interceptors read the run context from the ToolRuntime", () => {
  test("a StateGraph with a contextSchema: the layers and the interceptor see context.user_id and context.secrets", async () => {
    const context = { user_id: "alice", secrets: { api_key: "ctx-key-1" } };
    const result = await contextGraph().invoke(
      { messages: [toolCalls([{ name: "remote_echo", args: { text: "graph-ctx" }, id: "g-1" }])] },
      { context },
    );
    expect(lastToolMessage(result.messages).content).toBe("graph-ctx");
    expect(seen.at(-1)).toEqual({ toolCallId: "g-1", context });
    const request = findToolCall(http.requests, "graph-ctx")!;
    expect(rawHeaderValues(request, "x-user-token")).toEqual(["alice-token-1"]);
    expect(rawHeaderValues(request, "x-api-key")).toEqual(["ctx-key-1"]);
  });

  test("createAgent with a contextSchema: the same", async () => {
    const model = new ScriptedChatModel([ScriptedChatModel.toolCall("remote_echo", { text: "agent-ctx" }, "a-1"), { content: "done" }]);
    const agent = createAgent({ model, tools, contextSchema: RunContext });
    const context = { user_id: "alice", secrets: { api_key: "agent-key-1" } };
    const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { context });
    expect(lastToolMessage(result.messages).content).toBe("agent-ctx");
    expect(seen.at(-1)).toEqual({ toolCallId: "a-1", context });
    const request = findToolCall(http.requests, "agent-ctx")!;
    expect(rawHeaderValues(request, "x-user-token")).toEqual(["alice-token-1"]);
    expect(rawHeaderValues(request, "x-api-key")).toEqual(["agent-key-1"]);
  });

  test("values in config.configurable are not run context: the context wins, and configurable alone is refused", async () => {
    const graph = contextGraph();
    const configurable = { user_id: "mallory", secrets: { api_key: "configurable-key" }, thread_id: "t-1" };
    const both = await graph.invoke(
      { messages: [toolCalls([{ name: "remote_echo", args: { text: "both-places" } }])] },
      { context: { user_id: "alice", secrets: { api_key: "ctx-key-2" } }, configurable },
    );
    expect(lastToolMessage(both.messages).status).toBe("success");
    const request = findToolCall(http.requests, "both-places")!;
    expect(rawHeaderValues(request, "x-user-token")).toEqual(["alice-token-1"]);
    expect(rawHeaderValues(request, "x-api-key")).toEqual(["ctx-key-2"]);

    const onlyConfigurable = await graph.invoke(
      { messages: [toolCalls([{ name: "remote_echo", args: { text: "configurable-only" } }])] },
      { configurable },
    );
    const refused = lastToolMessage(onlyConfigurable.messages);
    expect(refused.status).toBe("error");
    expect(refused.content).toMatch(/has no user id/);
    expect(findToolCall(http.requests, "configurable-only")).toBeUndefined();
  });

  test("createAgent: configurable alone is refused too", async () => {
    const model = new ScriptedChatModel([ScriptedChatModel.toolCall("remote_echo", { text: "agent-configurable" }, "a-2"), { content: "done" }]);
    const agent = createAgent({ model, tools });
    const result = await agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { user_id: "mallory", secrets: { api_key: "configurable-key" } } },
    );
    expect(lastToolMessage(result.messages).status).toBe("error");
    expect(findToolCall(http.requests, "agent-configurable")).toBeUndefined();
  });
});
