export * from "./scripted-model";
export { MODEL_ENV_VAR, createDemoChatModel, resolveChatModel } from "./model";
