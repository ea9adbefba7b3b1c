import { ToolMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { ToolRuntime } from "@langchain/core/tools";
import { isCommand, isGraphBubbleUp } from "@langchain/langgraph";
import type { CallToolResult, Progress } from "@modelcontextprotocol/sdk/types.js";
import type { McpServerConfig } from "../config";
import { composeInterceptors, McpToolCallRequest, type McpCallOutcome, type McpToolInterceptor } from "./interceptor";
import type { McpToolRecord } from "./metadata";
import type { SessionPool } from "./pool";
import { initTimeoutMs } from "./discovery";
import { boundText, convertCallToolResult } from "./results";
import { resolveToolRuntime, toolCallIdOf } from "./runtime";

export interface McpProgressEvent {
  type: "mcp_progress";
  toolCallId: string | undefined;
  server: string;
  tool: string;
  progress: number;
  total: number | undefined;
  message: string | undefined;
}

export interface CallTarget {
  pool: SessionPool;
  server: McpServerConfig;
}

const CALL_ERROR_MAX_CHARS = 1000;

export class McpToolCallError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ToolException";
  }
}

/** The innermost handler: one `tools/call` on a pooled session with the request's final headers. */
function sendToServer(target: CallTarget, record: McpToolRecord, runtime: ToolRuntime | undefined) {
  return async (request: McpToolCallRequest): Promise<CallToolResult> => {
    const { server, pool } = target;
    const signal = runtime?.signal;
    const headers = server.type === "stdio" ? {} : request.headers;
    const lease = await pool.acquire(request.serverName, server, { headers, initTimeoutMs: initTimeoutMs(server), signal });
    try {
      const writer = runtime?.writer ?? undefined;
      const toolCallId = toolCallIdOf(runtime);
      const progress = writer
        ? lease.session.progress.register((p: Progress) =>
            writer({
              type: "mcp_progress",
              toolCallId,
              server: record.server,
              tool: record.rawName,
              progress: p.progress,
              total: p.total,
              message: p.message,
            } satisfies McpProgressEvent),
          )
        : undefined;
      const meta = { ...request.meta, ...(progress ? { progressToken: progress.token } : {}) };
      try {
        return (await lease.session.client.callTool(
          { name: request.toolName, arguments: { ...request.args }, ...(Object.keys(meta).length > 0 ? { _meta: meta } : {}) },
          undefined,
          { signal, ...(server.tool_call_timeout ? { timeout: server.tool_call_timeout * 1000 } : {}) },
        )) as CallToolResult;
      } finally {
        progress?.done();
      }
    } finally {
      lease.release();
    }
  };
}

/** Turns what the chain produced into what the tool returns: a ToolMessage in a tool node, else content. */
function toToolOutput(outcome: McpCallOutcome, visibleName: string, toolCallId: string | undefined): unknown {
  if (isCommand(outcome) || ToolMessage.isInstance(outcome)) return outcome;
  const converted = convertCallToolResult(outcome);
  if (toolCallId === undefined) {
    if (converted.isError) throw new McpToolCallError(typeof converted.content === "string" ? converted.content : "MCP tool error");
    return converted.content;
  }
  return new ToolMessage({
    content: converted.content,
    artifact: converted.artifact,
    status: converted.isError ? "error" : "success",
    tool_call_id: toolCallId,
    name: visibleName,
  });
}

/** An error ToolMessage for a call that never reached the chain. */
export function toolErrorOutput(message: string, visibleName: string, config: RunnableConfig | undefined): unknown {
  return errorOutput(message, visibleName, toolCallIdOf(resolveToolRuntime(config)));
}

function errorOutput(message: string, visibleName: string, toolCallId: string | undefined): unknown {
  if (toolCallId === undefined) throw new McpToolCallError(message);
  return new ToolMessage({ content: message, status: "error", tool_call_id: toolCallId, name: visibleName });
}

export interface CallPathOptions {
  interceptors: readonly McpToolInterceptor[];
  /** Headers the call starts from (static headers for HTTP/SSE). */
  headers: Readonly<Record<string, string>>;
}

/**
 * One tool call through the interceptor chain. Failures the model can act on become error ToolMessages
 * with this project's own text; LangGraph interrupts/commands and run cancellation propagate.
 */
export async function runToolCall(
  target: CallTarget,
  record: McpToolRecord,
  visibleName: string,
  args: Record<string, unknown>,
  config: RunnableConfig | undefined,
  opts: CallPathOptions,
): Promise<unknown> {
  const runtime = resolveToolRuntime(config);
  const toolCallId = toolCallIdOf(runtime);
  const request = new McpToolCallRequest({
    serverName: record.server,
    toolName: record.rawName,
    args,
    headers: opts.headers,
    runtime,
  });
  const handler = composeInterceptors(opts.interceptors, sendToServer(target, record, runtime));
  try {
    return toToolOutput(await handler(request), visibleName, toolCallId);
  } catch (err) {
    if (isGraphBubbleUp(err) || runtime?.signal?.aborted) throw err;
    if (err instanceof McpToolCallError) return errorOutput(err.message, visibleName, toolCallId);
    const reason = boundText((err as Error)?.message ?? String(err), CALL_ERROR_MAX_CHARS);
    return errorOutput(`MCP tool '${record.rawName}' on server '${record.server}' failed: ${reason}`, visibleName, toolCallId);
  }
}
