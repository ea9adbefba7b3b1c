import type { ContentBlock } from "@langchain/core/messages";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { boundText } from "../shared/text";

/** Bound on the text of an `isError` result that reaches the model. */
export const MAX_ERROR_TEXT_CHARS = 4000;

export interface McpToolArtifact {
  structuredContent?: Record<string, unknown>;
  meta?: Record<string, unknown>;
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
 * models); anything else becomes standard content blocks. `structuredContent` and `_meta` ride along as
 * the artifact. An `isError` result keeps only the server's text, bounded.
 */
export function convertCallToolResult(result: CallToolResult): ConvertedResult {
  const items = Array.isArray(result.content) ? result.content : [];
  const artifact: McpToolArtifact = {};
  if (result.structuredContent && typeof result.structuredContent === "object") {
    artifact.structuredContent = result.structuredContent as Record<string, unknown>;
  }
  if (result._meta && typeof result._meta === "object") artifact.meta = result._meta as Record<string, unknown>;
  const hasArtifact = artifact.structuredContent !== undefined || artifact.meta !== undefined;

  if (result.isError === true) {
    const text = items
      .filter((i): i is Extract<McpContent, { type: "text" }> => i.type === "text")
      .map((i) => i.text)
      .join("\n");
    return {
      content: boundText(text || "The MCP tool reported an error without a message.", MAX_ERROR_TEXT_CHARS),
      artifact: hasArtifact ? artifact : undefined,
      isError: true,
    };
  }

  const blocks = items.map(convertItem);
  let content: ConvertedResult["content"];
  if (blocks.every((b) => b.type === "text")) {
    content = blocks.map((b) => (b as ContentBlock.Text).text).join("\n");
    if (content === "" && artifact.structuredContent) content = JSON.stringify(artifact.structuredContent);
  } else {
    content = blocks;
  }
  return { content, artifact: hasArtifact ? artifact : undefined, isError: false };
}
