import type { ToolMessage } from "@langchain/core/messages";
import type { ToolRuntime } from "@langchain/core/tools";
import type { Command } from "@langchain/langgraph";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { isPlainObject, setOwn } from "./plain-object";

export type McpCallOutcome = CallToolResult | ToolMessage | Command;

/** The fields an interceptor may change with `override`. */
export interface McpToolCallPatch {
  args?: Record<string, unknown>;
  headers?: Readonly<Record<string, string>>;
  meta?: Readonly<Record<string, unknown>>;
}

export interface McpToolCallRequestInit {
  serverName: string;
  toolName: string;
  args: Record<string, unknown>;
  headers: Readonly<Record<string, string>>;
  runtime: ToolRuntime | undefined;
  meta?: Readonly<Record<string, unknown>>;
}

const EMPTY: Readonly<Record<string, unknown>> = Object.freeze({});

/** Already-frozen objects are shared as they are (the session pool memoizes by header object identity). */
function frozenCopy<T extends object>(value: T): Readonly<T> {
  return Object.isFrozen(value) ? value : Object.freeze({ ...value });
}

/**
 * Arguments copied and frozen at every depth: an interceptor writing into a nested object in place (a secret into
 * `args.person.name`) would otherwise change the model's own tool call, which the checkpoint keeps.
 */
function frozenArgs(value: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> {
  return Object.isFrozen(value) ? value : (deepFrozenCopy(value) as Readonly<Record<string, unknown>>);
}

function deepFrozenCopy(value: unknown): unknown {
  if (Array.isArray(value)) return Object.isFrozen(value) ? value : Object.freeze(value.map(deepFrozenCopy));
  if (!isPlainObject(value) || Object.isFrozen(value)) return value;
  const copy: Record<string, unknown> = {};
  // Own properties also for "__proto__": JSON arguments may hold that key.
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) setOwn(copy, key, deepFrozenCopy(item));
  return Object.freeze(copy);
}

/**
 * One MCP tool call as interceptors see it. Immutable: `override` returns a new request.
 * `toolName` is the raw MCP name; `runtime` is the `ToolRuntime` the tool node injected.
 */
export class McpToolCallRequest {
  readonly serverName: string;
  readonly toolName: string;
  readonly args: Readonly<Record<string, unknown>>;
  readonly headers: Readonly<Record<string, string>>;
  readonly runtime: ToolRuntime | undefined;
  readonly meta: Readonly<Record<string, unknown>>;

  constructor(init: McpToolCallRequestInit) {
    this.serverName = init.serverName;
    this.toolName = init.toolName;
    this.args = frozenArgs(init.args);
    this.headers = frozenCopy(init.headers);
    this.runtime = init.runtime;
    this.meta = frozenCopy(init.meta ?? EMPTY);
    Object.freeze(this);
  }

  override(patch: McpToolCallPatch): McpToolCallRequest {
    return new McpToolCallRequest({
      serverName: this.serverName,
      toolName: this.toolName,
      runtime: this.runtime,
      args: patch.args ?? this.args,
      headers: patch.headers ?? this.headers,
      meta: patch.meta ?? this.meta,
    });
  }
}

export type McpToolCallHandler = (request: McpToolCallRequest) => Promise<McpCallOutcome>;

/** Onion-style: the first registered interceptor is the outermost. */
export type McpToolInterceptor = (request: McpToolCallRequest, next: McpToolCallHandler) => Promise<McpCallOutcome>;

export function composeInterceptors(
  interceptors: readonly McpToolInterceptor[],
  innermost: McpToolCallHandler,
): McpToolCallHandler {
  return interceptors.reduceRight<McpToolCallHandler>(
    (next, interceptor) => (request) => interceptor(request, next),
    innermost,
  );
}

/**
 * An interceptor that only rewrites the request, or throws to deny it. It is a plain function, so the next layer's
 * promise is returned as it is, without one more promise per call; a throw (of `rewrite` or of `next`) becomes a
 * rejection, as from an async interceptor.
 */
export function rewritingInterceptor(rewrite: (request: McpToolCallRequest) => McpToolCallRequest): McpToolInterceptor {
  return (request, next) => {
    try {
      return next(rewrite(request));
    } catch (err) {
      return Promise.reject(err);
    }
  };
}
