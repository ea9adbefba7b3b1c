export { McpToolkit, createMcpToolkit, ToolkitClosedError, type McpDirectToolCall, type McpToolkitOptions } from "./toolkit";
export { McpToolCallError } from "../shared/errors";
export { getCachedMcpTools, resetMcpToolsCache, getDefaultMcpToolkit } from "./default";
export {
  McpToolCallRequest,
  composeInterceptors,
  type McpToolInterceptor,
  type McpToolCallHandler,
  type McpToolCallPatch,
  type McpCallOutcome,
} from "../shared/interceptor";
export { renderRoutingHints, resolveEffectiveRouting, resolveToolRouting } from "./routing";
export {
  getMcpToolRecord,
  getMcpRouting,
  MCP_METADATA_KEY,
  MCP_ROUTING_METADATA_KEY,
  type McpRoutingScope,
  type McpToolRecord,
  type McpToolRouting,
} from "./metadata";
export { type McpProgressEvent } from "./call";
export { DEFAULT_MAX_RESULT_CHARS, type McpToolArtifact } from "./results";
export { DEFAULT_HTTP_SESSION_IDLE_MS, DEFAULT_MAX_HTTP_SESSIONS_PER_SERVER } from "../sessions";
export { DEFAULT_STDIO_MAX_MESSAGE_BYTES } from "../sessions";
export { VALID_TOOL_NAME, MAX_TOOL_NAME_LENGTH } from "./names";
export { probeServers, type ProbeServersOptions, type ServerProbe } from "./probe";
export { createHarnessTool, type HarnessToolInvoker, type HarnessToolSpec } from "./tool";
export { checkedTaskServers, enabledTaskServers, quotedNames, type DiscoveredTool, type TaskToolsInput, type ToolkitTaskHooks } from "./task-hooks";
export { resolveToolRuntime, toolCallIdOf } from "./runtime";
