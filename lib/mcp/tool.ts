import type { CallbackManagerForToolRun } from "@langchain/core/callbacks/manager";
import { ToolMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  DynamicStructuredTool,
  ToolInputParsingException,
  type StructuredToolCallInput,
  type ToolRunnableConfig,
  type ToolSchemaBase,
} from "@langchain/core/tools";
import type { JSONSchema } from "@langchain/core/utils/json_schema";
import { invalidArgumentsText } from "./arguments";
import { MCP_METADATA_KEY, MCP_ROUTING_METADATA_KEY, type McpToolRecord, type McpToolRouting } from "./metadata";

export interface HarnessToolSpec {
  visibleName: string;
  description: string;
  inputSchema: JSONSchema;
  record: McpToolRecord;
  routing: McpToolRouting;
  annotations?: Record<string, unknown>;
}

/** What the toolkit does for one call: returns a ToolMessage/Command, or plain content outside a tool node. */
export type HarnessToolInvoker = (
  record: McpToolRecord,
  visibleName: string,
  args: Record<string, unknown>,
  config: RunnableConfig | undefined,
) => Promise<unknown>;

function isToolCallInput(value: unknown): value is { args: unknown; id?: string } {
  return typeof value === "object" && value !== null && (value as { type?: unknown }).type === "tool_call" && "args" in value;
}

function isInputParsingError(err: unknown): boolean {
  // By name too: a second copy of @langchain/core (CJS next to ESM) has a class of its own.
  if (err instanceof ToolInputParsingException) return true;
  if (err instanceof Error && err.constructor?.name === "ToolInputParsingException") return true;
  // LangChain's schema validator URI-encodes each field's path and throws on a name it cannot encode (a lone
  // surrogate); the tool itself never throws one (its failures are ToolMessages).
  return err instanceof URIError;
}

/**
 * A harness tool. LangChain validates the arguments against the JSON schema before the tool runs and
 * throws a `ToolInputParsingException` that says nothing about the fields; `ToolNode` turns it into
 * "did not match expected schema" and `createAgent` into a text with the JavaScript stack and local paths.
 * Here that exception becomes what the model needs: an error ToolMessage with one line per field
 * (`a: expected number`). Everything else — parsing, callbacks, tracing — is `StructuredTool.call`'s own.
 */
class HarnessTool extends DynamicStructuredTool {
  override async call<TArg extends StructuredToolCallInput<ToolSchemaBase>, TConfig extends ToolRunnableConfig | undefined>(
    arg: TArg,
    configArg?: TConfig,
    tags?: string[],
  ): ReturnType<typeof DynamicStructuredTool.prototype.call<TArg, TConfig>> {
    try {
      return await super.call(arg, configArg, tags);
    } catch (err) {
      if (!isInputParsingError(err)) throw err;
      const input = isToolCallInput(arg) ? arg.args : arg;
      const text = invalidArgumentsText(this.name, this.schema as JSONSchema, input);
      const toolCallId = isToolCallInput(arg) ? arg.id : (configArg as ToolRunnableConfig | undefined)?.toolCall?.id;
      if (toolCallId === undefined) throw new ToolInputParsingException(text);
      const message = new ToolMessage({ content: text, status: "error", tool_call_id: toolCallId, name: this.name });
      return message as Awaited<ReturnType<typeof DynamicStructuredTool.prototype.call<TArg, TConfig>>>;
    }
  }
}

/**
 * One MCP tool as a LangChain tool. Its function receives the `ToolRuntime` (third argument) and hands
 * the call to the toolkit; `responseFormat` stays "content" so it may return a ToolMessage or a Command.
 */
export function createHarnessTool(spec: HarnessToolSpec, invoke: HarnessToolInvoker): DynamicStructuredTool {
  const metadata: Record<string, unknown> = { [MCP_METADATA_KEY]: { ...spec.record } };
  if (spec.routing.mode !== "off") metadata[MCP_ROUTING_METADATA_KEY] = { ...spec.routing, keywords: [...spec.routing.keywords] };
  if (spec.annotations) metadata.annotations = spec.annotations;
  return new HarnessTool({
    name: spec.visibleName,
    description: spec.description,
    schema: spec.inputSchema,
    metadata,
    func: (args: Record<string, unknown>, _runManager?: CallbackManagerForToolRun, config?: RunnableConfig) =>
      invoke(spec.record, spec.visibleName, args, config),
  });
}
