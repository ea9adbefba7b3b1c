import { BaseMessage } from "@langchain/core/messages";
import { Command, isCommand, Overwrite, Send } from "@langchain/langgraph";
import type { McpCallOutcome } from "../shared/interceptor";
import { isPlainObject } from "../shared/plain-object";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { REDACTED, type Redactor } from "../shared/redact";

/** Message fields that name or link a message rather than carry what it says: kept as they are. */
const MESSAGE_IDENTITY_FIELDS = new Set(["id", "name", "tool_call_id", "role", "status"]);
/** Fields holding tool calls: each call's args (and error) are scrubbed, its id, name, type and index kept. */
const TOOL_CALL_FIELDS = new Set(["tool_calls", "invalid_tool_calls", "tool_call_chunks"]);
const TOOL_CALL_IDENTITY_FIELDS = new Set(["id", "name", "type", "index"]);

type CommandArgs = ConstructorParameters<typeof Command>[0];
type MessageClass = new (fields: Record<string, unknown>) => BaseMessage;

/**
 * A chain outcome with the call's secrets scrubbed: a result (also a secret cut over its text blocks), a ToolMessage,
 * or everything a Command carries into state or to a node (every update value, messages of any class at any depth,
 * Send args, resume). Only what holds
 * a secret is rebuilt, with the same class; the rest is returned as it is.
 */
export function scrubOutcome(outcome: McpCallOutcome, redactor: Redactor): McpCallOutcome {
  if (redactor.isEmpty) return outcome;
  const scrubbed = scrubValue(outcome, redactor);
  return isCommand(scrubbed) || BaseMessage.isInstance(scrubbed) ? scrubbed : scrubAcrossTextBlocks(scrubbed, redactor);
}

function scrubValue<T>(value: T, redactor: Redactor): T {
  return redactor.deep(value, (instance) => scrubInstance(instance, redactor));
}

/** Class instances LangGraph reads as state or node input; any other instance as `scrubOther` keeps or replaces it. */
function scrubInstance(value: object, redactor: Redactor): unknown {
  if (BaseMessage.isInstance(value)) return scrubMessage(value, redactor);
  if (isCommand(value)) return scrubCommand(value, redactor);
  if (value instanceof Send) return scrubSend(value, redactor);
  if (value instanceof Overwrite) {
    const inner: unknown = value.value;
    const scrubbed = scrubValue(inner, redactor);
    return scrubbed === inner ? value : new Overwrite(scrubbed);
  }
  return scrubOther(value, redactor);
}

/**
 * Any other instance (a URL, a typed array, an object or an array of the interceptor's own class) as it is, unless
 * the form the state's JSON and a checkpoint give it holds a secret: then that form, scrubbed (a byte array whose
 * bytes spell one, REDACTED). A URL's JSON is its `href`; an instance's, its own fields.
 */
export function scrubOther(value: object, redactor: Redactor): unknown {
  if (ArrayBuffer.isView(value)) {
    const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("utf8");
    return redactor.text(bytes) === bytes ? value : REDACTED;
  }
  let json: unknown;
  try {
    json = JSON.parse(JSON.stringify(value) ?? "null");
  } catch {
    // No JSON form (a cycle, a BigInt): the artifact's bound leaves it out.
    return value;
  }
  const scrubbed = scrubValue(json, redactor);
  return scrubbed === json ? value : scrubbed;
}

/**
 * The message rebuilt with its class from the fields it serializes (as `toJSON` reads them) and its own ones,
 * every field but the identity ones scrubbed.
 */
function scrubMessage(message: BaseMessage, redactor: Redactor): BaseMessage {
  const source = message as unknown as Record<string, unknown>;
  const keys = new Set([...Object.keys(message.lc_kwargs), ...Object.keys(source)].filter((key) => !key.startsWith("lc_")));
  const fields: Record<string, unknown> = {};
  let changed = false;
  for (const key of keys) {
    const value = key in source ? source[key] : message.lc_kwargs[key];
    // `type` comes from the class.
    if (value === undefined || key === "type") continue;
    const scrubbed = MESSAGE_IDENTITY_FIELDS.has(key)
      ? value
      : TOOL_CALL_FIELDS.has(key) && Array.isArray(value)
        ? scrubToolCalls(value, redactor)
        : scrubValue(value, redactor);
    changed ||= scrubbed !== value;
    fields[key] = scrubbed;
  }
  return changed ? new (message.constructor as MessageClass)(fields) : message;
}

function scrubToolCalls(calls: readonly unknown[], redactor: Redactor): readonly unknown[] {
  const scrubbed = calls.map((call) => (isPlainObject(call) ? scrubToolCall(call, redactor) : scrubValue(call, redactor)));
  return scrubbed.every((call, i) => call === calls[i]) ? calls : scrubbed;
}

function scrubToolCall(call: Record<string, unknown>, redactor: Redactor): Record<string, unknown> {
  const entries = Object.entries(call).map(([key, value]): [string, unknown] => [
    key,
    TOOL_CALL_IDENTITY_FIELDS.has(key) ? value : scrubValue(value, redactor),
  ]);
  return entries.every(([key, value]) => value === call[key]) ? call : Object.fromEntries(entries);
}

function scrubSend(send: Send, redactor: Redactor): Send {
  const args: unknown = send.args;
  const scrubbed = scrubValue(args, redactor);
  return scrubbed === args ? send : new Send(send.node, scrubbed, send.timeout === undefined ? undefined : { timeout: send.timeout });
}

/** The update (every value; its keys name channels and are kept), goto (Send args; node names kept) and resume. */
function scrubCommand(command: Command, redactor: Redactor): Command {
  const update = scrubUpdate(command.update, redactor);
  const goto = scrubValue(command.goto, redactor);
  const resume: unknown = scrubValue(command.resume as unknown, redactor);
  if (update === command.update && goto === command.goto && resume === command.resume) return command;
  return new Command({
    ...(update !== undefined ? { update } : {}),
    ...(goto !== undefined ? { goto } : {}),
    ...(resume !== undefined ? { resume } : {}),
    ...(command.graph !== undefined ? { graph: command.graph } : {}),
  } as CommandArgs);
}

function scrubUpdate(update: Command["update"], redactor: Redactor): Command["update"] {
  if (Array.isArray(update) && update.every(isUpdatePair)) {
    const pairs = update.map(([key, value]): [string, unknown] => {
      const scrubbed = scrubValue(value, redactor);
      return scrubbed === value ? [key, value] : [key, scrubbed];
    });
    return pairs.every(([, value], i) => value === update[i][1]) ? update : pairs;
  }
  if (isPlainObject(update)) {
    const entries = Object.entries(update).map(([key, value]): [string, unknown] => [key, scrubValue(value, redactor)]);
    return entries.every(([key, value]) => value === update[key]) ? update : Object.fromEntries(entries);
  }
  return scrubValue(update, redactor);
}

function isUpdatePair(item: unknown): item is [string, unknown] {
  return Array.isArray(item) && item.length === 2 && typeof item[0] === "string";
}

/**
 * A result whose text blocks hold a secret between them (the server cut it: "sk-live-9f8e" + "7d6c5b4a", or its base64
 * over two blocks), which the ToolMessage shows joined: the blocks are read as one text, and each secret that crosses
 * a boundary is blanked where it lies (REDACTED in the block it starts in, nothing in the others it covers); a block's
 * own text around it is kept. Each block alone was scrubbed already (a multi-line secret cut at its line breaks is
 * scrubbed line by line). Overlapping secrets (a short one inside a long one) are blanked as one.
 */
export function scrubAcrossTextBlocks(result: CallToolResult, redactor: Redactor): CallToolResult {
  const items = Array.isArray(result.content) ? result.content : [];
  // Every block the ToolMessage shows as text: text blocks and embedded text resources.
  const textAt: number[] = [];
  items.forEach((item, i) => textOf(item) !== undefined && textAt.push(i));
  if (textAt.length < 2) return result;
  const texts = textAt.map((i) => textOf(items[i])!);
  const starts: number[] = [];
  let length = 0;
  for (const text of texts) {
    starts.push(length);
    length += text.length;
  }
  // The last block starting at or before `position`, found by halves; and each block reads only the spans that reach
  // it. A walk from the first block for each span, and every span read for each block, were quadratic in a result of
  // many blocks (40,000, each holding a secret's end and the next one's start, held the event loop ~50 s).
  const blockAt = (position: number) => {
    let low = 0;
    let high = texts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (starts[mid] <= position) low = mid;
      else high = mid - 1;
    }
    return low;
  };
  // Merged spans: in order and none overlapping, so their ends are in order too.
  const crossing = redactor.spans(texts.join("")).filter(([from, to]) => blockAt(from) !== blockAt(to - 1));
  if (crossing.length === 0) return result;
  const content = [...items];
  let first = 0;
  texts.forEach((text, k) => {
    const begin = starts[k];
    const end = begin + text.length;
    let kept = "";
    let copied = 0;
    while (first < crossing.length && crossing[first][1] <= begin) first += 1;
    for (let i = first; i < crossing.length && crossing[i][0] < end; i += 1) {
      const [from, to] = crossing[i];
      kept += text.slice(copied, Math.max(0, from - begin)) + (from >= begin ? REDACTED : "");
      copied = Math.min(text.length, to - begin);
    }
    if (copied === 0 && kept === "") return;
    content[textAt[k]] = withText(items[textAt[k]], kept + text.slice(copied));
  });
  return { ...result, content };
}

type ContentBlock = CallToolResult["content"][number];

function textOf(item: ContentBlock): string | undefined {
  if (item.type === "text") return item.text;
  if (item.type === "resource" && "text" in item.resource && typeof item.resource.text === "string") return item.resource.text;
  return undefined;
}

function withText(item: ContentBlock, text: string): ContentBlock {
  if (item.type === "resource") return { ...item, resource: { ...item.resource, text } } as ContentBlock;
  return { ...item, text } as ContentBlock;
}
