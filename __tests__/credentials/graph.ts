/** A real LangGraph graph around the prebuilt ToolNode, and a one-call helper, for the credential tests. */
import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { END, MessagesAnnotation, START, StateGraph, type BaseCheckpointSaver } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";

export function toolNodeGraph(tools: DynamicStructuredTool[], checkpointer?: BaseCheckpointSaver) {
  return new StateGraph(MessagesAnnotation)
    .addNode("tools", new ToolNode(tools))
    .addEdge(START, "tools")
    .addEdge("tools", END)
    .compile({ checkpointer });
}

export type ToolNodeGraph = ReturnType<typeof toolNodeGraph>;

let nextId = 0;

export function toolCalls(calls: { name: string; args: Record<string, unknown>; id?: string }[]): AIMessage {
  return new AIMessage({
    content: "",
    tool_calls: calls.map((call) => ({ name: call.name, args: call.args, id: call.id ?? `call-${++nextId}`, type: "tool_call" as const })),
  });
}

export function toolMessagesOf(messages: BaseMessage[]): ToolMessage[] {
  return messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
}

/** Runs one tool call through the graph with `options` (context, configurable, …) and returns its ToolMessage. */
export async function callThroughGraph(
  graph: ToolNodeGraph,
  name: string,
  args: Record<string, unknown>,
  options: Record<string, unknown> = {},
): Promise<ToolMessage> {
  const result = await graph.invoke({ messages: [toolCalls([{ name, args }])] }, options);
  const messages = toolMessagesOf(result.messages);
  if (messages.length !== 1) throw new Error(`expected one ToolMessage, got ${messages.length}`);
  return messages[0];
}
