import type { ContentBlock } from "@langchain/core/messages";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { isPlainObject } from "../shared/plain-object";
import { boundText, sliceWhole } from "../shared/text";

/** Bound on the text of an `isError` result that reaches the model. */
export const MAX_ERROR_TEXT_CHARS = 4000;

/**
 * Default bound on a result that reaches a ToolMessage (and so the model's context and the checkpoint):
 * 256 Ki characters of content, and the same for the JSON of `structuredContent` / `_meta` in the artifact.
 */
export const DEFAULT_MAX_RESULT_CHARS = 262_144;

export interface McpToolArtifact {
  structuredContent?: Record<string, unknown>;
  meta?: Record<string, unknown>;
  /** Set when `structuredContent` or `_meta` was left out for its size. */
  note?: string;
  /** stdio: files the call created or modified in the thread workspace, as `/mnt/user-data/…` paths. */
  workspace_changes?: string[];
}

export interface ConvertedResult {
  content: string | ContentBlock.Standard[];
  artifact: McpToolArtifact | undefined;
  isError: boolean;
}

type McpContent = CallToolResult["content"][number];

function isImageMime(mime: string | undefined): boolean {
  return typeof mime === "string" && mime.toLowerCase().startsWith("image/");
}

function convertItem(item: McpContent): ContentBlock.Standard {
  switch (item.type) {
    case "text":
      return { type: "text", text: item.text };
    case "image":
      return { type: "image", mimeType: item.mimeType, data: item.data };
    case "audio":
      return { type: "audio", mimeType: item.mimeType, data: item.data };
    case "resource_link":
      return isImageMime(item.mimeType)
        ? { type: "image", url: item.uri, ...(item.mimeType ? { mimeType: item.mimeType } : {}) }
        : { type: "file", url: item.uri, ...(item.mimeType ? { mimeType: item.mimeType } : {}) };
    case "resource": {
      const resource = item.resource;
      if ("text" in resource && typeof resource.text === "string") return { type: "text", text: resource.text };
      const blob = (resource as { blob?: string }).blob ?? "";
      const mimeType = resource.mimeType ?? "application/octet-stream";
      return isImageMime(mimeType) ? { type: "image", mimeType, data: blob } : { type: "file", mimeType, data: blob };
    }
    default:
      return { type: "text", text: JSON.stringify(item) };
  }
}

/**
 * MCP result → ToolMessage parts. All-text results become one string (the most portable form for chat
 * models); anything else becomes standard content blocks. `structuredContent` (an object; anything else the
 * SDK would have refused is shown as text) and `_meta` ride along as the artifact. An `isError` result
 * keeps only the server's text (text blocks and embedded text resources), else the JSON of its
 * `structuredContent`; `boundConvertedResult` bounds it.
 */
export function convertCallToolResult(result: CallToolResult): ConvertedResult {
  const items = Array.isArray(result.content) ? result.content : [];
  const artifact: McpToolArtifact = {};
  const structured: unknown = result.structuredContent;
  if (isPlainObject(structured)) artifact.structuredContent = structured as Record<string, unknown>;
  if (result._meta && typeof result._meta === "object") artifact.meta = result._meta as Record<string, unknown>;
  const hasArtifact = artifact.structuredContent !== undefined || artifact.meta !== undefined;
  // Shown when the content has no text: the structured result, or a value that is not one (an interceptor's).
  const structuredText = structured === undefined || structured === null ? "" : jsonText(structured);

  if (result.isError === true) {
    const text = items
      .map(convertItem)
      .filter((b): b is ContentBlock.Text => b.type === "text")
      .map((b) => b.text)
      .join("\n");
    return {
      content: text || structuredText || "The MCP tool reported an error without a message.",
      artifact: hasArtifact ? artifact : undefined,
      isError: true,
    };
  }

  const blocks = items.map(convertItem);
  let content: ConvertedResult["content"];
  if (blocks.every((b) => b.type === "text")) {
    content = blocks.map((b) => (b as ContentBlock.Text).text).join("\n");
    if (content === "") content = structuredText;
  } else {
    content = blocks;
  }
  return { content, artifact: hasArtifact ? artifact : undefined, isError: false };
}

/** JSON of a value, or a short description when it has none (a BigInt, a cycle). */
function jsonText(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return `[${typeof value} that cannot be shown as JSON]`;
  }
}

/**
 * Characters a block weighs against the bound: its strings (text, inline data, URL, MIME type, …; not its type) and
 * one for the block itself, so that neither a long MIME type nor a flood of empty blocks escapes the bound.
 */
function blockChars(block: ContentBlock.Standard): number {
  let chars = 1;
  for (const [key, value] of Object.entries(block)) if (key !== "type" && typeof value === "string") chars += value.length;
  return chars;
}

function cutNote(total: number, kept: number, max: number): string {
  return `[result truncated: showing ${kept} of ${total} characters (limit ${max}); the full result was not kept]`;
}

/**
 * `converted` bounded to `maxChars`: larger content becomes a preview (text cut, blocks that no longer fit
 * left out) ending in a note that says how much was cut and that the rest was not kept. `structuredContent`
 * and `_meta` stay in the artifact only when their JSON fits the same bound, and `workspace_changes` keeps the
 * paths that fit it; the artifact's note says what was left out.
 */
export function boundConvertedResult(converted: ConvertedResult, maxChars: number): ConvertedResult {
  // An error's text is cut once, at the smaller bound, so its note counts what the server sent.
  const content =
    converted.isError && typeof converted.content === "string"
      ? boundText(converted.content, Math.min(MAX_ERROR_TEXT_CHARS, maxChars))
      : boundContent(converted.content, maxChars);
  const artifact = converted.artifact && boundArtifact(converted.artifact, maxChars);
  if (content === converted.content && artifact === converted.artifact) return converted;
  return { ...converted, content, artifact };
}

function boundContent(content: ConvertedResult["content"], max: number): ConvertedResult["content"] {
  if (typeof content === "string") {
    if (content.length <= max) return content;
    const kept = sliceWhole(content, max);
    return `${kept}\n… ${cutNote(content.length, kept.length, max)}`;
  }
  const total = content.reduce((sum, block) => sum + blockChars(block), 0);
  if (total <= max) return content;
  const kept: ContentBlock.Standard[] = [];
  let used = 0;
  for (const block of content) {
    const size = blockChars(block);
    if (used + size <= max) {
      kept.push(block);
      used += size;
    } else if (block.type === "text" && used + 1 < max) {
      const text = sliceWhole((block as ContentBlock.Text).text, max - used - 1);
      kept.push({ type: "text", text });
      used += text.length + 1;
    }
  }
  kept.push({ type: "text", text: cutNote(total, used, max) });
  return kept;
}

function boundArtifact(artifact: McpToolArtifact, max: number): McpToolArtifact {
  const omitted: string[] = [];
  const unserializable: string[] = [];
  const bounded: McpToolArtifact = { ...artifact };
  for (const [key, label] of [
    ["structuredContent", "structuredContent"],
    ["meta", "_meta"],
  ] as const) {
    const value = artifact[key];
    if (value === undefined) continue;
    let size: number;
    try {
      size = JSON.stringify(value)?.length ?? 0;
    } catch {
      // A value an interceptor returned that has no JSON (a BigInt, a cycle): it could not be checkpointed either.
      delete bounded[key];
      unserializable.push(label);
      continue;
    }
    if (size > max) {
      delete bounded[key];
      omitted.push(`${label} (${size} characters of JSON)`);
    }
  }
  const notes: string[] = [];
  if (omitted.length > 0) notes.push(`${omitted.join(" and ")} left out: larger than the limit of ${max} characters; not kept`);
  if (unserializable.length > 0) notes.push(`${unserializable.join(" and ")} left out: not JSON-serializable; not kept`);
  const changes = artifact.workspace_changes ?? [];
  const listed = leadingThatFit(changes, max);
  if (listed.length < changes.length) {
    bounded.workspace_changes = listed;
    notes.push(
      `workspace_changes lists ${listed.length} of ${changes.length} changed files: the list is limited to ${max} characters of JSON`,
    );
  }
  if (notes.length === 0) return artifact;
  bounded.note = notes.join("; ");
  return bounded;
}

/** The first items of `list` whose JSON array is at most `max` characters long. */
function leadingThatFit(list: readonly string[], max: number): string[] {
  let used = 2; // the brackets
  let count = 0;
  for (const item of list) {
    used += JSON.stringify(item).length + (count === 0 ? 0 : 1);
    if (used > max) break;
    count += 1;
  }
  return list.slice(0, count);
}
