/**
 * stdio sessions per (server, user, thread), with real child processes, through ToolNode and createAgent:
 * which scope gets which child, where the child runs, and what happens when children die or time out.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { chmod, mkdir, readdir, readFile, stat, symlink, unlink, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { HumanMessage, ToolMessage, type AIMessage, type BaseMessage } from "@langchain/core/messages";
import { Annotation, Command, END, interrupt, MemorySaver, MessagesAnnotation, Send, START, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createAgent } from "langchain";
import { z } from "zod";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { threadFolderName } from "../../lib/sessions";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, runningCall, toolCalls, toolMessagesOf, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";
import { alive, waitUntil } from "../fixtures/processes";

let dataDir: string;
const logger = new RecordingLogger();
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];
let graph: ToolNodeGraph;
/** While set, a failed `ticker` call's error is held inside the interceptor chain until released. */
let holdError: { arrived: () => void; release: Promise<void> } | null = null;

const lateError: McpToolInterceptor = async (request, next) => {
  try {
    return await next(request);
  } catch (err) {
    if (request.toolName === "ticker" && holdError) {
      holdError.arrived();
      await holdError.release;
    }
    throw err;
  }
};

const launch = stdioFixture({ name: "local", toolNames: ["pid", "where", "slow", "ticker"] });

beforeAll(async () => {
  dataDir = await makeTempDir("mcp-sessions-data-");
  const configPath = await writeConfig(await makeTempDir("mcp-sessions-"), {
    mcpServers: {
      local: { type: "stdio", ...launch, tool_call_timeout: 1 },
      pinned: {
        type: "stdio",
        ...launch,
        cwd: "/tmp",
        env: { ...launch.env, TMPDIR: "/var/tmp", TEMP: "/var/tmp" },
      },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger, dataDir, interceptors: [lateError] });
  tools = await toolkit.getTools();
  graph = toolNodeGraph(tools);
});
afterAll(async () => {
  await toolkit.close();
});

const scope = (user: string | undefined, thread: string) => ({
  ...(user ? { context: { user_id: user } } : {}),
  configurable: { thread_id: thread },
});

async function pid(options: Record<string, unknown>, tool = "local_pid"): Promise<number> {
  const message = await callThroughGraph(graph, tool, {}, options);
  expect(message.status).toBe("success");
  return Number(message.content);
}

/**
 * Starts a long `ticker` call (progress every 50 ms) in a scope and resolves once its first progress event shows
 * it running on the child; `done` settles with its ToolMessage.
 */
function longTicker(options: Record<string, unknown>): Promise<{ done: Promise<ToolMessage> }> {
  return runningCall(graph, "local_ticker", { intervalMs: 50, durationMs: 30_000 }, options);
}

describe("one child per (server, user, thread)", () => {
  test("the same thread twice reuses one child; two threads of one user get two; two users on one thread get two", async () => {
    const alice1 = await pid(scope("alice", "t-1"));
    expect(await pid(scope("alice", "t-1"))).toBe(alice1);
    const alice2 = await pid(scope("alice", "t-2"));
    const bob1 = await pid(scope("bob", "t-1"));
    expect(new Set([alice1, alice2, bob1]).size).toBe(3);
    // Discovery ran in the "default" scope; a run without user or thread shares that child.
    expect(new Set([alice1, alice2, bob1, await pid({})]).size).toBe(4);
  });

  test("ids holding the key's separator cannot meet: user 'org:alice' on thread 't' and user 'org' on thread 'alice:t' get two", async () => {
    const first = await pid(scope("org:alice", "t"));
    const second = await pid(scope("org", "alice:t"));
    expect(second).not.toBe(first);
    expect(await pid(scope("org:alice", "t"))).toBe(first);
  });

  test("numeric ids in the run's context are ids (as their decimal text), not the default scope", async () => {
    const one = await pid({ context: { user_id: 7, thread_id: 1 } });
    const two = await pid({ context: { user_id: 7, thread_id: 2 } });
    expect(new Set([one, two, await pid({})]).size).toBe(3);
    expect(await pid(scope("7", "1"))).toBe(one);
  });

  test.each([
    ["context.user_id", { context: { user_id: { id: "alice" } } }],
    ["context.thread_id", { context: { user_id: "alice", thread_id: ["t"] } }],
    ["configurable.thread_id", { context: { user_id: "alice" }, configurable: { thread_id: true } }],
  ])("a run whose %s is neither a string nor a number is refused, not served as the default user or thread", async (field, options) => {
    const message = await callThroughGraph(graph, "local_pid", {}, options);
    expect({ status: message.status, content: message.content }).toEqual({
      status: "error",
      content: `MCP tool call refused: the run's ${field} is neither a string nor a number, so it names no user or thread`,
    });
  });

  test("ids holding a lone surrogate get a child of their own, and a folder no other id shares", async () => {
    const lone = await pid({ context: { user_id: "u", thread_id: "t\uD800" } });
    expect(await pid({ context: { user_id: "u", thread_id: "t\uD800" } })).toBe(lone);
    expect(await pid({ context: { user_id: "u", thread_id: "t\uFFFD" } })).not.toBe(lone);
    expect(new Set(["t\uD800", "t\uDC00", "t\uFFFD", "\uD800\u0080", "\u0000\u0600\u0000"].map(threadFolderName)).size).toBe(5);
  });

  test("a server-authenticated user with an empty identity does not get the child of the user its context.user_id names", async () => {
    const alice = await pid(scope("alice", "anon-t"));
    // What LangGraph's API server stamps when its auth handler admits a caller with identity "".
    const anonymous = { langgraph_auth_user: { identity: "", is_authenticated: false, permissions: [] }, langgraph_auth_user_id: "", thread_id: "anon-t" };
    expect(await pid({ context: { user_id: "alice" }, configurable: anonymous })).not.toBe(alice);
  });

  test("context.thread_id comes before configurable.thread_id", async () => {
    const byContext = await pid({ context: { user_id: "carol", thread_id: "ctx-thread" }, configurable: { thread_id: "cfg-thread" } });
    expect(await pid(scope("carol", "ctx-thread"))).toBe(byContext);
    expect(await pid(scope("carol", "cfg-thread"))).not.toBe(byContext);
  });

  test("a server-authenticated user's run is on the server's thread: its context.thread_id cannot reach another thread's child", async () => {
    const owners = await pid(scope("erin", "erins-thread"));
    // What LangGraph's API server stamps for an authenticated caller on the thread it runs; the context is the caller's own.
    const stamped = { langgraph_auth_user: { identity: "erin", is_authenticated: true, permissions: [] }, langgraph_auth_user_id: "erin", thread_id: "server-thread" };
    const run = await pid({ context: { thread_id: "erins-thread" }, configurable: stamped });
    expect(run).not.toBe(owners);
    expect(await pid(scope("erin", "server-thread"))).toBe(run);
  });

  test("createAgent with context { user_id } and a thread_id: calls of one thread share a child, another thread gets its own", async () => {
    const RunContext = z.object({ user_id: z.string() });
    const model = new ScriptedChatModel([
      ScriptedChatModel.toolCall("local_pid", {}, "p-1"),
      ScriptedChatModel.toolCall("local_pid", {}, "p-2"),
      { content: "done" },
      ScriptedChatModel.toolCall("local_pid", {}, "p-3"),
      { content: "done" },
    ]);
    const agent = createAgent({ model, tools, contextSchema: RunContext });
    const pids = (messages: BaseMessage[]) => messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m)).map((m) => Number(m.content));
    const first = await agent.invoke({ messages: [new HumanMessage("go")] }, { context: { user_id: "dave" }, configurable: { thread_id: "agent-1" } });
    const [a, b] = pids(first.messages);
    expect(a).toBe(b);
    expect(a).toBe(await pid(scope("dave", "agent-1")));
    const second = await agent.invoke({ messages: [new HumanMessage("go")] }, { context: { user_id: "dave" }, configurable: { thread_id: "agent-2" } });
    expect(pids(second.messages)).toEqual([expect.any(Number)]);
    expect(pids(second.messages)[0]).not.toBe(a);
  });

  test("50 concurrent first calls in one scope spawn one child", async () => {
    const calls = Array.from({ length: 50 }, (_, i) => ({ name: "local_pid", args: {}, id: `c-${i}` }));
    const result = await graph.invoke({ messages: [toolCalls(calls)] }, scope("erin", "burst"));
    const pids = toolMessagesOf(result.messages).map((m) => Number(m.content));
    expect(pids).toHaveLength(50);
    expect(new Set(pids).size).toBe(1);
  });
});

describe("graphs as users compose them: the call runs in its (user, thread) child, in the thread's workspace", () => {
  interface Where {
    pid: number;
    cwd: string;
  }
  const workspaceOf = (thread: string) => path.join(dataDir, "threads", thread, "user-data", "workspace");
  const whereOf = (message: BaseMessage | undefined): Where => {
    expect(message && ToolMessage.isInstance(message) ? message.status : message).toBe("success");
    return JSON.parse(String(message!.content)) as Where;
  };
  /** What the plain ToolNode graph gets for a (user, thread): the child every other shape must reach. */
  const reference = async (user: string | undefined, thread: string): Promise<Where> =>
    whereOf(await callThroughGraph(graph, "local_where", {}, scope(user, thread)));
  const whereCall = (id: string) => toolCalls([{ name: "local_where", args: {}, id }]);
  const whereMessages = (messages: BaseMessage[]): Where[] => toolMessagesOf(messages).map(whereOf);

  async function expectChildOf(user: string | undefined, thread: string, got: Where[]): Promise<void> {
    const expected = await reference(user, thread);
    expect(got.length).toBeGreaterThan(0);
    for (const where of got) expect(where).toEqual(expected);
    expect(expected.cwd).toBe(workspaceOf(thread));
  }

  test("a ToolNode inside a subgraph added as a node: the parent's context and thread reach it", async () => {
    const parent = new StateGraph(MessagesAnnotation).addNode("agent", toolNodeGraph(tools)).addEdge(START, "agent").addEdge("agent", END).compile();
    const alice = await parent.invoke({ messages: [whereCall("sg-1")] }, scope("sg-alice", "sg-t"));
    await expectChildOf("sg-alice", "sg-t", whereMessages(alice.messages));
    const bob = await parent.invoke({ messages: [whereCall("sg-2")] }, scope("sg-bob", "sg-t"));
    await expectChildOf("sg-bob", "sg-t", whereMessages(bob.messages));
    expect(whereMessages(bob.messages)[0].pid).not.toBe(whereMessages(alice.messages)[0].pid);
  });

  test("a subgraph under a parent with a checkpointer: the subgraph's calls use the parent's thread", async () => {
    const parent = new StateGraph(MessagesAnnotation)
      .addNode("agent", toolNodeGraph(tools))
      .addEdge(START, "agent")
      .addEdge("agent", END)
      .compile({ checkpointer: new MemorySaver() });
    const result = await parent.invoke({ messages: [whereCall("sgc-1")] }, scope("sgc-alice", "sgc-t"));
    await expectChildOf("sgc-alice", "sgc-t", whereMessages(result.messages));
  });

  test.each([
    ["no config", (sub: ToolNodeGraph, state: { messages: BaseMessage[] }) => sub.invoke(state)],
    ["the node's config", (sub: ToolNodeGraph, state: { messages: BaseMessage[] }, config: LangGraphRunnableConfig) => sub.invoke(state, config)],
    ["a config of its own (tags, a run name)", (sub: ToolNodeGraph, state: { messages: BaseMessage[] }) => sub.invoke(state, { tags: ["inner"], runName: "inner" })],
    [
      "a configurable of its own",
      (sub: ToolNodeGraph, state: { messages: BaseMessage[] }) => sub.invoke(state, { configurable: { model: "inner-model" } }),
    ],
  ])("a subgraph invoked from a node function with %s", async (_label, call) => {
    const sub = toolNodeGraph(tools);
    const parent = new StateGraph(MessagesAnnotation)
      .addNode("agent", async (state, config) => ({ messages: (await call(sub, state, config)).messages.slice(state.messages.length) }))
      .addEdge(START, "agent")
      .addEdge("agent", END)
      .compile();
    const result = await parent.invoke({ messages: [whereCall("sgn-1")] }, scope("sgn-alice", "sgn-t"));
    await expectChildOf("sgn-alice", "sgn-t", whereMessages(result.messages));
  });

  test("tool calls fanned out with Send (a ToolNode's lg_tool_call input and a messages input): each in its run's child", async () => {
    const fanOut = (state: { messages: BaseMessage[] }) => {
      const calls = (state.messages.at(-1) as AIMessage).tool_calls ?? [];
      return calls.map((call, i) => (i % 2 === 0 ? new Send("tools", { lg_tool_call: call }) : new Send("tools", { messages: [toolCalls([call])] })));
    };
    const fanGraph = new StateGraph(MessagesAnnotation)
      .addNode("tools", new ToolNode(tools))
      .addConditionalEdges(START, fanOut, ["tools"])
      .addEdge("tools", END)
      .compile();
    const calls = Array.from({ length: 4 }, (_, i) => ({ name: "local_where", args: {}, id: `send-${i}` }));
    const alice = await fanGraph.invoke({ messages: [toolCalls(calls)] }, scope("send-alice", "send-t"));
    await expectChildOf("send-alice", "send-t", whereMessages(alice.messages));
    const bob = await fanGraph.invoke({ messages: [toolCalls(calls)] }, { context: { user_id: "send-bob", thread_id: "send-t" } });
    await expectChildOf("send-bob", "send-t", whereMessages(bob.messages));
  });

  test("toolkit.callTool without a runtime, from a node that Send reaches inside a subgraph: the run's child", async () => {
    const WorkState = Annotation.Root({ results: Annotation<Where[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }) });
    const sub = new StateGraph(WorkState)
      .addNode("work", async () => {
        const outcome = (await toolkit.callTool({ server: "local", tool: "where", args: {} })) as { content: { text: string }[] };
        return { results: [JSON.parse(outcome.content[0].text) as Where] };
      })
      .addConditionalEdges(START, () => [new Send("work", {}), new Send("work", {})], ["work"])
      .addEdge("work", END)
      .compile();
    const parent = new StateGraph(WorkState).addNode("sub", sub).addEdge(START, "sub").addEdge("sub", END).compile();
    const result = await parent.invoke({}, scope("direct-send-alice", "direct-send-t"));
    await expectChildOf("direct-send-alice", "direct-send-t", result.results);
  });

  test("a ToolNode in a graph with a checkpointer, resumed after interrupt(): the resumed calls run in the thread's child", async () => {
    const approved = new StateGraph(MessagesAnnotation)
      .addNode("approve", () => {
        interrupt("approve the tool calls?");
        return {};
      })
      .addNode("tools", new ToolNode(tools))
      .addEdge(START, "approve")
      .addEdge("approve", "tools")
      .addEdge("tools", END)
      .compile({ checkpointer: new MemorySaver() });
    const options = scope("int-alice", "int-t");
    const first = await approved.invoke({ messages: [whereCall("int-1")] }, options);
    expect(toolMessagesOf(first.messages)).toEqual([]);
    const resumed = await approved.invoke(new Command({ resume: true }), options);
    await expectChildOf("int-alice", "int-t", whereMessages(resumed.messages));
  });

  test('streaming with streamMode ["updates", "custom"]: the call runs in the run\'s child', async () => {
    const stream = await graph.stream({ messages: [whereCall("stream-1")] }, { ...scope("stream-alice", "stream-t"), streamMode: ["updates", "custom"] });
    const got: Where[] = [];
    for await (const [mode, chunk] of stream) {
      if (mode !== "updates") continue;
      const update = (chunk as { tools?: { messages: BaseMessage[] } }).tools;
      if (update) got.push(...whereMessages(update.messages));
    }
    await expectChildOf("stream-alice", "stream-t", got);
  });

  test("createAgent with a contextSchema naming the user and the thread, no configurable: one child per (user, thread)", async () => {
    const RunContext = z.object({ user_id: z.string(), thread_id: z.string() });
    const model = new ScriptedChatModel([ScriptedChatModel.toolCall("local_where", {}, "ag-1"), { content: "done" }]);
    const agent = createAgent({ model, tools, contextSchema: RunContext });
    const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { context: { user_id: "ag-alice", thread_id: "ag-t" } });
    await expectChildOf("ag-alice", "ag-t", whereMessages(result.messages));
  });

  test("createAgent with a contextSchema and a checkpointer, two turns of one thread: one child", async () => {
    const RunContext = z.object({ user_id: z.string() });
    const model = new ScriptedChatModel([
      ScriptedChatModel.toolCall("local_where", {}, "agc-1"),
      { content: "done" },
      ScriptedChatModel.toolCall("local_where", {}, "agc-2"),
      { content: "done" },
    ]);
    const agent = createAgent({ model, tools, contextSchema: RunContext, checkpointer: new MemorySaver() });
    const options = { context: { user_id: "agc-alice" }, configurable: { thread_id: "agc-t" } };
    await agent.invoke({ messages: [new HumanMessage("go")] }, options);
    const second = await agent.invoke({ messages: [new HumanMessage("again")] }, options);
    await expectChildOf("agc-alice", "agc-t", whereMessages(second.messages));
  });

  test("a tool invoked directly with tool.invoke(args, config) outside any graph: the config's user and thread", async () => {
    const where = tools.find((t) => t.name === "local_where")!;
    const plain = await where.invoke({}, { context: { user_id: "direct-alice" }, configurable: { thread_id: "direct-t" } });
    const asCall = await where.invoke(
      { name: "local_where", args: {}, id: "direct-1", type: "tool_call" },
      { context: { user_id: "direct-alice" }, configurable: { thread_id: "direct-t" } },
    );
    await expectChildOf("direct-alice", "direct-t", [JSON.parse(String(plain)) as Where, whereOf(asCall as ToolMessage)]);
  });

  test("a tool invoked directly with a LangGraph server's config for an anonymous caller: not the child of the user its context names", async () => {
    const where = tools.find((t) => t.name === "local_where")!;
    const alice = await reference("direct-anon-alice", "direct-anon-t");
    // What @langchain/langgraph-api stamps when its auth handler admits a caller with identity "".
    const anonymous = { langgraph_auth_user: { identity: "", is_authenticated: false, permissions: [] }, langgraph_auth_user_id: "", thread_id: "direct-anon-t" };
    const got = JSON.parse(String(await where.invoke({}, { context: { user_id: "direct-anon-alice" }, configurable: anonymous }))) as Where;
    expect(got.pid).not.toBe(alice.pid);
    // The same as inside a graph, where LangGraph turns that user into the run's serverInfo.
    expect(got.pid).toBe(whereOf(await callThroughGraph(graph, "local_where", {}, { context: { user_id: "direct-anon-alice" }, configurable: anonymous })).pid);
  });

  test("configurable.thread_id with no context: the default user on that thread, not the default thread", async () => {
    const got = whereOf(await callThroughGraph(graph, "local_where", {}, { configurable: { thread_id: "cfg-only-t" } }));
    expect(got.cwd).toBe(workspaceOf("cfg-only-t"));
    expect(got.pid).not.toBe((await reference(undefined, "default")).pid);
    expect(got.pid).not.toBe((await reference("cfg-only-alice", "cfg-only-t")).pid);
    await expectChildOf(undefined, "cfg-only-t", [got]);
  });
});

describe("the thread workspace", () => {
  test("the child runs in <data dir>/threads/<thread>/user-data/workspace with TMPDIR/TMP/TEMP in .mcp/tmp (0700)", async () => {
    const where = JSON.parse(String((await callThroughGraph(graph, "local_where", {}, scope("alice", "ws-1"))).content));
    const workspace = path.join(dataDir, "threads", "ws-1", "user-data", "workspace");
    expect(where.cwd).toBe(workspace);
    const tmp = path.join(workspace, ".mcp", "tmp");
    expect([where.TMPDIR, where.TMP, where.TEMP]).toEqual([tmp, tmp, tmp]);
    expect((await stat(tmp)).mode & 0o777).toBe(0o700);
  });

  test("the child's environment: the server's env, the temp folders, the session tag and the six host variables the MCP SDK passes, nothing else of the host's", async () => {
    process.env.HARNESS_HOST_ONLY_SECRET = "never-in-a-child";
    try {
      const where = JSON.parse(String((await callThroughGraph(graph, "local_where", {}, scope("alice", "ws-env"))).content)) as { envNames: string[] };
      const host = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"].filter((name) => process.env[name] !== undefined);
      const expected = [...host, ...Object.keys(launch.env), "TMPDIR", "TMP", "TEMP", "MCP_HARNESS_STDIO_SESSION"];
      expect(where.envNames).toEqual(expected.sort());
    } finally {
      delete process.env.HARNESS_HOST_ONLY_SECRET;
    }
  });

  test("a workspace whose .mcp is a symlink to a folder elsewhere: that folder is not made private or used; a warning", async () => {
    const shared = await makeTempDir("mcp-shared-tmp-");
    await mkdir(path.join(shared, "tmp"), { mode: 0o777 });
    await chmod(path.join(shared, "tmp"), 0o777);
    const workspace = path.join(dataDir, "threads", "ws-link", "user-data", "workspace");
    await mkdir(workspace, { recursive: true });
    await symlink(shared, path.join(workspace, ".mcp"));
    const where = JSON.parse(String((await callThroughGraph(graph, "local_where", {}, scope("alice", "ws-link"))).content));
    expect(where.cwd).toBe(workspace);
    for (const key of ["TMPDIR", "TMP", "TEMP"]) expect(String(where[key])).not.toContain(".mcp");
    expect((await stat(path.join(shared, "tmp"))).mode & 0o777).toBe(0o777);
    expect(logger.messages("warn")).toContain(
      "the private temp folder (.mcp/tmp) of thread workspace 'ws-link' could not be prepared (a symlink); MCP server 'local' runs there with the host's temp folder",
    );
  });

  test.each([
    ["workspace", ["user-data", "workspace"], "user-data/workspace"],
    ["user-data", ["user-data"], "user-data"],
    ["thread's own", [], "its folder"],
  ])("a symbolic link planted as the thread's %s folder: no child starts there; a clear error", async (_label, parts, where) => {
    const outside = await makeTempDir("mcp-planted-");
    const thread = `ws-planted-${parts.length}`;
    const link = path.join(dataDir, "threads", thread, ...parts);
    await mkdir(path.dirname(link), { recursive: true });
    await symlink(outside, link);
    const message = await callThroughGraph(graph, "local_where", {}, scope("alice", thread));
    expect(message.status).toBe("error");
    expect(message.content).toBe(
      `MCP tool 'where' on server 'local' failed: could not prepare the thread workspace of MCP server 'local': a symbolic link at ${where}`,
    );
    expect(String(message.content)).not.toContain(outside);
    // Nothing was created through the link.
    expect(await readdir(outside)).toEqual([]);
  });

  test("a workspace holding a file named .mcp: the call still runs there, with the host's temp folder", async () => {
    const workspace = path.join(dataDir, "threads", "ws-file", "user-data", "workspace");
    await mkdir(workspace, { recursive: true });
    await writeFile(path.join(workspace, ".mcp"), "a project file");
    const message = await callThroughGraph(graph, "local_where", {}, scope("alice", "ws-file"));
    expect(message.status).toBe("success");
    expect(JSON.parse(String(message.content)).cwd).toBe(workspace);
    expect(await readFile(path.join(workspace, ".mcp"), "utf8")).toBe("a project file");
  });

  test("the config's cwd and temp variables win over the workspace", async () => {
    const where = JSON.parse(String((await callThroughGraph(graph, "pinned_where", {}, scope("alice", "ws-2"))).content));
    expect(where).toMatchObject({ cwd: "/tmp", TMPDIR: "/var/tmp", TEMP: "/var/tmp", TMP: path.join(dataDir, "threads", "ws-2", "user-data", "workspace", ".mcp", "tmp") });
  });

  test.each(["../../etc", "..", "a/b", "x".repeat(129), "é", ""])("a thread id like %j cannot place a folder outside the data dir", async (thread) => {
    const where = JSON.parse(String((await callThroughGraph(graph, "local_where", {}, { context: { user_id: "eve", thread_id: thread } })).content));
    const threads = path.join(dataDir, "threads") + path.sep;
    expect(where.cwd.startsWith(threads)).toBe(true);
    expect(path.relative(threads, where.cwd).split(path.sep)).toEqual([thread === "" ? "default" : threadFolderName(thread), "user-data", "workspace"]);
  });
});

describe("children that die, calls that fail", () => {
  test("killed during a call: that call returns an error ToolMessage and is not replayed; the next call runs on a new child", async () => {
    const first = await pid(scope("frank", "kill-during"));
    const call = await longTicker(scope("frank", "kill-during"));
    process.kill(first, "SIGKILL");
    const message = await call.done;
    expect(message.status).toBe("error");
    expect(message.content).toBe(
      "MCP tool 'ticker' on server 'local' failed: the connection to the server closed before it answered (its process ended or " +
        "closed its output). The call was not sent again; a new session serves the next call.",
    );
    const next = await pid(scope("frank", "kill-during"));
    expect(next).not.toBe(first);
    expect(alive(first)).toBe(false);
  });

  test("a child that closes its stdout during a call and runs on: the call fails now, the child is ended, the next call gets a new one", async () => {
    const configPath = await writeConfig(await makeTempDir("mcp-scopes-mute-"), {
      mcpServers: { mute: { type: "stdio", command: "bash", args: [path.join(__dirname, "..", "fixtures", "sh-server.sh")], tool_call_timeout: 600 } },
    });
    const own = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-scopes-mute-data-") });
    try {
      const ownGraph = toolNodeGraph(await own.getTools());
      const pidOf = async () => Number((await callThroughGraph(ownGraph, "mute_pid", {}, scope("gina", "mute"))).content);
      const first = await pidOf();
      const message = await callThroughGraph(ownGraph, "mute_close_stdout", {}, scope("gina", "mute"));
      expect(message.status).toBe("error");
      expect(String(message.content)).toMatch(/^MCP tool 'close_stdout' on server 'mute' failed: the connection to the server closed before it answered \(its process ended or closed its output\)/);
      expect(await waitUntil(() => !alive(first))).toBe(true);
      expect(await pidOf()).not.toBe(first);
    } finally {
      await own.close();
    }
  });

  /** A toolkit of the bash fixture server (`mute`, whose `close_stdout` closes its stdout unanswered) with `interceptor`. */
  const muteToolkit = async (interceptor: McpToolInterceptor): Promise<McpToolkit> => {
    const configPath = await writeConfig(await makeTempDir("mcp-scopes-resend-"), {
      mcpServers: { mute: { type: "stdio", command: "bash", args: [path.join(__dirname, "..", "fixtures", "sh-server.sh")], tool_call_timeout: 600 } },
    });
    return createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: await makeTempDir("mcp-scopes-resend-data-"), interceptors: [interceptor] });
  };

  test("an interceptor that sends the call again after its child closed: the text counts the sends, never says 'not sent again'", async () => {
    let attempts = 0;
    const retryOnce: McpToolInterceptor = async (request, next) => {
      attempts += 1;
      try {
        return await next(request);
      } catch {
        attempts += 1;
        return await next(request);
      }
    };
    const own = await muteToolkit(retryOnce);
    try {
      const message = await callThroughGraph(toolNodeGraph(await own.getTools()), "mute_close_stdout", {}, scope("gina", "resend"));
      expect(attempts).toBe(2);
      expect(message.status).toBe("error");
      expect(message.content).toBe(
        "MCP tool 'close_stdout' on server 'mute' failed: the connection to the server closed before it answered (its process ended or " +
          "closed its output). The call was sent 2 times (an interceptor sent it again) and not after this failure; a new session serves the next call.",
      );
    } finally {
      await own.close();
    }
  });

  test("an attempt an interceptor sends once the call failed is not sent: the call's 'not sent again' stays true", async () => {
    // A hedge sent once the first attempt is over, as a Promise.race hedge's timer would after the race was lost.
    let late: Promise<unknown> | undefined;
    const hedge: McpToolInterceptor = (request, next) => {
      const first = next(request);
      late = first.then(
        () => undefined,
        () => next(request).then((result) => result, (err: unknown) => err),
      );
      return first;
    };
    const own = await muteToolkit(hedge);
    try {
      const message = await callThroughGraph(toolNodeGraph(await own.getTools()), "mute_close_stdout", {}, scope("gina", "hedge"));
      expect(message.content).toBe(
        "MCP tool 'close_stdout' on server 'mute' failed: the connection to the server closed before it answered (its process ended or " +
          "closed its output). The call was not sent again; a new session serves the next call.",
      );
      // Sent, it would have reached a new child (which closes its stdout too): refused, it never left.
      const outcome = await late;
      expect(outcome).toBeInstanceOf(Error);
      expect((outcome as Error).message).not.toMatch(/connection to the server closed/);
    } finally {
      await own.close();
    }
  });

  test("killed between calls: the next call runs on a new child", async () => {
    const first = await pid(scope("frank", "kill-between"));
    process.kill(first, "SIGKILL");
    // Once the child is reaped the next call must not hit it, whether or not its pipes have reported the close yet.
    await waitFor(() => !alive(first));
    const message = await callThroughGraph(graph, "local_pid", {}, scope("frank", "kill-between"));
    const next = Number(message.content);
    expect(message.status).toBe("success");
    expect(next).not.toBe(first);
  });

  test("a child that cannot be started: the call's error names the server and the cause, never the command's local path", async () => {
    const bin = await makeTempDir("mcp-sessions-bin-");
    const command = path.join(bin, "mcp-server-node");
    await symlink(process.execPath, command);
    const launch = stdioFixture({ name: "gone", toolNames: ["pid"] });
    const configPath = await writeConfig(await makeTempDir("mcp-sessions-gone-"), {
      mcpServers: { gone: { type: "stdio", ...launch, command } },
    });
    const kit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
    try {
      const goneGraph = toolNodeGraph(await kit.getTools());
      await unlink(command);
      const message = await callThroughGraph(goneGraph, "gone_pid", {}, scope("ivan", "new-thread"));
      expect(message.status).toBe("error");
      expect(message.content).toBe(
        "MCP tool 'pid' on server 'gone' failed: could not start the stdio MCP server 'gone' " +
          "(ENOENT: the command, or the interpreter its script names, does not exist)",
      );
    } finally {
      await kit.close();
    }
  });

  test("a call that times out keeps the same child", async () => {
    const first = await pid(scope("gina", "timeout"));
    const message = await callThroughGraph(graph, "local_slow", { ms: 5000 }, scope("gina", "timeout"));
    expect(message.status).toBe("error");
    expect(String(message.content)).toMatch(/tool_call_timeout/);
    expect(await pid(scope("gina", "timeout"))).toBe(first);
  });

  // The error is held above the innermost handler, which has already dropped the old session by then: the pool's own
  // check (a late closed-connection error must find its session still in the pool) is pinned by late-invalidation.test.ts.
  test("a late error from an old child's call does not evict its replacement", async () => {
    const options = scope("hank", "late");
    const first = await pid(options);
    let arrived!: () => void;
    const errorArrived = new Promise<void>((resolve) => (arrived = resolve));
    let release!: () => void;
    holdError = { arrived, release: new Promise<void>((resolve) => (release = resolve)) };
    // A call on the first child fails when the child dies; its error is held inside the interceptor chain.
    const oldCall = await longTicker(options);
    process.kill(first, "SIGKILL");
    await errorArrived;
    // The replacement serves the scope while the old error is still on its way.
    const second = await pid(options);
    expect(second).not.toBe(first);
    release();
    expect((await oldCall.done).status).toBe("error");
    holdError = null;
    expect(await pid(options)).toBe(second);
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  expect(await waitUntil(condition)).toBe(true);
}
