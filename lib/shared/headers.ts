import { McpToolCallError, ownText } from "./errors";

/** Where a header came from; named in every error about it. */
export type HeaderLayer = "static" | "oauth" | "user_auth" | "headers_from_context" | "interceptor";

const LAYER_LABELS: Record<HeaderLayer, string> = {
  static: "static headers",
  oauth: "OAuth",
  user_auth: "user_auth",
  headers_from_context: "headers_from_context",
  interceptor: "an interceptor",
};

export type HeaderMap = Readonly<Record<string, string>>;

/** The one empty header set: frozen, so per-object memos (validation, session keys) keep hitting. */
export const EMPTY_HEADERS: HeaderMap = Object.freeze({});

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Headers the MCP transport sets itself; letting a credential layer replace them would break the session. */
const TRANSPORT_OWNED = new Set(["mcp-session-id", "mcp-protocol-version", "content-length", "transfer-encoding", "host", "connection"]);

/** Why `name` cannot be sent as a header name, or `null`. */
export function headerNameProblem(name: string): string | null {
  if (!HEADER_NAME.test(name)) return "is not a valid HTTP header name";
  if (TRANSPORT_OWNED.has(name.toLowerCase())) return "is managed by the MCP transport and cannot be set";
  return null;
}

/**
 * Why `value` cannot be sent as a header value, or `null`. Describes the character class, never the value:
 * transports (undici's `Headers`) put the whole value into their own error text.
 */
export function headerValueProblem(value: string): string | null {
  // A JavaScript interceptor's number or array: fetch would send its text, stdio its JSON; neither is a value checked here.
  if (typeof value !== "string") return "is not a string";
  for (let i = 0; i < value.length; i += 1) {
    const code = value.charCodeAt(i);
    if (code === 0x0d || code === 0x0a) return "contains a line break (CR or LF)";
    if (code === 0x00) return "contains a NUL character";
    if (code < 0x20 || code === 0x7f) return "contains a control character";
    if (code > 0x7e) return "contains a non-ASCII character";
  }
  if (value.length > 0 && (value[0] === " " || value[value.length - 1] === " ")) {
    return "has leading or trailing whitespace";
  }
  return null;
}

/** A credential failure: its message names the server, header, layer or missing key, never a value. */
export class CredentialError extends McpToolCallError {}

export function invalidHeaderMessage(serverName: string, name: string, layer: HeaderLayer, problem: string): string {
  return `MCP server '${serverName}': header '${shownHeaderName(name)}' from ${LAYER_LABELS[layer]} ${problem}; the value is not shown`;
}

const SHOWN_HEADER_NAME_CHARS = 64;
const HEADER_NAME_PREFIX = /^[!#$%&'*+.^_`|~0-9A-Za-z-]*/;

/**
 * A header name as an error may show it: an invalid name only up to its first invalid character, since a
 * mistyped `"Authorization: Bearer sk-…"` key holds its value after that; any name at most 64 characters.
 */
export function shownHeaderName(name: string): string {
  const prefix = HEADER_NAME_PREFIX.exec(name)?.[0] ?? "";
  const shown = prefix.slice(0, SHOWN_HEADER_NAME_CHARS);
  return shown.length < name.length ? `${shown}…` : shown;
}

/** Throws a `CredentialError` naming server, header and layer when the pair cannot be sent. */
export function assertSendableHeader(serverName: string, name: string, value: string, layer: HeaderLayer): void {
  const problem = headerNameProblem(name) ?? headerValueProblem(value);
  if (problem !== null) throw ownText(new CredentialError(invalidHeaderMessage(serverName, name, layer, problem)));
}

/**
 * `base` with `overrides` applied case-insensitively: an override replaces an existing key of any case and
 * keeps the spelling already in use, so two spellings of one header never reach the transport.
 */
export function mergeHeaders(base: HeaderMap, overrides: HeaderMap): HeaderMap {
  const merged: Record<string, string> = { ...base };
  const spelling = new Map(Object.keys(merged).map((key) => [key.toLowerCase(), key]));
  for (const [key, value] of Object.entries(overrides)) {
    const lower = key.toLowerCase();
    const existing = spelling.get(lower);
    if (existing === undefined) spelling.set(lower, key);
    merged[existing ?? key] = value;
  }
  return Object.freeze(merged);
}

/**
 * Collapses keys that differ only in case (an interceptor spreading `{...request.headers, authorization}`):
 * the later value wins under the first spelling. Returns `headers` itself when nothing collides.
 */
export function collapseHeaderCase(headers: HeaderMap): HeaderMap {
  const seen = new Set<string>();
  for (const key of Object.keys(headers)) {
    const lower = key.toLowerCase();
    if (seen.has(lower)) return mergeHeaders({}, headers);
    seen.add(lower);
  }
  return headers;
}

/**
 * Header sets remembered in the whole process, across every layer, server, toolkit and generation, the least
 * recently used first out. One total: with a memo per base set, each user's merged `user_auth` headers would be
 * the base of its own `headers_from_context` memo, and per-run tokens would fill one per user.
 */
const MERGED_HEADERS_LIMIT = 1024;

/** The remembered sets by (memo, base set, values); a key spells the values, so an evicted set's values go with it. */
const remembered = new Map<string, HeaderMap>();
/** A number per base set, so a key names the set without holding it: a base nothing else holds can be collected. */
const baseIds = new WeakMap<HeaderMap, number>();
let nextBaseId = 0;
let nextMemoId = 0;

/** How many header sets the process remembers (a diagnostic: never more than `MERGED_HEADERS_LIMIT`). */
export function mergedHeaderSets(): number {
  return remembered.size;
}

/**
 * The merged headers of recent (base headers, values) pairs, so one user's calls carry the very same header
 * object: the session pool, the sendability check and the redactor memoize by its identity. `values` must spell
 * each distinct set of added values differently. All instances share one bounded memo.
 */
export class MergedHeaders {
  private readonly id = nextMemoId++;

  get(base: HeaderMap, values: string, merge: () => HeaderMap): HeaderMap {
    let baseId = baseIds.get(base);
    if (baseId === undefined) {
      baseId = nextBaseId++;
      baseIds.set(base, baseId);
    }
    const key = `${this.id}\u0000${baseId}\u0000${values}`;
    let headers = remembered.get(key);
    if (headers === undefined) {
      headers = merge();
      if (remembered.size >= MERGED_HEADERS_LIMIT) remembered.delete(remembered.keys().next().value as string);
    } else {
      remembered.delete(key);
    }
    remembered.set(key, headers);
    return headers;
  }
}
