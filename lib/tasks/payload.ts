/**
 * Payload bounds applied before a snapshot is persisted (inventory §M 101): the error is cut, the
 * `input_required` and `result_artifact` payloads must be valid JSON within their byte limits (else a
 * permanent protocol failure, never truncation), and an oversized result is kept only as a bounded preview.
 */
import {
  MCP_TASK_ERROR_MAX_CHARS,
  MCP_TASK_INPUT_REQUIRED_MAX_BYTES,
  MCP_TASK_RESULT_ARTIFACT_MAX_BYTES,
  McpTaskProtocolError,
  TaskSnapshot,
} from "./model";
import { isPlainObject } from "../shared/plain-object";

export interface PayloadBounds {
  /** `mcpTasks.max_result_bytes`. */
  maxResultBytes: number;
  /** `mcpTasks.result_preview_max_chars`. */
  resultPreviewMaxChars: number;
}

/** Compact JSON of a value that must be plain JSON; throws naming what is wrong, never the value. */
export function encodeStrictJson(value: unknown): string {
  const seen = new Set<object>();
  const check = (item: unknown): void => {
    if (item === null || typeof item === "string" || typeof item === "boolean") return;
    if (typeof item === "number") {
      if (!Number.isFinite(item)) throw new TypeError("it contains a non-finite number");
      return;
    }
    if (typeof item !== "object") throw new TypeError(`it contains a value of type ${typeof item}`);
    if (seen.has(item)) throw new TypeError("it contains a circular reference");
    seen.add(item);
    if (Array.isArray(item)) item.forEach(check);
    else {
      if (!isPlainObject(item)) throw new TypeError("it contains a non-plain object");
      for (const key of Object.keys(item)) check((item as Record<string, unknown>)[key]);
    }
    seen.delete(item);
  };
  check(value);
  return JSON.stringify(value);
}

function encodeField(field: string, value: unknown): string {
  try {
    return encodeStrictJson(value);
  } catch (err) {
    throw new McpTaskProtocolError(`MCP task ${field} is not valid JSON: ${(err as Error).message}`);
  }
}

function boundedPayload(field: string, value: unknown, maxBytes: number): void {
  if (value === null || value === undefined) return;
  if (Buffer.byteLength(encodeField(field, value), "utf8") > maxBytes) {
    throw new McpTaskProtocolError(`MCP task ${field} payload exceeds the ${maxBytes}-byte limit`);
  }
}

/** The first `max` code points of `text` (never half of a surrogate pair). */
export function cutCodePoints(text: string, max: number): string {
  if (text.length <= max) return text;
  let out = "";
  let count = 0;
  for (const ch of text) {
    if (count === max) break;
    out += ch;
    count += 1;
  }
  return out;
}

/**
 * The bounds a snapshot fails for good by (`McpTaskProtocolError`), whatever the settings: a driver checks them too.
 * Returns the result's JSON (null without a result).
 */
export function checkPayloadBounds(snapshot: TaskSnapshot): string | null {
  boundedPayload("result_artifact", snapshot.result_artifact, MCP_TASK_RESULT_ARTIFACT_MAX_BYTES);
  boundedPayload("input_required", snapshot.input_required, MCP_TASK_INPUT_REQUIRED_MAX_BYTES);
  return snapshot.result === null ? null : encodeField("result", snapshot.result);
}

export function normalizeSnapshot(snapshot: TaskSnapshot, bounds: PayloadBounds): TaskSnapshot {
  const encoded = checkPayloadBounds(snapshot);
  const error = snapshot.error === null ? null : cutCodePoints(snapshot.error, MCP_TASK_ERROR_MAX_CHARS);
  let { result, result_preview, result_truncated } = snapshot;
  if (encoded !== null) {
    if (Buffer.byteLength(encoded, "utf8") > bounds.maxResultBytes) {
      result_preview = cutCodePoints(typeof result === "string" ? result : encoded, bounds.resultPreviewMaxChars);
      result = null;
      result_truncated = true;
    }
  }
  return snapshot.with({ result, result_preview, result_truncated, error });
}
