import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { MessagesAnnotation, StateGraph, START, END, MemorySaver, interrupt, Command } from "@langchain/langgraph";
import { createAgent } from "langchain";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createMcpToolkit, RecordingLogger, type McpToolkit, type McpToolInterceptor } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";
import { callThroughGraph, toolCalls, toolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";
import { TINY_PNG_BASE64 } from "../fixtures/tools";

let http: HttpFixture;
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];
const interceptorLog: string[] = [];

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote" });
  const dir = await makeTempDir("mcp-graphs-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      remote: { type: "http", url: http.url },
      local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo", "progress", "add"] }) },
    },
  });
  const approval: McpToolInterceptor = async (request, next) => {
    interceptorLog.push(`${request.serverName}/${request.toolName}`);
    if (request.toolName === "echo" && request.args.text === "as command") {
      const toolCallId = request.runtime?.toolCallId ?? "";
      return new Command({
        update: { messages: [new ToolMessage({ content: "handled by interceptor", tool_call_id: toolCallId })] },
      });
    }
    if (request.toolName === "echo" && request.args.text === "needs approval") {
      const answer = interrupt<{ question: string }, string>({ question: "approve echo?" });
      return next(request.override({ args: { text: `approved: ${answer}` } }));
    }
    return next(request);
  };
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [approval] });
  tools = await toolkit.getTools();
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

describe("prebuilt ToolNode in a StateGraph", () => {
  test("text, structured content as artifact, isError as an error ToolMessage, image blocks", async () => {
    const result = await toolNodeGraph(tools).invoke({
      messages: [
        toolCalls([
          { name: "remote_echo", args: { text: "hi" }, id: "t1" },
          { name: "remote_add", args: { a: 2, b: 40 }, id: "t2" },
          { name: "remote_fail", args: { message: "boom from server" }, id: "t3" },
          { name: "remote_image", args: {}, id: "t4" },
          { name: "remote_link", args: {}, id: "t5" },
        ]),
      ],
    });
    const messages = result.messages.filter((m: BaseMessage): m is ToolMessage => ToolMessage.isInstance(m));
    const byId = new Map(messages.map((m) => [m.tool_call_id, m]));
    expect(byId.get("t1")?.content).toBe("hi");
    expect(byId.get("t1")?.status).toBe("success");

    const add = byId.get("t2")!;
    expect(add.content).toBe("sum=42");
    expect(add.artifact).toEqual({ structuredContent: { sum: 42 } });

    const fail = byId.get("t3")!;
    expect(fail.status).toBe("error");
    expect(fail.content).toBe("boom from server");

    const image = byId.get("t4")!;
    expect(Array.isArray(image.content)).toBe(true);
    expect(image.content).toEqual(
      expect.arrayContaining([{ type: "image", mimeType: "image/png", data: TINY_PNG_BASE64 }]),
    );

    const link = byId.get("t5")!;
    expect(link.content).toEqual([
      { type: "file", url: "file:///tmp/report.txt", mimeType: "text/plain" },
      { type: "text", text: "note body" },
    ]);
  });

  test("a transport failure (the server went away after discovery) becomes an error ToolMessage, not an exception", async () => {
    const gone = await startHttpFixture({ name: "gone", toolNames: ["echo"] });
    const dir = await makeTempDir("mcp-graphs-gone-");
    const configPath = await writeConfig(dir, { mcpServers: { gone: { type: "http", url: gone.url } } });
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
    try {
      const graph = toolNodeGraph(await own.getTools());
      expect((await callThroughGraph(graph, "gone_echo", { text: "before" })).content).toBe("before");
      await gone.close();
      const message = await callThroughGraph(graph, "gone_echo", { text: "after" });
      expect(message.status).toBe("error");
      expect(message.content).toBe(
        "MCP tool 'echo' on server 'gone' failed: the server closed the connection before it answered (it restarted or " +
          "dropped the call). The call was not sent again; a new session serves the next call.",
      );
    } finally {
      await own.close();
    }
  });

  // flush: false lets the server send the result in the same read as the notifications (see lib/sessions/progress.ts).
  test("MCP progress notifications reach the LangGraph custom stream", async () => {
    const events: unknown[] = [];
    const stream = await toolNodeGraph(tools).stream(
      { messages: [toolCalls([{ name: "local_progress", args: { steps: 3, flush: false }, id: "p1" }])] },
      { streamMode: "custom" },
    );
    for await (const chunk of stream) events.push(chunk);
    expect(events).toEqual([1, 2, 3].map((i) => ({
      type: "mcp_progress",
      toolCallId: "p1",
      server: "local",
      tool: "progress",
      progress: i,
      total: 3,
      message: `step ${i}`,
    })));
  });

  test("a progress notification whose numbers hold a secret of the run (a PIN) is not passed on", async () => {
    const events: { progress: number }[] = [];
    const stream = await toolNodeGraph(tools).stream(
      { messages: [toolCalls([{ name: "local_progress", args: { steps: 3, flush: false }, id: "p2" }])] },
      { streamMode: "custom", context: { secrets: { pin: "2" } } },
    );
    for await (const chunk of stream) events.push(chunk as { progress: number });
    expect(events.map((event) => event.progress)).toEqual([1, 3]);
  });

  test("an interceptor may interrupt() and the call resumes with the answer", async () => {
    const graph = toolNodeGraph(tools, new MemorySaver());
    const config = { configurable: { thread_id: "approval-thread" } };
    const first = await graph.invoke(
      { messages: [toolCalls([{ name: "local_echo", args: { text: "needs approval" }, id: "i1" }])] },
      config,
    );
    expect((first as { __interrupt__?: { value: unknown }[] }).__interrupt__?.[0]?.value).toEqual({ question: "approve echo?" });
    const resumed = await graph.invoke(new Command({ resume: "yes" }), config);
    const message = resumed.messages.at(-1) as ToolMessage;
    expect(message.content).toBe("approved: yes");
    expect(message.tool_call_id).toBe("i1");
  });
});

describe("Command results", () => {
  test("an interceptor may answer with a Command that the ToolNode applies", async () => {
    const result = await toolNodeGraph(tools).invoke({
      messages: [toolCalls([{ name: "remote_echo", args: { text: "as command" }, id: "cmd1" }])],
    });
    const message = result.messages.at(-1) as ToolMessage;
    expect(message.content).toBe("handled by interceptor");
    expect(message.tool_call_id).toBe("cmd1");
  });
});

describe("createAgent with a scripted model", () => {
  test("an interrupt() in an interceptor pauses the agent and resumes with the answer", async () => {
    const model = new ScriptedChatModel([
      ScriptedChatModel.toolCall("local_echo", { text: "needs approval" }, "ag1"),
      { content: "finished" },
    ]);
    const agent = createAgent({ model, tools, checkpointer: new MemorySaver() });
    const config = { configurable: { thread_id: "agent-approval" } };
    const first = await agent.invoke({ messages: [new HumanMessage("echo with approval")] }, config);
    expect((first as { __interrupt__?: { value: unknown }[] }).__interrupt__?.[0]?.value).toEqual({ question: "approve echo?" });
    const resumed = await agent.invoke(new Command({ resume: "ok" }), config);
    const toolMessage = resumed.messages.find((m: BaseMessage): m is ToolMessage => ToolMessage.isInstance(m))!;
    expect(toolMessage.content).toBe("approved: ok");
    expect(resumed.messages.at(-1)?.content).toBe("finished");
  });

  test("the agent calls MCP tools and sees their ToolMessages", async () => {
    const model = new ScriptedChatModel([
      ScriptedChatModel.toolCall("remote_add", { a: 1, b: 2 }, "a1"),
      ScriptedChatModel.toolCall("local_echo", { text: "from stdio" }, "a2"),
      ScriptedChatModel.toolCall("remote_fail", { message: "nope" }, "a3"),
      (messages) => ({ content: `done after ${messages.filter((m) => ToolMessage.isInstance(m)).length} tool results` }),
    ]);
    const agent = createAgent({ model, tools });
    const result = await agent.invoke({ messages: [new HumanMessage("do the things")] });
    const toolMessages = result.messages.filter((m: BaseMessage): m is ToolMessage => ToolMessage.isInstance(m));
    expect(toolMessages.map((m) => [m.tool_call_id, m.content, m.status])).toEqual([
      ["a1", "sum=3", "success"],
      ["a2", "from stdio", "success"],
      ["a3", "nope", "error"],
    ]);
    expect(toolMessages[0].artifact).toEqual({ structuredContent: { sum: 3 } });
    expect(result.messages.at(-1)?.content).toBe("done after 3 tool results");
    expect(interceptorLog).toEqual(expect.arrayContaining(["remote/add", "local/echo", "remote/fail"]));
  });
});

describe("outside a tool node", () => {
  test("a tool invoked with plain args from a hand-written node sees the run's context via getConfig()", async () => {
    const seen: unknown[] = [];
    const capture: McpToolInterceptor = async (request, next) => {
      seen.push(request.runtime?.context);
      return next(request);
    };
    const dir = await makeTempDir("mcp-graphs-node-");
    const configPath = await writeConfig(dir, { mcpServers: { remote: { type: "http", url: http.url } } });
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [capture] });
    try {
      const echo = (await own.getTools()).find((t) => t.name === "remote_echo")!;
      const graph = new StateGraph(MessagesAnnotation)
        .addNode("call", async () => ({ messages: [new AIMessage(String(await echo.invoke({ text: "from a node" })))] }))
        .addEdge(START, "call")
        .addEdge("call", END)
        .compile();
      const result = await graph.invoke({ messages: [] }, { context: { user_id: "node-user" } });
      expect(result.messages.at(-1)?.content).toBe("from a node");
      expect(seen).toEqual([{ user_id: "node-user" }]);
    } finally {
      await own.close();
    }
  });

  test("invoked with plain args the tool returns its content; an isError result throws", async () => {
    const echo = tools.find((t) => t.name === "remote_echo")!;
    await expect(echo.invoke({ text: "plain" })).resolves.toBe("plain");
    const fail = tools.find((t) => t.name === "remote_fail")!;
    await expect(fail.invoke({ message: "plain failure" })).rejects.toThrow("plain failure");
  });
});
