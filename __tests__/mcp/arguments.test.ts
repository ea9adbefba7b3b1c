import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { ToolInputParsingException, type DynamicStructuredTool } from "@langchain/core/tools";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { describeArgumentProblems } from "../../lib/mcp/arguments";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { toolCalls, toolMessagesOf, toolNodeGraph } from "../fixtures/graph";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";
import { stdioFixture } from "../fixtures/stdio";

let http: HttpFixture;
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["add", "profile"] });
  const dir = await makeTempDir("mcp-arguments-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      remote: { url: http.url },
      local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["add"] }) },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  tools = await toolkit.getTools();
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

/** Bad calls and the exact per-field lines the model must see. */
const CASES: { name: string; args: Record<string, unknown>; lines: string[] }[] = [
  { name: "remote_add", args: { a: "x", b: 1 }, lines: ["a: expected number"] },
  { name: "remote_add", args: { a: 1 }, lines: ["b: required field missing"] },
  { name: "local_add", args: { a: "x" }, lines: ["b: required field missing", "a: expected number"] },
  {
    name: "remote_profile",
    args: { person: { name: 7, age: -1 }, tags: ["ok", 3], level: "medium" },
    lines: ["person.name: expected string", "person.age: expected a number >= 0", "tags[1]: expected string", 'level: expected one of "low", "high"'],
  },
  { name: "remote_profile", args: { person: { name: "ann", age: 3, nickname: "secret-ish value" } }, lines: ["person.nickname: unexpected field"] },
  { name: "remote_profile", args: {}, lines: ["person: required field missing"] },
  // A field name the schema validator cannot URI-encode for its error paths (a lone surrogate).
  {
    name: "remote_profile",
    args: { person: { name: "ann", age: 3, "x\ud800": 1 } },
    lines: ["(arguments): a field name is not valid Unicode text (it holds a lone surrogate)"],
  },
];

function expectClean(message: ToolMessage, name: string, lines: string[]): void {
  const text = String(message.content);
  expect(message.status).toBe("error");
  expect(text.split("\n")).toEqual([`Invalid arguments for tool '${name}'; fix them and call it again:`, ...lines]);
  expect(text).not.toMatch(/^\s*at /m);
  expect(text).not.toContain("/work");
  expect(text).not.toContain(process.cwd());
  expect(text).not.toContain("node_modules");
}

describe("argument-validation errors reach the model as one clean line per field", () => {
  test("prebuilt ToolNode", async () => {
    const result = await toolNodeGraph(tools).invoke({
      messages: [toolCalls(CASES.map((c, i) => ({ name: c.name, args: c.args, id: `v${i}` })))],
    });
    const byId = new Map(toolMessagesOf(result.messages).map((m) => [m.tool_call_id, m]));
    CASES.forEach((c, i) => expectClean(byId.get(`v${i}`)!, c.name, c.lines));
  });

  test("createAgent (its ToolNode would otherwise put the JavaScript stack in the message)", async () => {
    const model = new ScriptedChatModel([
      ...CASES.map((c, i) => ScriptedChatModel.toolCall(c.name, c.args, `g${i}`)),
      ScriptedChatModel.toolCall("remote_add", { a: 2, b: 3 }, "good"),
      { content: "done" },
    ]);
    const agent = createAgent({ model, tools });
    const result = await agent.invoke({ messages: [new HumanMessage("go")] });
    const byId = new Map(
      result.messages.filter((m: BaseMessage): m is ToolMessage => ToolMessage.isInstance(m)).map((m) => [m.tool_call_id, m]),
    );
    CASES.forEach((c, i) => expectClean(byId.get(`g${i}`)!, c.name, c.lines));
    expect(byId.get("good")?.content).toBe("sum=5");
    // What the model was shown on its next turn is that clean text, too.
    const shown = model.calls.flat().filter((m) => ToolMessage.isInstance(m)).map((m) => String(m.content));
    expect(shown.length).toBeGreaterThanOrEqual(CASES.length);
    expect(shown.some((text) => /^\s*at /m.test(text) || text.includes("/work"))).toBe(false);
  });

  test("hand-written StateGraph node: tool.invoke(toolCall) returns the error ToolMessage; plain args throw the clean text", async () => {
    const add = tools.find((t) => t.name === "remote_add")!;
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("call", async () => ({
        messages: [await add.invoke({ name: "remote_add", args: { a: "x", b: 1 }, id: "n1", type: "tool_call" })],
      }))
      .addEdge(START, "call")
      .addEdge("call", END)
      .compile();
    const result = await graph.invoke({ messages: [new AIMessage("calling")] });
    expectClean(toolMessagesOf(result.messages)[0], "remote_add", ["a: expected number"]);

    const thrown = await add.invoke({ a: "x", b: 1 }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(thrown).toBeInstanceOf(ToolInputParsingException);
    expect((thrown as Error).message).toBe("Invalid arguments for tool 'remote_add'; fix them and call it again:\na: expected number");
  });

  test("valid calls still go through StructuredTool.call: callbacks see the tool run", async () => {
    const seen: string[] = [];
    const handler = BaseCallbackHandler.fromMethods({
      handleToolStart: (_tool, input) => void seen.push(`start ${input}`),
      handleToolEnd: () => void seen.push("end"),
    });
    const add = tools.find((t) => t.name === "remote_add")!;
    const message = await add.invoke({ name: "remote_add", args: { a: 1, b: 2 }, id: "cb1", type: "tool_call" }, { callbacks: [handler] });
    expect((message as ToolMessage).content).toBe("sum=3");
    expect(seen).toEqual([`start ${JSON.stringify({ a: 1, b: 2 })}`, "end"]);
  });
});

test("a missing required field named like an inherited property is still named", () => {
  const schema = { type: "object" as const, properties: { constructor: { type: "string" as const }, toString: { type: "string" as const } }, required: ["constructor", "toString"] };
  expect(describeArgumentProblems(schema, {})).toEqual(["constructor: required field missing", "toString: required field missing"]);
});
