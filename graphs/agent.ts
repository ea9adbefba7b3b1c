/**
 * The agent graph served by `langgraphjs dev` / LangGraph Studio (`langgraph.json` → `agent`).
 *
 * Exported as a factory: the LangGraph API server calls a function export once per run (and per
 * state/schema read), so every run picks up the current MCP tools and a config edit shows up without
 * a restart. The server replaces the graph's checkpointer and store with its own, so none is set here.
 * With `mcpTasks.enabled` in the config, the agent also gets the process's task runtime's tools (submit wrappers,
 * `list_background_tasks`, `cancel_background_task`) and the `background_tasks` state projection; task events
 * come back as runs of this graph on the task's thread (`graphs/server-tasks.ts`).
 */
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { StructuredToolInterface } from "@langchain/core/tools";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { resolveChatModel } from "../lib/agent/index";
import { getCachedMcpTools, renderRoutingHints } from "../lib/index";
import { createBackgroundTaskTools, createBackgroundTasksMiddleware } from "../lib/tasks/index";
import { getServerTasks } from "./server-tasks";

export const AGENT_BASE_PROMPT =
  "You are a helpful assistant with access to tools provided by MCP servers. " +
  "Use a tool when it can answer the request better than you can; otherwise answer directly. " +
  "Report tool errors plainly instead of guessing a result.";

export function buildAgentSystemPrompt(tools: readonly StructuredToolInterface[]): string {
  const hints = renderRoutingHints(tools);
  return hints ? `${AGENT_BASE_PROMPT}\n\n${hints}` : AGENT_BASE_PROMPT;
}

let modelPromise: Promise<BaseChatModel> | undefined;

/** One model per process (the scripted model's id counter lives on it); a failed init is retried next run. */
function getModel(): Promise<BaseChatModel> {
  modelPromise ??= resolveChatModel().catch((error: unknown) => {
    modelPromise = undefined;
    throw error;
  });
  return modelPromise;
}

export async function createMcpAgent() {
  const [tasks, model] = await Promise.all([getServerTasks(), getModel()]);
  if (tasks === null) {
    const tools = await getCachedMcpTools();
    return createAgent({ model, tools, systemPrompt: buildAgentSystemPrompt(tools) });
  }
  const tools = [...(await tasks.toolkit.getTools()), ...createBackgroundTaskTools(tasks.runtime)];
  return createAgent({
    model,
    tools,
    systemPrompt: buildAgentSystemPrompt(tools),
    middleware: [createBackgroundTasksMiddleware(tasks.runtime)],
  });
}

/**
 * A fresh agent per call (createAgent costs about a millisecond). Sharing one compiled graph across
 * calls would be unsafe: the server assigns `checkpointer` on the object it gets back for every run,
 * and a concurrent stateless run sets it to null.
 */
export async function graph(_config: LangGraphRunnableConfig) {
  return createMcpAgent();
}
