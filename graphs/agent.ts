/**
 * The agent graph served by `langgraphjs dev` / LangGraph Studio (`langgraph.json` → `agent`).
 *
 * Exported as a factory: the LangGraph API server calls a function export once per run (and per
 * state/schema read), so every run picks up the current MCP tools and a config edit shows up without
 * a restart. The server replaces the graph's checkpointer and store with its own, so none is set here.
 * With `mcpTasks.enabled` in the config, the agent also gets the task runtime's tools (submit wrappers,
 * `list_background_tasks`, `cancel_background_task`) and the `background_tasks` state projection.
 */
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { StructuredToolInterface } from "@langchain/core/tools";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { resolveChatModel } from "../lib/agent/index";
import { loadExtensionsConfig } from "../lib/config/index";
import { createMcpToolkit, getCachedMcpTools, renderRoutingHints, silentLogger, type McpToolkit } from "../lib/index";
import {
  createBackgroundTaskTools,
  createBackgroundTasksMiddleware,
  createLangGraphServerNotifier,
  createTaskRuntime,
  type TaskRuntime,
} from "../lib/tasks/index";

/** Where this server's own API answers, for task notifications (default `http://127.0.0.1:$PORT`, PORT 2024). */
export const AGENT_API_URL_ENV_VAR = "MCP_HARNESS_LANGGRAPH_API_URL";

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

export interface AgentTasks {
  runtime: TaskRuntime;
  /** The toolkit whose task servers' submit tools are wrapped by `runtime`. */
  toolkit: McpToolkit;
}

export function agentApiUrl(env: NodeJS.ProcessEnv = process.env): string {
  return env[AGENT_API_URL_ENV_VAR]?.trim() || `http://127.0.0.1:${env.PORT?.trim() || "2024"}`;
}

let tasksPromise: Promise<AgentTasks | null> | undefined;

/**
 * The process's task runtime and its toolkit when the config says `mcpTasks.enabled` (a startup-only setting,
 * so it is read once), else null. Task events are delivered as runs on this server's own `agent` assistant.
 * A failed start is retried on the next run.
 */
export function getAgentTasks(): Promise<AgentTasks | null> {
  tasksPromise ??= (async () => {
    let enabled: boolean;
    try {
      enabled = (await loadExtensionsConfig({ logger: silentLogger })).config.mcpTasks.enabled;
    } catch {
      // An unreadable config is the toolkit's to report (as before); look again on the next run.
      tasksPromise = undefined;
      return null;
    }
    if (!enabled) return null;
    const notifier = createLangGraphServerNotifier({ apiUrl: agentApiUrl(), assistantId: "agent" });
    const runtime = await createTaskRuntime({ notifier });
    return { runtime, toolkit: createMcpToolkit({ taskRuntime: runtime }) };
  })().catch((error: unknown) => {
    tasksPromise = undefined;
    throw error;
  });
  return tasksPromise;
}

export async function createMcpAgent() {
  const [tasks, model] = await Promise.all([getAgentTasks(), getModel()]);
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
