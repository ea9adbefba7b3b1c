import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { initChatModel } from "langchain";
import { ScriptedChatModel, demoPolicy } from "./scripted-model";

/** `provider:model` (e.g. `openai:gpt-4o-mini`) for `initChatModel`; unset means the offline demo model. */
export const MODEL_ENV_VAR = "MCP_HARNESS_MODEL";

/** The deterministic offline model the graphs use when no provider is configured. */
export function createDemoChatModel(): ScriptedChatModel {
  // One model serves every run of the process: it must not keep each run's messages.
  return new ScriptedChatModel([], { fallback: demoPolicy, recordCalls: false });
}

/**
 * The chat model of the graphs: `initChatModel(MCP_HARNESS_MODEL)` when set, else the demo model.
 * The provider's API key is read by the provider package from its own variable; nothing here reads,
 * logs or forwards it.
 */
export async function resolveChatModel(env: NodeJS.ProcessEnv = process.env): Promise<BaseChatModel> {
  const spec = env[MODEL_ENV_VAR]?.trim();
  if (!spec) return createDemoChatModel();
  try {
    return await initChatModel(spec);
  } catch (error) {
    const reason = (error instanceof Error ? error.message : String(error)).split(spec).join(`<${MODEL_ENV_VAR}>`);
    // The value is shown only when it looks like a model name: an API key pasted into the variable stays out of logs.
    const shown = MODEL_SPEC.test(spec) ? `=${spec}` : " (value not shown: it does not look like provider:model)";
    throw new Error(`${MODEL_ENV_VAR}${shown}: cannot initialise the chat model: ${reason}`);
  }
}

const MODEL_SPEC = /^[A-Za-z0-9_.-]{1,40}:[A-Za-z0-9_.:/@-]{1,100}$/;
