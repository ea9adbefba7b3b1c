import { lstat, realpath, stat } from "node:fs/promises";
import * as nodePath from "node:path";
import { fileURLToPath } from "node:url";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { isPlainObject, setOwn } from "../shared/plain-object";
import { firstNames } from "./folder-names";
import { VIRTUAL_USER_DATA } from "./workspace";

/** What a stdio result's file references are resolved against. */
export interface PathContext {
  /** The thread's `user-data` folder: only files inside it are rewritten. */
  readonly userData: string;
  /** `userDataRoot(userData)` when the caller already resolved it (`undefined`: not yet). */
  readonly root?: string | null;
  /** The child's cwd: relative references resolve against it. */
  readonly cwd: string;
  /** Files the call created or modified (absolute); a bare file name is rewritten only when it names exactly one. */
  readonly changed: readonly string[];
  /**
   * The call's redaction. The result was scrubbed before its paths are translated, but a file's name comes from the
   * disk: a listed change is scrubbed, and a reference whose file path would need scrubbing is left as it is.
   */
  readonly scrub: (text: string) => string;
}

/** A character of a word (Unicode letters, digits and marks, as Python's `\w`), in a `u` regexp. */
const WORD = String.raw`\p{L}\p{N}\p{M}_`;
/**
 * Absolute, `file://`, `file:/`, `./`, `../` and `dir/…` references in free text (conservative: no spaces or quotes). A
 * `dir/…` reference starts where its run of name characters starts: within a run the pattern would be tried from
 * every position (quadratic in a long word), and `é/x` would match as `/x`; nor does it start right after a character
 * that glues names together (`my+sub/x` is not `sub/x`). Searched in a token holding no separator, where a reference
 * runs from where it starts to the token's end: the pattern finds only that start (and one character after its `/`).
 */
const PATH_START = new RegExp(
  String.raw`(?:(?<![${WORD}+.-])[Ff][Ii][Ll][Ee]:(?:\/\/(?:localhost)?)?)?\/[^\s'"<>|*?]|(?:\.{0,2}\/|(?<![${WORD}.+@~%#$&!-])[${WORD}.-]+\/)[^\s'"<>|*?]`,
  "u",
);
/**
 * A reference never spans a separator, so text is cut into separator-free tokens first, by a plain loop, and only
 * a token that holds a `/` and is no longer than a path can be is searched: the pattern alone backtracks
 * quadratically over a long run of word characters, and even a simple token regex overflows V8's regexp stack on a
 * multi-megabyte token (a 12 MiB result of digits).
 */
const MAX_TOKEN_CHARS = 4096;
const ASCII_SEPARATORS = new Uint8Array(128);
for (const c of " \t\n\r\v\f'\"<>|*?") ASCII_SEPARATORS[c.charCodeAt(0)] = 1;

function isSeparator(code: number): boolean {
  return code < 128 ? ASCII_SEPARATORS[code] === 1 : /\s/.test(String.fromCharCode(code));
}

const SLASH = 0x2f;

/** Characters a URL cannot hold unescaped that end one: `"https://a/b","/x"` is a URL, then a path of its own. */
const URL_END = new Uint8Array(128);
for (const c of "'\"<>|") URL_END[c.charCodeAt(0)] = 1;

function endsUrl(code: number): boolean {
  return code === -1 || (code < 128 && URL_END[code] === 1) || isWhitespace(code);
}

/**
 * Calls `visit(start, end)` for each maximal run of non-separator characters that holds a `/` and may be a path. Not in
 * a URL: from a `scheme://` on (other than `file://`), up to the next whitespace or quote (`'"<>|`), nothing is visited,
 * so the path in `https://host/?p=/x` (its query split off at `?`) stays part of its URL; `onUrl(start, end)` hears
 * each such span (from its `:`).
 */
function forEachPathToken(text: string, visit: (start: number, end: number) => void, onUrl?: (start: number, end: number) => void): void {
  let start = -1;
  let slash = false;
  let urlStart = -1;
  for (let i = 0; i <= text.length; i += 1) {
    const code = i === text.length ? -1 : text.charCodeAt(i);
    if (code === COLON && urlStart < 0 && text.startsWith("//", i + 1) && !isFileScheme(text, i)) {
      urlStart = i;
      // What the token held before the scheme (`/x/r.csv,https://…`) is text of its own.
      const scheme = schemeStart(text, start < 0 ? i : start, i);
      if (start >= 0 && slash && scheme > start && scheme - start <= MAX_TOKEN_CHARS) visit(start, scheme);
    }
    if (code === -1 || isSeparator(code)) {
      if (start >= 0 && slash && urlStart < 0 && i - start <= MAX_TOKEN_CHARS) visit(start, i);
      start = -1;
      slash = false;
      if (urlStart >= 0 && endsUrl(code)) {
        onUrl?.(urlStart, i);
        urlStart = -1;
      }
    } else {
      if (start < 0) start = i;
      if (code === SLASH) slash = true;
    }
  }
}

const COLON = 0x3a;

/** Where the scheme ending at the `:` at `colon` starts (not before `from`). */
function schemeStart(text: string, from: number, colon: number): number {
  let at = colon;
  while (at > from && /[A-Za-z0-9+.-]/.test(text[at - 1])) at -= 1;
  return at;
}

/** Whether the scheme ending at the `:` at `colon` is `file`. */
function isFileScheme(text: string, colon: number): boolean {
  return colon >= 4 && text.slice(colon - 4, colon).toLowerCase() === "file" && (colon === 4 || !/[A-Za-z0-9+.-]/.test(text[colon - 5]));
}

function isWhitespace(code: number): boolean {
  return code === 32 || (code >= 9 && code <= 13) || (code >= 128 && /\s/.test(String.fromCharCode(code)));
}
/**
 * Punctuation that ends a sentence or closes a bracket or quote after a path, ASCII or not (`”`, `。`, `…`). Its run
 * is matched only from where it starts: tried from each character of a long run that does not end the text (a dotted
 * leader), `+$` was quadratic in the run, ~12 ms for each 4,000-character token of a result.
 */
const TRAILING_CHARS = String.raw`.,;:!?()[\]{}>"'\x60\p{Pe}\p{Pf}。，、；：！？…`;
const TRAILING = new RegExp(`(?<![${TRAILING_CHARS}])[${TRAILING_CHARS}]+$`, "u");
/** A compiler-style position after a path (`report.txt:12:3`): tried without it when the whole does not resolve. */
const LINE_SUFFIX = /:\d+(?::\d+)?$/;
/** What follows the backslash of a JSON escape, but an escaped backslash (in a Windows path, a segment separator). */
const JSON_ESCAPE = String.raw`[nrtbf"/]|u[0-9a-fA-F]{4}`;
/**
 * A JSON string escape a path runs into in JSON-encoded text (`report.txt\ndone`, `report.txt\"`, which a closing quote
 * leaves as `report.txt\`; an escaped backslash too): tried without it, and all after it, when the whole does not
 * resolve.
 */
const ESCAPED_TAIL = new RegExp(String.raw`\\(?:${JSON_ESCAPE}|\\|$)[^]*$`);

/**
 * The shorter forms of a reference tried when it does not resolve as it is, each a prefix of it, longest first (one with
 * JSON escapes inside it is tried decoded too: `decodedForm`).
 */
function shorterForms(reference: string): string[] {
  const forms: string[] = [];
  const unescaped = reference.replace(ESCAPED_TAIL, "");
  const ended = beforeEndingEscape(reference);
  const candidates = [unescaped, reference.replace(LINE_SUFFIX, ""), unescaped.replace(LINE_SUFFIX, "")];
  if (ended !== undefined) candidates.push(ended, ended.replace(LINE_SUFFIX, ""));
  for (const form of candidates) {
    if (form !== reference && form !== "" && !forms.includes(form)) forms.push(form);
  }
  return forms.sort((a, b) => b.length - a.length);
}

/** A JSON escape a path may hold inside it (`\uXXXX`, `\/`, `\\`), or a backslash starting any other: one that ends it. */
const PATH_OR_ENDING_ESCAPE = /\\(?:u[0-9a-fA-F]{4}|[/\\])|\\/g;

/**
 * The part of a reference with JSON escapes inside it before the escape that ends it (`caf\u00e9.txt\ndone`,
 * `\/w\/r.txt\"` as JSON-encoded text holds them); `undefined` when no escape a path may hold comes before that one
 * (`ESCAPED_TAIL` cuts those).
 */
function beforeEndingEscape(reference: string): string | undefined {
  let inside = false;
  for (const match of reference.matchAll(PATH_OR_ENDING_ESCAPE)) {
    if (match[0].length > 1) inside = true;
    else return inside ? reference.slice(0, match.index) : undefined;
  }
  return undefined;
}

/** The JSON escapes a path may hold inside it: `\uXXXX`, `\/` and `\\` (any other backslash: see `decodedForm`). */
const JSON_PATH_ESCAPE = /\\(?:u([0-9a-fA-F]{4})|([/\\])|)/g;

/**
 * A reference with JSON escapes inside it (`caf\u00e9.txt`, as Python's `json.dumps` writes a name by default, `\/`,
 * `\\`), decoded; `undefined` when it has none, or others (those end it: `shorterForms`).
 */
function decodedForm(reference: string): string | undefined {
  if (!reference.includes("\\")) return undefined;
  let other = false;
  const decoded = reference.replace(JSON_PATH_ESCAPE, (_escape, hex: string | undefined, char: string | undefined) => {
    if (hex !== undefined) return String.fromCharCode(parseInt(hex, 16));
    if (char !== undefined) return char;
    other = true;
    return "";
  });
  return other ? undefined : decoded;
}
/** At most this many distinct references are resolved per result. */
const MAX_REFERENCES = 256;

type Content = CallToolResult["content"][number];

/**
 * `items` (a result's content) with `text` applied to their texts (a text item's, an embedded text resource's) and `uri`
 * to a link's URI: the items nothing changed are kept as they are, and so is the array when none changed.
 */
function mapContentStrings(items: readonly Content[], text: (value: string) => string, uri: (value: string) => string): Content[] {
  let out: Content[] | undefined;
  items.forEach((item, i) => {
    let mapped: Content = item;
    if (item.type === "text") {
      const next = text(item.text);
      if (next !== item.text) mapped = { ...item, text: next };
    } else if (item.type === "resource_link") {
      const next = uri(item.uri);
      if (next !== item.uri) mapped = { ...item, uri: next };
    } else if (item.type === "resource" && "text" in item.resource && typeof item.resource.text === "string") {
      const next = text(item.resource.text);
      if (next !== item.resource.text) mapped = { ...item, resource: { ...item.resource, text: next } };
    }
    if (mapped !== item) (out ??= [...items])[i] = mapped;
  });
  return out ?? (items as Content[]);
}

/**
 * Rewrites the file references of a stdio result (SPEC §5.1): a `file://` resource link, or a path in text or in a
 * string of `structuredContent` or `_meta` (the artifact's `meta`), that resolves (symlinks followed) to an existing
 * file inside the thread's `user-data` becomes `/mnt/user-data/…`. Anything else (outside, a symlink escaping, a directory, missing, remote) is left
 * unchanged; nothing is copied. The top-level `structuredContent` keys in `keep` (a task's id) stay as they are, and so
 * do the `_meta` keys the protocol reserves (`protocolMetaKeys`).
 */
export async function translateResultPaths(
  result: CallToolResult,
  ctx: PathContext,
  keep: readonly string[] = [],
  references: ReadonlySet<string> = pathReferences(result, keep),
): Promise<CallToolResult> {
  const items = Array.isArray(result.content) ? result.content : [];
  if (!mayTranslatePaths(result, ctx, keep, references)) return result;
  const root = ctx.root !== undefined ? ctx.root : await userDataRoot(ctx.userData);
  if (root === null) return result;
  const virtual = new Map<string, string>();
  // A path the call itself wrote is known without the file system, and never counts against the bound.
  const changed = new Set(ctx.changed);
  const others: string[] = [];
  for (const reference of references) {
    const mapped = changed.has(reference) ? virtualOf(reference, ctx.userData) : undefined;
    if (mapped === undefined) others.push(reference);
    else if (ctx.scrub(mapped) === mapped) virtual.set(reference, mapped);
  }
  // References that name something not to be shown (a link escaping user-data): no shorter form of them is tried.
  const refused = new Set<string>();
  await Promise.all(
    (await likelyFirst(others, ctx, root)).slice(0, MAX_REFERENCES).map(async (reference) => {
      const mapped = await toVirtualPath(reference, ctx.cwd, ctx.userData, root);
      if (mapped === null) refused.add(reference);
      else if (mapped !== MISSING && ctx.scrub(mapped) === mapped) virtual.set(reference, mapped);
    }),
  );
  const bareNames = await uniqueChangedNames(ctx, freeTexts(items), root);
  if (virtual.size === 0 && bareNames.size === 0) return result;
  const pattern = bareNamePattern(bareNames);
  const rewrite = (text: string) => rewriteText(text, virtual, pattern, refused);
  // The data's strings keep their meaning as data: a path becomes the virtual one, a bare name stays a name.
  const asData = virtual.size > 0 ? (text: string) => rewriteValue(text, virtual, refused) : undefined;
  return mapResultStrings(result, { text: rewrite, uri: (uri) => virtual.get(uri) ?? uri, data: asData }, keep);
}

/** How `mapResultStrings` rewrites a result's strings (`data`: those of `structuredContent` and `_meta`; none: kept). */
export interface ResultStringMaps {
  readonly text: (value: string) => string;
  readonly uri: (value: string) => string;
  readonly data?: (value: string) => string;
}

/**
 * `result` with its strings rewritten where a ToolMessage shows them: its content (`mapContentStrings`), and the strings
 * of `structuredContent` (outside the top-level keys in `keep`) and of `_meta` (outside the keys the protocol reserves).
 * What nothing changed is kept as it is, and so is `result` when nothing changed.
 */
export function mapResultStrings(result: CallToolResult, maps: ResultStringMaps, keep: readonly string[] = []): CallToolResult {
  const items = Array.isArray(result.content) ? result.content : [];
  const content = mapContentStrings(items, maps.text, maps.uri);
  const { data } = maps;
  const structured = data && isPlainObject(result.structuredContent) ? mapStrings(result.structuredContent, data, keep) : result.structuredContent;
  const meta = data && isPlainObject(result._meta) ? mapStrings(result._meta, data, protocolMetaKeys(result._meta)) : result._meta;
  if (content === items && structured === result.structuredContent && meta === result._meta) return result;
  return {
    ...result,
    content,
    ...(structured === result.structuredContent ? {} : { structuredContent: structured as Record<string, unknown> }),
    ...(meta === result._meta ? {} : { _meta: meta as Record<string, unknown> }),
  };
}

/**
 * The real path of a thread's `user-data` folder (`<data dir>/threads/<thread>/user-data`); `null` when it is missing,
 * or when it or the thread's folder is a symbolic link: a tool of the thread can plant one while it runs, and another
 * folder (another thread's) would then pass for the thread's own. Links above the threads folder (where the operator
 * put the data dir) are followed.
 */
export async function userDataRoot(userData: string): Promise<string | null> {
  const thread = nodePath.dirname(userData);
  const [root, threads] = await Promise.all([realpath(userData).catch(() => null), realpath(nodePath.dirname(thread)).catch(() => null)]);
  if (root === null || threads === null) return null;
  return root === nodePath.join(threads, nodePath.basename(thread), nodePath.basename(userData)) ? root : null;
}

/**
 * The references, those most likely to be a file of the thread first, so that the bound on how many are resolved is
 * not spent on words that only look like paths (dates, fractions): `file://` links and absolute paths into the
 * user-data folder or the child's cwd, then relative ones whose first segment is an entry of the cwd, then the rest.
 */
async function likelyFirst(references: readonly string[], ctx: PathContext, root: string): Promise<readonly string[]> {
  if (references.length <= MAX_REFERENCES) return references;
  const prefixes = [ctx.userData, root, ctx.cwd].map((dir) => dir + nodePath.sep);
  const firstOf = (reference: string): string => reference.replace(/^\.\//, "").split("/", 1)[0];
  const relative = references.filter((reference) => !isFileUrl(reference) && !nodePath.isAbsolute(reference));
  const entries = await entriesAmong(ctx.cwd, new Set(relative.map(firstOf)));
  const rank = (reference: string): number => {
    if (isFileUrl(reference)) return 0;
    if (nodePath.isAbsolute(reference)) return prefixes.some((prefix) => reference.startsWith(prefix)) ? 0 : 2;
    const first = firstOf(reference);
    return first === ".." || entries.has(first) ? 1 : 2;
  };
  return references.map((reference) => ({ reference, rank: rank(reference) })).sort((a, b) => a.rank - b.rank).map((r) => r.reference);
}

/** Entries of a cwd read at most to rank references; the names asked for are looked up, up to as many, past that. */
export const MAX_RANKING_ENTRIES = 1024;

/**
 * Which of `names` are entries of `dir`: read from its listing, unless it holds more than `MAX_RANKING_ENTRIES` (a
 * workspace of 200,000 files is not listed whole, which blocks the event loop for a tenth of a second per call):
 * then the first `MAX_RANKING_ENTRIES` of `names` are each looked up.
 */
async function entriesAmong(dir: string, names: ReadonlySet<string>): Promise<ReadonlySet<string>> {
  const listed = await firstNames(dir, MAX_RANKING_ENTRIES + 1).catch(() => []); // no cwd: no entries
  if (listed.length <= MAX_RANKING_ENTRIES) return new Set(listed);
  const asked = [...names].slice(0, MAX_RANKING_ENTRIES);
  const present = await Promise.all(asked.map((name) => lstat(nodePath.join(dir, name)).then(() => true, () => false)));
  return new Set(asked.filter((_, i) => present[i]));
}

/**
 * Whether `translateResultPaths` could change anything: the result names a link or a path-like word, or the call
 * changed files. Synchronous, so the usual result skips the file system and a promise.
 */
export function mayTranslatePaths(
  result: CallToolResult,
  ctx: PathContext,
  keep: readonly string[] = [],
  references: ReadonlySet<string> = pathReferences(result, keep),
): boolean {
  return ctx.changed.length > 0 || references.size > 0;
}

/**
 * The link URIs and path-like words of a result: its text, links, embedded text resources and the strings of its
 * `structuredContent` (outside the top-level keys in `keep`) and `_meta`, the parts that reach a ToolMessage.
 */
export function pathReferences(result: CallToolResult, keep: readonly string[] = []): Set<string> {
  const references = new Set<string>();
  const items = Array.isArray(result.content) ? result.content : [];
  for (const item of items) {
    if (item.type === "text") collectReferences(item.text, references);
    else if (item.type === "resource_link") references.add(item.uri);
    else if (item.type === "resource" && "text" in item.resource && typeof item.resource.text === "string") {
      collectReferences(item.resource.text, references);
    }
  }
  const collectData = (text: string) => {
    // Every reference holds a `/`: a long value without one (a large `_meta`) is not tokenized.
    if (!text.includes("/")) return text;
    collectReferences(text, references);
    const whole = wholeReference(text);
    if (whole !== undefined) references.add(whole);
    return text;
  };
  if (isPlainObject(result.structuredContent)) mapStrings(result.structuredContent, collectData, keep);
  // `_meta` rides in the ToolMessage artifact (and so the checkpoint): its strings are data, as structuredContent's.
  if (isPlainObject(result._meta)) mapStrings(result._meta, collectData, protocolMetaKeys(result._meta));
  return references;
}

/**
 * The top-level `_meta` keys the protocol reserves (`io.modelcontextprotocol/related-task`): ids and fields a client or
 * a task driver reads back as the server sent them, like a task's `structuredContent` protocol fields. Reserved is a
 * prefix whose second label is `modelcontextprotocol` or `mcp` (2025-11-25: `dev.mcp/`, `com.mcp.tools/`), or has one
 * such label before its last (2025-06-18: `mcp.dev/`); a server's own `com.example.mcp/` or `mcp/` is its data.
 */
export function protocolMetaKeys(meta: Record<string, unknown>): readonly string[] {
  let keys: string[] | undefined;
  for (const key of Object.keys(meta)) {
    const slash = key.indexOf("/");
    if (slash <= 0) continue;
    const labels = key.slice(0, slash).split(".");
    if (labels.some((label, i) => (i === 1 || i < labels.length - 1) && (label === "modelcontextprotocol" || label === "mcp"))) (keys ??= []).push(key);
  }
  return keys ?? NO_KEYS;
}

const NO_KEYS: readonly string[] = [];

/**
 * `value` (JSON data) with `rewrite` applied to each string in it, at any depth (arrays and objects below `maxDepth`
 * levels are left as they are), but under the top-level keys in `keep`; keys are kept. Only what changed is rebuilt:
 * an untouched object or array is returned as it is.
 */
export function mapStrings(value: unknown, rewrite: (text: string) => string, keep: readonly string[] = [], maxDepth = Infinity): unknown {
  if (typeof value === "string") return rewrite(value);
  if (maxDepth <= 0) return value;
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    value.forEach((item: unknown, i) => {
      const mapped = mapStrings(item, rewrite, [], maxDepth - 1);
      if (mapped !== item) (out ??= [...value])[i] = mapped;
    });
    return out ?? value;
  }
  if (!isPlainObject(value)) return value;
  let out: Record<string, unknown> | undefined;
  for (const [key, item] of Object.entries(value)) {
    if (keep.includes(key)) continue;
    const mapped = mapStrings(item, rewrite, [], maxDepth - 1);
    if (mapped === item) continue;
    if (out === undefined) {
      out = Object.create(Object.getPrototypeOf(value) as object | null) as Record<string, unknown>;
      for (const [k, v] of Object.entries(value)) setOwn(out, k, v);
    }
    setOwn(out, key, mapped);
  }
  return out ?? value;
}

/** A part of a reference (see `joinedParts`) with its offset in the reference. */
type Part = readonly [text: string, offset: number];

/**
 * Each reference in a path token (one holding no separator), without trailing punctuation, with its offset in the token
 * (and its parts). The first runs to the token's end; after a markdown link's `](` in it, the rest is read again as a
 * token of its own. In a loop, from where each starts: matching the rest whole again at each link, in a callback per
 * link, was quadratic in a chain of links (`/](/](…`).
 */
function forEachMatch(token: string, visit: (reference: string, at: number, parts: readonly Part[] | undefined) => void): void {
  let rest = token;
  let offset = 0;
  for (let match = PATH_START.exec(rest); match !== null; match = PATH_START.exec(rest)) {
    const at = match.index;
    // A path after `file:` at the end of another word (`myfile:/…`) is not a file URI's (those match whole), nor ours to
    // shorten; after another word and a colon it is a label (`saved:/…`). URLs with `//` never reach here.
    if (at >= 5 && rest.slice(at - 5, at).toLowerCase() === "file:") return;
    const found = rest.slice(at);
    // A markdown link (`[out/r.md](/w/out/r.md)`): its text and its target are references of their own.
    const link = found.indexOf(MARKDOWN_LINK);
    const reference = (link === -1 ? found : found.slice(0, link)).replace(TRAILING, "");
    if (reference !== "") visit(reference, offset + at, joinedParts(reference));
    if (link === -1) return;
    const target = at + link + MARKDOWN_LINK.length;
    rest = rest.slice(target);
    offset += target;
  }
}

/** A `,` or `;` right before the start of another path (`/`, `./`, `../`, `file:/`, `file://`, `dir/`). */
const JOINED = new RegExp(String.raw`[,;](?=\.{0,2}\/|[Ff][Ii][Ll][Ee]:\/|[${WORD}.-]+\/)`, "gu");

/**
 * The paths of a reference that is a list of them joined by `,` or `;` without a space (a CSV row,
 * `/w/a.csv,/w/b.csv`), each with its offset; `undefined` when it is no such list. They stand for the reference only
 * when it names nothing as a whole (a folder `2024,` is read as one).
 */
function joinedParts(reference: string): Part[] | undefined {
  if (!reference.includes(",") && !reference.includes(";")) return undefined;
  let parts: Part[] | undefined;
  let from = 0;
  const add = (end: number) => {
    const part = reference.slice(from, end).replace(TRAILING, "");
    if (part !== "") (parts ??= []).push([part, from]);
  };
  for (const match of reference.matchAll(JOINED)) {
    add(match.index!);
    from = match.index! + 1;
  }
  if (from === 0) return undefined;
  add(reference.length);
  return parts;
}

const MARKDOWN_LINK = "](";

function collectReferences(text: string, into: Set<string>): void {
  const add = (reference: string) => {
    into.add(reference);
    const decoded = decodedForm(reference);
    if (decoded !== undefined) into.add(decoded);
    for (const form of shorterForms(reference)) {
      into.add(form);
      const decodedShorter = decodedForm(form);
      if (decodedShorter !== undefined) into.add(decodedShorter);
    }
  };
  forEachPathToken(text, (start, end) =>
    forEachMatch(text.slice(start, end), (reference, _at, parts) => {
      add(reference);
      if (parts !== undefined) for (const [part] of parts) add(part);
    }),
  );
}

/**
 * A `structuredContent` string that is one whole path (`/data/My Reports/q1.csv`, `./it's.txt`, `/w/notes(v2)`): a
 * value there is a path as it stands, spaces, quotes and brackets included, where free text would be cut at them or
 * lose them as punctuation. `undefined` when the string is not shaped like one (one line, from `/`, `./`, `../` or
 * `file:/`).
 */
function wholeReference(text: string): string | undefined {
  const trimmed = text.trim();
  if (trimmed.length > MAX_TOKEN_CHARS || /[\n\r]/.test(trimmed)) return undefined;
  // A `file://` URL with a query or fragment is left to the free-text rules, which keep them after the path.
  if (isFileUrl(trimmed)) return /[?#]/.test(trimmed) ? undefined : trimmed;
  return /^\.{0,2}\//.test(trimmed) ? trimmed : undefined;
}

/**
 * The `/mnt/user-data/…` form of a reference to an existing file inside `root` (a real path); `null` when it names
 * something else (outside, a link escaping, a directory), `MISSING` when it names nothing.
 */
async function toVirtualPath(reference: string, cwd: string, userData: string, root: string): Promise<string | null> {
  let local: string;
  // A file URL's query and fragment (a line anchor: `#L12`) are kept after its path (unescaped, a `?` or `#` starts them).
  let suffix = "";
  if (isFileUrl(reference)) {
    try {
      local = fileURLToPath(reference);
    } catch {
      return MISSING; // names no file (an encoded `/`): a shorter form of it may
    }
    const query = reference.search(/[?#]/);
    if (query !== -1) suffix = reference.slice(query);
  } else if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(reference) || reference.startsWith("//")) {
    return null; // another scheme, or a network path: remote, not ours
  } else {
    // Not normalized: `link/..` is the folder above the link's target, as the file system (realpath) reads it.
    local = nodePath.isAbsolute(reference) ? reference : `${cwd}${nodePath.sep}${reference}`;
    if (!climbsInside(local, userData, root)) return MISSING;
  }
  try {
    const resolved = await realpath(local);
    if (!isInside(resolved, root) || !(await stat(resolved)).isFile()) return null;
    return virtualOf(resolved, root) + suffix;
  } catch {
    // Nothing there (not even a dangling link): its shorter forms may be tried (`MISSING`); anything else is refused.
    return (await lstat(local).then(() => true, () => false)) ? null : MISSING;
  }
}

/**
 * Whether each folder a `..` of the absolute path `local` climbs out of is, as spelled, the thread's user-data folder
 * (`userData`, or its real path `root`) or inside it. The file system looks each one up on the way: a path through
 * another thread's folder and back (`<threads>/other/user-data/x/../../../<thread>/user-data/…`) would be rewritten
 * exactly when that folder exists. A URL's `..` never gets here (its parser removes them as text).
 */
function climbsInside(local: string, userData: string, root: string): boolean {
  if (!local.includes("..")) return true;
  const kept: string[] = [];
  for (const segment of local.split(nodePath.sep)) {
    if (segment === "..") {
      const left = nodePath.sep + kept.join(nodePath.sep);
      if (left !== userData && left !== root && !isInside(left, userData) && !isInside(left, root)) return false;
      kept.pop();
    } else if (segment !== "" && segment !== ".") kept.push(segment);
  }
  return true;
}

/** What `toVirtualPath` returns for a reference to nothing at all. */
const MISSING = "";

/** The free text of a result, where bare file names are rewritten (not `structuredContent`: a name there is data). */
function freeTexts(items: readonly Content[]): string[] {
  const texts: string[] = [];
  for (const item of items) {
    if (item.type === "text") texts.push(item.text);
    else if (item.type === "resource" && "text" in item.resource && typeof item.resource.text === "string") texts.push(item.resource.text);
  }
  return texts;
}

/** An extension ends the name: a `.`, then characters other than `.` and whitespace (`notes.md`, `.env`; not `notes`, `v2.`). */
const HAS_EXTENSION = /\.[^.\s]+$/;

/**
 * A path free text cuts (at a space, a quote, …) or strips (`notes (draft)`): the path of a file the call changed is then
 * found as a whole, as a bare name is.
 */
const CUT_IN_FREE_TEXT = new RegExp(`[\\s'"<>|*?]|${TRAILING.source}`, "u");

/**
 * Base names with an extension shared by exactly one changed file inside `root`, and the host paths of changed files
 * that free text cuts (`CUT_IN_FREE_TEXT`), found in one of `texts`, each with its virtual path (none needing `scrub`).
 * Only names that occur are resolved: a call that wrote thousands of files costs a lookup each.
 */
async function uniqueChangedNames(ctx: PathContext, texts: readonly string[], root: string): Promise<Map<string, string>> {
  const byName = new Map<string, string | null>();
  for (const file of ctx.changed) {
    const name = nodePath.basename(file);
    // A name without an extension (`output`, `a`, `my notes`) is as likely an ordinary word of the text.
    if (!HAS_EXTENSION.test(name)) continue;
    byName.set(name, byName.has(name) ? null : file);
  }
  // Whole host paths, searched for after the names, and only when the text holds the folder's host path at all (as the
  // child may spell it too: its cwd is the real path when the data dir is under a link).
  const spellings = root === ctx.userData ? [root] : [ctx.userData, root];
  const hosts = spellings.filter((spelling) => texts.some((text) => text.includes(spelling + nodePath.sep)));
  for (const file of hosts.length > 0 ? ctx.changed : []) {
    if (!CUT_IN_FREE_TEXT.test(file) || !file.startsWith(ctx.userData + nodePath.sep)) continue;
    for (const spelling of hosts) byName.set(spelling + file.slice(ctx.userData.length), file);
  }
  const unique = new Map<string, string>();
  const occurring = namesIn(texts, [...byName.keys()]);
  await Promise.all(
    [...byName].map(async ([name, file]) => {
      if (file === null || !occurring.has(name)) return;
      const resolved = await realpath(file).catch(() => null);
      if (resolved === null || !isInside(resolved, root)) return;
      const mapped = virtualOf(resolved, root);
      if (ctx.scrub(mapped) === mapped) unique.set(name, mapped);
    }),
  );
  return unique;
}

/**
 * A run of name characters: a bare name starts where one starts (see `bareNamePattern`). Matched in pieces of at most
 * `MAX_NAME_RUN` characters: an unbounded run overflows V8's regexp stack on a few million of them (a hex dump) once the
 * text holds any character above U+00FF; a piece that starts inside a longer run is only a candidate the pattern refuses.
 */
const MAX_NAME_RUN = 4096;
const NAME_RUN = new RegExp(`[${WORD}.-]{1,${MAX_NAME_RUN}}`, "gu");
const NAME_CHARS = new RegExp(`^[${WORD}.-]+$`, "u");
/** How much text, all names together, is searched for names with other characters (a space, `+`): beyond, none is. */
const OTHER_NAMES_SEARCH_CHARS = 16 * 1024 * 1024;

/**
 * Which of `names` may occur in `texts` as a bare name (more than do: `bareNamePattern` decides). A name of name
 * characters only is looked up among the runs of them the texts hold (or a run's part before a `.` that ends a
 * sentence), in one pass however many files a call wrote; a name with other characters is searched for, within a
 * bound on the text searched.
 */
function namesIn(texts: readonly string[], names: readonly string[]): Set<string> {
  const plain = new Set<string>();
  const other: string[] = [];
  let longest = 0;
  for (const name of names) {
    if (!NAME_CHARS.test(name)) other.push(name);
    else {
      plain.add(name);
      longest = Math.max(longest, name.length);
    }
  }
  const found = new Set<string>();
  if (plain.size > 0) {
    for (const text of texts) {
      for (const [run] of text.matchAll(NAME_RUN)) {
        if (plain.has(run)) found.add(run);
        for (let dot = run.indexOf("."); dot !== -1 && dot <= longest; dot = run.indexOf(".", dot + 1)) {
          const before = run.slice(0, dot);
          if (plain.has(before)) found.add(before);
        }
      }
    }
  }
  const length = texts.reduce((sum, text) => sum + text.length, 0);
  let budget = OTHER_NAMES_SEARCH_CHARS;
  for (const name of other) {
    budget -= length;
    if (budget < 0) break;
    if (texts.some((text) => text.includes(name))) found.add(name);
  }
  return found;
}

/** The bare names as whole names (not inside a longer name, not a directory segment), longest first; with their virtual paths. */
interface BareNamePattern {
  readonly pattern: RegExp;
  readonly mapped: ReadonlyMap<string, string>;
}

function bareNamePattern(bareNames: ReadonlyMap<string, string>): BareNamePattern | undefined {
  if (bareNames.size === 0) return undefined;
  const names = [...bareNames.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp);
  return {
    // Not a segment of a Windows path (`C:\\backup\\report.txt`) or an scp one (`host:report.txt`) either.
    // A backslash after it that starts a JSON escape (`report.txt\\n…`, `report.txt\\"`) is no segment separator.
    pattern: new RegExp(
      `(?<![${WORD}./\\\\:-])(?:${names.join("|")})(?!(?:[${WORD}/-]|\\\\(?!${JSON_ESCAPE})|\\.[${WORD}]))`,
      "gu",
    ),
    mapped: bareNames,
  };
}

/**
 * `text` with each reference found in `virtual` replaced by its virtual path, and each bare name in the text between
 * them (never inside a path just written: `final report.txt`'s `report.txt` is not a bare name; never in a URL:
 * `?name=report.txt` stays).
 */
function rewriteText(
  text: string,
  virtual: ReadonlyMap<string, string>,
  bareNames: BareNamePattern | undefined,
  refused: ReadonlySet<string>,
): string {
  if (virtual.size === 0 && bareNames === undefined) return text;
  const parts: string[] = [];
  const urls: [number, number][] = [];
  let copied = 0;
  let nextUrl = 0;
  // Copies text up to `end`, its URLs as they are. A reference is never in a URL, so every URL before it has ended.
  const copyTo = (end: number) => {
    for (; nextUrl < urls.length && urls[nextUrl][0] < end; nextUrl += 1) {
      const [from, to] = urls[nextUrl];
      if (from > copied) parts.push(rewriteBareNames(text.slice(copied, from), bareNames));
      parts.push(text.slice(Math.max(from, copied), to));
      copied = Math.max(copied, to);
    }
    if (end > copied) parts.push(rewriteBareNames(text.slice(copied, end), bareNames));
    copied = Math.max(copied, end);
  };
  forEachPathToken(
    text,
    (start, end) => {
      if (virtual.size === 0) return;
      forEachMatch(text.slice(start, end), (whole, at, joined) => {
        const rewrite = (found: Found, offset: number) => {
          copyTo(start + at + offset);
          parts.push(found.mapped);
          copied = start + at + offset + found.reference.length;
        };
        const found = lookUp(whole, virtual, refused);
        if (found === undefined && joined !== undefined) {
          for (const [part, offset] of joined) {
            const each = lookUp(part, virtual, refused);
            if (each !== undefined && each !== REFUSED) rewrite(each, offset);
          }
        } else if (found !== undefined && found !== REFUSED) rewrite(found, 0);
      });
    },
    (from, to) => urls.push([from, to]),
  );
  copyTo(text.length);
  return parts.join("");
}

/**
 * The virtual path a reference stands for, with the part of it that it covers (itself or a shorter form); `REFUSED` when
 * it, or a shorter form tried before one that resolves, names something refused; `undefined` when it names nothing.
 */
function lookUp(
  whole: string,
  virtual: ReadonlyMap<string, string>,
  refused: ReadonlySet<string>,
): Found | typeof REFUSED | undefined {
  let mapped = virtual.get(whole);
  if (mapped !== undefined) return { reference: whole, mapped };
  // Its decoded form stands for all of it; a shorter form, for the part it covers.
  const decoded = !refused.has(whole) ? decodedForm(whole) : undefined;
  if (decoded !== undefined) mapped = virtual.get(decoded);
  if (mapped !== undefined) return { reference: whole, mapped };
  if (refused.has(whole) || (decoded !== undefined && refused.has(decoded))) return REFUSED;
  for (const form of shorterForms(whole)) {
    const decodedShorter = decodedForm(form);
    // A form naming something refused ends the search: a prefix of it must not stand for it.
    if (refused.has(form) || (decodedShorter !== undefined && refused.has(decodedShorter))) return REFUSED;
    mapped = virtual.get(form) ?? (decodedShorter === undefined ? undefined : virtual.get(decodedShorter));
    if (mapped !== undefined) return { reference: form, mapped };
  }
  return undefined;
}

/** The part of a reference that names a file of the thread, and that file's virtual path. */
interface Found {
  readonly reference: string;
  readonly mapped: string;
}

/** What `lookUp` returns for a reference that names something refused: its parts do not stand for it either. */
const REFUSED = Symbol("refused");

/** A `structuredContent` string: the virtual path when the string is one whole path, else its free-text rewrite. */
function rewriteValue(text: string, virtual: ReadonlyMap<string, string>, refused: ReadonlySet<string>): string {
  const whole = wholeReference(text);
  const mapped = whole === undefined ? undefined : virtual.get(whole);
  return mapped === undefined ? rewriteText(text, virtual, undefined, refused) : text.replace(whole!, () => mapped);
}

function rewriteBareNames(text: string, bareNames: BareNamePattern | undefined): string {
  return bareNames === undefined ? text : text.replace(bareNames.pattern, (name) => bareNames.mapped.get(name) ?? name);
}

/**
 * A `file://` URL, in any case (`FILE://`), also with the host `localhost`; or a `file:/…` URI (Java's `File.toURI`),
 * which the URL parser reads as the same `file:///…`.
 */
function isFileUrl(reference: string): boolean {
  return reference.slice(0, 6).toLowerCase() === "file:/";
}

function isInside(file: string, root: string): boolean {
  return file.startsWith(root + nodePath.sep);
}

/** The files a call changed, as scrubbed `/mnt/user-data/…` paths (for the ToolMessage artifact's `workspace_changes`). */
export function virtualWorkspaceChanges(ctx: PathContext): string[] {
  return ctx.changed.map((file) => ctx.scrub(virtualOf(file, ctx.userData)));
}

function virtualOf(file: string, root: string): string {
  return `${VIRTUAL_USER_DATA}/${nodePath.relative(root, file).split(nodePath.sep).join("/")}`;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
