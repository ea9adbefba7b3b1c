import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import {
  BaseChatModel,
  type BaseChatModelParams,
  type BindToolsInput,
} from "@langchain/core/language_models/chat_models";
import {
  AIMessage,
  HumanMessage,
  ToolMessage,
  type AIMessageFields,
  type BaseMessage,
  type ToolCall,
} from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { isStructuredTool, type StructuredToolInterface } from "@langchain/core/tools";

/** What a script step produces: a finished message, the fields of one, or its text. */
export type ScriptedReply = AIMessage | AIMessageFields | string;

/** Handed to policy steps so they can mint tool-call ids from the model's own counter. */
export interface ScriptContext {
  /** 0-based number of this model call, counted across the model and all its bound copies. */
  readonly callIndex: number;
  /** A fresh tool-call id, unique for the model instance and deterministic for a given run of calls. */
  nextToolCallId(): string;
}

export type ScriptPolicy = (
  messages: BaseMessage[],
  tools: StructuredToolInterface[],
  context: ScriptContext,
) => ScriptedReply | Promise<ScriptedReply>;

export type ScriptStep = ScriptedReply | ScriptPolicy;

export interface ScriptedChatModelOptions extends BaseChatModelParams {
  /** Played for every call after the script is exhausted. */
  fallback?: ScriptStep;
  /** Prefix of generated tool-call ids (default `call_`). */
  toolCallIdPrefix?: string;
  /** Keep each call's input in `calls` (default true). A long-lived model serving many runs should not. */
  recordCalls?: boolean;
}

export const DEFAULT_SCRIPT_FALLBACK = "(scripted model: the script is exhausted)";

/** Script position, recorded inputs and the id counter: shared by a model and every copy `bindTools` makes. */
interface ScriptState {
  cursor: number;
  toolCallCount: number;
  callCount: number;
  readonly calls: BaseMessage[][];
}

/**
 * A deterministic, offline chat model for tests and for running the graphs without a provider.
 *
 * It plays `script` in order, one step per call, then answers with `fallback`. `bindTools` returns a
 * copy that remembers the tools but shares the script position: `createAgent` re-binds on every model
 * call, so a per-copy cursor would replay the first step forever.
 */
export class ScriptedChatModel extends BaseChatModel {
  static override lc_name(): string {
    return "ScriptedChatModel";
  }

  readonly script: readonly ScriptStep[];
  readonly fallback: ScriptStep;
  readonly toolCallIdPrefix: string;
  readonly #options: ScriptedChatModelOptions;
  #state: ScriptState;
  #boundTools: readonly StructuredToolInterface[] = [];
  #recordCalls: boolean;

  constructor(script: readonly ScriptStep[] = [], options: ScriptedChatModelOptions = {}) {
    const { fallback, toolCallIdPrefix, recordCalls, ...baseParams } = options;
    super(baseParams);
    this.script = [...script];
    this.fallback = fallback ?? DEFAULT_SCRIPT_FALLBACK;
    this.toolCallIdPrefix = toolCallIdPrefix ?? "call_";
    this.#options = options;
    this.#state = { cursor: 0, toolCallCount: 0, callCount: 0, calls: [] };
    this.#recordCalls = recordCalls ?? true;
  }

  /** An AIMessage with one tool call. Without `id`, the model that plays it assigns a fresh one. */
  static toolCall(name: string, args: Record<string, unknown> = {}, id?: string): AIMessage {
    const call: ToolCall = { name, args, type: "tool_call" };
    if (id !== undefined) call.id = id;
    return new AIMessage({ content: "", tool_calls: [call] });
  }

  /** The tools of this copy's `bindTools` call (empty on an unbound model). */
  get boundTools(): readonly StructuredToolInterface[] {
    return this.#boundTools;
  }

  /** Every input this model (and its bound copies) saw, in call order. */
  get calls(): BaseMessage[][] {
    return this.#state.calls;
  }

  /** How many script steps have been played (fallback calls not counted). */
  get played(): number {
    return Math.min(this.#state.cursor, this.script.length);
  }

  get exhausted(): boolean {
    return this.#state.cursor >= this.script.length;
  }

  /** Rewind the script, forget the recorded calls and restart the id counter (bound copies included). */
  reset(): void {
    this.#state.cursor = 0;
    this.#state.toolCallCount = 0;
    this.#state.callCount = 0;
    this.#state.calls.length = 0;
  }

  _llmType(): string {
    return "scripted";
  }

  /** Binding options such as `tool_choice` are accepted and ignored. */
  override bindTools(tools: BindToolsInput[], _kwargs?: Partial<this["ParsedCallOptions"]>): ScriptedChatModel {
    const bound = new ScriptedChatModel(this.script, this.#options);
    bound.#state = this.#state;
    bound.#boundTools = tools.filter(isStructuredTool);
    return bound;
  }

  async _generate(
    messages: BaseMessage[],
    _options: this["ParsedCallOptions"],
    _runManager?: CallbackManagerForLLMRun,
  ): Promise<ChatResult> {
    const state = this.#state;
    const callIndex = state.callCount;
    state.callCount += 1;
    if (this.#recordCalls) state.calls.push([...messages]);
    // Claim the step before any await so concurrent calls never play the same one.
    const step = state.cursor < this.script.length ? this.script[state.cursor] : this.fallback;
    state.cursor += 1;

    const context: ScriptContext = {
      callIndex,
      nextToolCallId: () => this.#nextToolCallId(messages),
    };
    const reply = typeof step === "function" ? await step(messages, [...this.boundTools], context) : step;
    const message = this.#materialize(reply, messages);
    return { generations: [{ text: message.text, message }] };
  }

  /**
   * Ids carry the input length as well as the counter: messages only grow along a thread, so a fresh
   * model (e.g. after a server restart) never reuses an id already answered in a persisted thread.
   */
  #nextToolCallId(messages: readonly BaseMessage[]): string {
    this.#state.toolCallCount += 1;
    return `${this.toolCallIdPrefix}${this.#state.toolCallCount}_${messages.length}`;
  }

  /** Always a new message: the messages reducer assigns ids in place, so script objects must not be shared. */
  #materialize(reply: ScriptedReply, messages: readonly BaseMessage[]): AIMessage {
    const fields: AIMessageFields = AIMessage.isInstance(reply)
      ? {
          content: reply.content,
          name: reply.name,
          id: reply.id,
          tool_calls: reply.tool_calls,
          invalid_tool_calls: reply.invalid_tool_calls,
          usage_metadata: reply.usage_metadata,
          additional_kwargs: reply.additional_kwargs,
          response_metadata: reply.response_metadata,
        }
      : typeof reply === "string"
        ? { content: reply }
        : reply;
    const toolCalls = (fields.tool_calls ?? []).map(
      (call): ToolCall => ({
        ...call,
        args: structuredClone(call.args),
        id: call.id ?? this.#nextToolCallId(messages),
        type: "tool_call",
      }),
    );
    return new AIMessage({
      ...fields,
      content: fields.content ?? "",
      additional_kwargs: { ...fields.additional_kwargs },
      response_metadata: { ...fields.response_metadata },
      tool_calls: toolCalls,
    });
  }
}

const NAME_CHAR = "A-Za-z0-9_-";

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** First position where `name` occurs as a whole word (tool-name characters around it do not count). */
function wordIndex(text: string, name: string): number {
  if (name === "") return -1;
  const re = new RegExp(`(?<![${NAME_CHAR}])${escapeRegExp(name)}(?![${NAME_CHAR}])`);
  return re.exec(text)?.index ?? -1;
}

function rawMcpName(tool: StructuredToolInterface): string | undefined {
  const metadata = (tool as { metadata?: Record<string, unknown> }).metadata;
  const mcp = metadata?.mcp;
  if (typeof mcp !== "object" || mcp === null) return undefined;
  const rawName = (mcp as { rawName?: unknown }).rawName;
  return typeof rawName === "string" ? rawName : undefined;
}

/** The tool the text names: earliest mention wins; at the same position the longer name (visible over raw). */
export function findMentionedTool(
  text: string,
  tools: readonly StructuredToolInterface[],
): StructuredToolInterface | undefined {
  let best: { tool: StructuredToolInterface; index: number; length: number } | undefined;
  for (const tool of tools) {
    for (const name of [tool.name, rawMcpName(tool)]) {
      if (name === undefined) continue;
      const index = wordIndex(text, name);
      if (index < 0) continue;
      if (!best || index < best.index || (index === best.index && name.length > best.length)) {
        best = { tool, index, length: name.length };
      }
    }
  }
  return best?.tool;
}

/** How much of a message is searched for tool arguments, and from how many opening braces at most. */
const JSON_SEARCH_CHARS = 64 * 1024;
const JSON_SEARCH_STARTS = 64;

/**
 * The first balanced `{…}` in `text` that parses as a JSON object; `{}` when there is none. Bounded: each candidate
 * is a scan to its closing brace, and the demo model answers every run of a server (a huge message of lone `{`
 * would otherwise hold its event loop for minutes).
 */
export function extractJsonObject(message: string): Record<string, unknown> {
  const text = message.length > JSON_SEARCH_CHARS ? message.slice(0, JSON_SEARCH_CHARS) : message;
  let tried = 0;
  for (let start = text.indexOf("{"); start >= 0 && tried < JSON_SEARCH_STARTS; start = text.indexOf("{", start + 1), tried += 1) {
    const end = matchingBrace(text, start);
    if (end < 0) continue;
    try {
      const value: unknown = JSON.parse(text.slice(start, end + 1));
      if (typeof value === "object" && value !== null && !Array.isArray(value)) {
        return value as Record<string, unknown>;
      }
    } catch {
      // not JSON: try the next brace
    }
  }
  return {};
}

function matchingBrace(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i += 1) {
    const ch = text[i];
    if (inString) {
      if (ch === "\\") i += 1;
      else if (ch === '"') inString = false;
    } else if (ch === '"') {
      inString = true;
    } else if (ch === "{") {
      depth += 1;
    } else if (ch === "}") {
      depth -= 1;
      if (depth === 0) return i;
    }
  }
  return -1;
}

function toolCallName(messages: readonly BaseMessage[], toolCallId: string): string | undefined {
  for (let i = messages.length - 1; i >= 0; i -= 1) {
    const m = messages[i];
    if (AIMessage.isInstance(m)) {
      const call = m.tool_calls?.find((c) => c.id === toolCallId);
      if (call) return call.name;
    }
  }
  return undefined;
}

/**
 * The offline demo behaviour: a human message that names a bound tool (visible or raw MCP name) calls
 * it with the first JSON object in the text as arguments; tool results are echoed back; anything else
 * gets a short help text.
 */
export const demoPolicy: ScriptPolicy = (messages, tools, context) => {
  const last = messages.at(-1);

  if (last && ToolMessage.isInstance(last)) {
    const trailing: ToolMessage[] = [];
    for (let i = messages.length - 1; i >= 0; i -= 1) {
      const m = messages[i];
      if (!ToolMessage.isInstance(m)) break;
      trailing.unshift(m);
    }
    const lines = trailing.map((m) => {
      const name = m.name ?? toolCallName(messages, m.tool_call_id) ?? "(unknown)";
      return `Tool ${name} returned: ${m.text}`;
    });
    return { content: lines.join("\n") };
  }

  if (last && HumanMessage.isInstance(last)) {
    const text = last.text;
    // A background task notification (its frame is data, never a request to call a tool): report it.
    if (last.additional_kwargs?.mcp_task_notification !== undefined) return { content: demoNotificationReport(text) };
    const tool = findMentionedTool(text, tools);
    if (tool) {
      const call: ToolCall = { name: tool.name, args: extractJsonObject(text), id: context.nextToolCallId(), type: "tool_call" };
      return { content: "", tool_calls: [call] };
    }
  }

  return { content: demoHelpText(tools) };
};

/** One line about the task event framed in a notification's text (the first JSON object in it). */
export function demoNotificationReport(text: string): string {
  const event = extractJsonObject(text.slice(Math.max(0, text.lastIndexOf("--- BEGIN "))));
  const name = typeof event.task_name === "string" ? event.task_name : "(unnamed)";
  const status = typeof event.status === "string" ? event.status : "updated";
  const detail =
    event.status === "completed" ? `: ${JSON.stringify(event.result ?? event.result_preview ?? null)}` : typeof event.error === "string" ? `: ${event.error}` : "";
  return `Background task ${name} is ${status}${detail}`;
}

export function demoHelpText(tools: readonly StructuredToolInterface[]): string {
  if (tools.length === 0) {
    return "This is the offline demo model and no tools are available. Configure MCP servers in extensions_config.json, or set MCP_HARNESS_MODEL (e.g. openai:gpt-4o-mini) to use a real model.";
  }
  const names = tools.map((t) => t.name).join(", ");
  return `This is the offline demo model. Name a tool and give its arguments as JSON, e.g. "${tools[0].name} {}". Tools: ${names}.`;
}
