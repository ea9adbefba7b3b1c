export {
  DEFAULT_SCRIPT_FALLBACK,
  ScriptedChatModel,
  demoHelpText,
  demoPolicy,
  extractJsonObject,
  findMentionedTool,
  type ScriptContext,
  type ScriptPolicy,
  type ScriptStep,
  type ScriptedChatModelOptions,
  type ScriptedReply,
} from "./scripted-model";
export { MODEL_ENV_VAR, createDemoChatModel, resolveChatModel } from "./model";
