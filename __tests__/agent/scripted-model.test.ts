import { describe, expect, it } from "@jest/globals";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import { createAgent } from "langchain";
import { z } from "zod";
import {
  DEFAULT_SCRIPT_FALLBACK,
  ScriptedChatModel,
  createDemoChatModel,
  demoPolicy,
  extractJsonObject,
  findMentionedTool,
  resolveChatModel,
} from "../../lib/agent/index";

function makeEchoTool(seen: string[] = []) {
  return tool(
    async ({ text }: { text: string }) => {
      seen.push(text);
      return `echo:${text}`;
    },
    { name: "echo", description: "Echo the text back", schema: z.object({ text: z.string() }) },
  );
}

const types = (messages: readonly BaseMessage[]) => messages.map((m) => m.getType());

describe("ScriptedChatModel", () => {
  it("plays the script in order, then the fallback, and records every input", async () => {
    const model = new ScriptedChatModel([new AIMessage("one"), { content: "two" }], { fallback: "done" });
    expect((await model.invoke("a")).content).toBe("one");
    expect((await model.invoke("b")).content).toBe("two");
    expect(model.exhausted).toBe(true);
    expect((await model.invoke("c")).content).toBe("done");
    expect((await model.invoke("d")).content).toBe("done");
    expect(model.calls.map((c) => c.map((m) => m.text))).toEqual([["a"], ["b"], ["c"], ["d"]]);
    expect(model.played).toBe(2);

    model.reset();
    expect(model.calls).toHaveLength(0);
    expect((await model.invoke("again")).content).toBe("one");
  });

  it("plays a string step (or a policy's string) as a plain text answer", async () => {
    const model = new ScriptedChatModel(["hello", () => "from a policy"], { fallback: () => "later" });
    expect((await model.invoke("a")).content).toBe("hello");
    expect((await model.invoke("b")).content).toBe("from a policy");
    expect((await model.invoke("c")).content).toBe("later");
  });

  it("has a default fallback", async () => {
    expect((await new ScriptedChatModel().invoke("x")).content).toBe(DEFAULT_SCRIPT_FALLBACK);
  });

  it("returns a fresh message each time, so the messages reducer cannot alias script objects", async () => {
    const step = new AIMessage("same");
    const model = new ScriptedChatModel([step, step]);
    const first = await model.invoke("a");
    const second = await model.invoke("b");
    expect(first).not.toBe(step);
    expect(first).not.toBe(second);
    expect(step.id).toBeUndefined();
  });

  it("bindTools returns a copy that sees the tools and shares the script position", async () => {
    const echo = makeEchoTool();
    const seenTools: string[][] = [];
    const model = new ScriptedChatModel([
      (_messages, tools) => {
        seenTools.push(tools.map((t) => t.name));
        return { content: "first" };
      },
      (_messages, tools) => {
        seenTools.push(tools.map((t) => t.name));
        return { content: "second" };
      },
    ]);
    const bound = model.bindTools([echo]);
    expect(bound).toBeInstanceOf(ScriptedChatModel);
    expect(bound).not.toBe(model);
    expect(model.boundTools).toHaveLength(0);
    expect(bound.boundTools.map((t) => t.name)).toEqual(["echo"]);

    expect((await bound.invoke("x")).content).toBe("first");
    expect((await model.invoke("y")).content).toBe("second");
    expect(seenTools).toEqual([["echo"], []]);
    expect(model.calls).toBe(bound.calls);
    expect(model.calls).toHaveLength(2);
  });

  it("toolCall builds one tool call; missing ids are filled from a deterministic counter", async () => {
    const explicit = ScriptedChatModel.toolCall("echo", { text: "a" }, "my-id");
    expect(explicit.tool_calls).toEqual([{ name: "echo", args: { text: "a" }, id: "my-id", type: "tool_call" }]);

    const script = () => [
      ScriptedChatModel.toolCall("echo", { text: "a" }),
      ScriptedChatModel.toolCall("echo", { text: "b" }),
      (_m: BaseMessage[], _t: unknown, ctx: { nextToolCallId(): string }) => ({
        content: "",
        tool_calls: [{ name: "echo", args: {}, id: ctx.nextToolCallId() }],
      }),
    ];
    const run = async () => {
      const model = new ScriptedChatModel(script());
      const ids: (string | undefined)[] = [];
      for (const input of ["x", "y", "z"]) {
        const out = await model.invoke(input);
        ids.push(...(out.tool_calls ?? []).map((c) => c.id));
      }
      return ids;
    };
    const first = await run();
    expect(new Set(first).size).toBe(3);
    expect(await run()).toEqual(first);
  });

  it("works inside createAgent with a plain tool(): the tool is called and the final answer comes back", async () => {
    const seen: string[] = [];
    const echo = makeEchoTool(seen);
    const model = new ScriptedChatModel([ScriptedChatModel.toolCall("echo", { text: "hi" }), { content: "all done" }]);
    const agent = createAgent({ model, tools: [echo], systemPrompt: "You are a test agent." });

    const result = await agent.invoke({ messages: [new HumanMessage("go")] });

    expect(seen).toEqual(["hi"]);
    expect(types(result.messages)).toEqual(["human", "ai", "tool", "ai"]);
    const toolMessage = result.messages[2] as ToolMessage;
    expect(toolMessage.text).toBe("echo:hi");
    expect(toolMessage.tool_call_id).toBe((result.messages[1] as AIMessage).tool_calls?.[0]?.id);
    expect(result.messages.at(-1)?.text).toBe("all done");
    // The model saw the system prompt, then the tool result on its second turn.
    expect(types(model.calls[0])).toEqual(["system", "human"]);
    expect(types(model.calls[1])).toEqual(["system", "human", "ai", "tool"]);
  });

  it("runs the demo policy inside createAgent across turns of a checkpointed thread", async () => {
    const seen: string[] = [];
    const model = createDemoChatModel();
    const agent = createAgent({ model, tools: [makeEchoTool(seen)], checkpointer: new MemorySaver() });
    const config = { configurable: { thread_id: "t1" } };

    const first = await agent.invoke({ messages: [new HumanMessage('please echo {"text":"hi"}')] }, config);
    expect(first.messages.at(-1)?.text).toBe("Tool echo returned: echo:hi");

    const second = await agent.invoke({ messages: [new HumanMessage('echo {"text":"again"}')] }, config);
    expect(seen).toEqual(["hi", "again"]);
    expect(second.messages.at(-1)?.text).toBe("Tool echo returned: echo:again");
    const ids = second.messages.flatMap((m) => (AIMessage.isInstance(m) ? (m.tool_calls ?? []).map((c) => c.id) : []));
    expect(ids).toHaveLength(2);
    expect(new Set(ids).size).toBe(2);

    const third = await agent.invoke({ messages: [new HumanMessage("hello?")] }, config);
    expect(third.messages.at(-1)?.text).toContain("Tools: echo");
  });

  it("works inside a hand-written StateGraph with the prebuilt ToolNode", async () => {
    const seen: string[] = [];
    const tools = [makeEchoTool(seen)];
    const model = new ScriptedChatModel([
      (messages, boundTools) => ({
        content: "",
        tool_calls: [{ name: boundTools[0].name, args: { text: `n=${messages.length}` } }],
      }),
      (messages) => ({ content: `final: ${messages.at(-1)?.text}` }),
    ]);
    const bound = model.bindTools(tools);

    const graph = new StateGraph(MessagesAnnotation)
      .addNode("agent", async (state) => ({ messages: [await bound.invoke(state.messages)] }))
      .addNode("tools", new ToolNode(tools))
      .addEdge(START, "agent")
      .addConditionalEdges("agent", toolsCondition, ["tools", END])
      .addEdge("tools", "agent")
      .compile();

    const result = await graph.invoke({ messages: [new HumanMessage("start")] });
    expect(seen).toEqual(["n=1"]);
    expect(types(result.messages)).toEqual(["human", "ai", "tool", "ai"]);
    expect(result.messages.at(-1)?.text).toBe("final: echo:n=1");
  });
});

describe("demoPolicy", () => {
  const mcpTool = (name: string, rawName: string) => {
    const t = tool(async () => "ok", { name, description: name, schema: z.object({}) });
    t.metadata = { mcp: { server: "demo", rawName, transport: "stdio" } };
    return t;
  };
  const ctx = () => {
    let n = 0;
    return { callIndex: 0, nextToolCallId: () => `id${(n += 1)}` };
  };

  it("calls the tool named by visible or raw MCP name, with the first JSON object as args", async () => {
    const tools = [mcpTool("demo_add", "add"), mcpTool("demo_echo", "echo")];
    const byRaw = await demoPolicy([new HumanMessage('add {"a": 1, "b": {"c": "}"}} then {"x":1}')], tools, ctx());
    expect((byRaw as { tool_calls?: unknown }).tool_calls).toEqual([
      { name: "demo_add", args: { a: 1, b: { c: "}" } }, id: "id1", type: "tool_call" },
    ]);
    const byVisible = await demoPolicy([new HumanMessage("run demo_echo now")], tools, ctx());
    expect((byVisible as { tool_calls?: { name: string; args: unknown }[] }).tool_calls?.[0]).toMatchObject({
      name: "demo_echo",
      args: {},
    });
    // "address" does not mention "add"
    const none = await demoPolicy([new HumanMessage("my address")], tools, ctx());
    expect((none as { tool_calls?: unknown[] }).tool_calls ?? []).toHaveLength(0);
    expect(String((none as { content?: unknown }).content)).toContain("demo_add, demo_echo");
  });

  it("reports tool results", async () => {
    const messages = [
      new HumanMessage("x"),
      new AIMessage({ content: "", tool_calls: [{ name: "demo_time", args: {}, id: "c1" }] }),
      new ToolMessage({ content: "2026-01-01T00:00:00.000Z", tool_call_id: "c1" }),
    ];
    const reply = await demoPolicy(messages, [], ctx());
    expect((reply as { content?: unknown }).content).toBe("Tool demo_time returned: 2026-01-01T00:00:00.000Z");
  });

  it("helpers", () => {
    expect(extractJsonObject("no json {here} [1] {\"k\": \"v\"}")).toEqual({ k: "v" });
    expect(extractJsonObject("nothing")).toEqual({});
    expect(extractJsonObject("[{\"a\":1}]")).toEqual({ a: 1 });
    // Bounded search: the first 64 opening braces, within the first 64 KiB.
    expect(extractJsonObject(`${"{ ".repeat(64)}{"k": 1}`)).toEqual({});
    expect(extractJsonObject(`${"{ ".repeat(63)}{"k": 1}`)).toEqual({ k: 1 });
    expect(extractJsonObject(`${" ".repeat(64 * 1024)}{"k": 1}`)).toEqual({});
    expect(findMentionedTool("use echo", [mcpTool("demo_echo", "echo")])?.name).toBe("demo_echo");
    expect(findMentionedTool("use echoes", [mcpTool("demo_echo", "echo")])).toBeUndefined();
  });
});

describe("resolveChatModel", () => {
  it("is the offline scripted model when MCP_HARNESS_MODEL is unset; serving every run, it keeps none of their messages", async () => {
    const model = await resolveChatModel({});
    expect(model).toBeInstanceOf(ScriptedChatModel);
    const scripted = model as ScriptedChatModel;
    for (let i = 0; i < 3; i += 1) await scripted.invoke([new HumanMessage(`hello ${i}`)]);
    expect(scripted.calls).toEqual([]);
    const recording = new ScriptedChatModel([], { fallback: "ok" });
    await recording.invoke([new HumanMessage("hello")]);
    expect(recording.calls).toHaveLength(1);
  });

  it("names the variable when the configured model cannot be initialised", async () => {
    await expect(resolveChatModel({ MCP_HARNESS_MODEL: "no-such-provider:model-x" })).rejects.toThrow(/MCP_HARNESS_MODEL=no-such-provider:model-x: /);
  });

  it("does not repeat a value that is no model name (an API key pasted into the variable)", async () => {
    const error = (await resolveChatModel({ MCP_HARNESS_MODEL: "sk-live-abcdef0123456789" }).catch((err: unknown) => err)) as Error;
    expect(error.message).toMatch(/^MCP_HARNESS_MODEL \(value not shown: it does not look like provider:model\): cannot initialise the chat model: /);
    expect(error.message).not.toContain("sk-live-abcdef0123456789");
    expect(error.cause).toBeUndefined();
  });
});
