import { realpath } from "node:fs/promises";
import * as nodePath from "node:path";
import { pathToFileURL } from "node:url";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { mapResultStrings, mapStrings, userDataRoot } from "./paths";
import { VIRTUAL_USER_DATA } from "./workspace";

/** A stdio call's arguments as its server is sent them. */
export interface HostArguments {
  readonly args: Record<string, unknown>;
  /**
   * Each host path (or `file://` URL, and the path that URL names) put into the arguments, with the `/mnt/user-data/…`
   * form the model wrote: the server's echo of it (`cannot open <path>`) is shown to the model as it wrote it, file or not.
   */
  readonly named: ReadonlyMap<string, string>;
  /** Each `file://` URL put into the arguments, with the one the model wrote (see `nameCwdEchoes`). */
  readonly urls: readonly (readonly [host: string, written: string])[];
}

/** Arguments are read this deep; what nests deeper is sent as it is. */
const MAX_DEPTH = 64;
const FILE_SCHEME = "file://";

/**
 * The model only ever sees the thread's files as `/mnt/user-data/…` (results are translated so), and hands such paths
 * back to the tools: a string argument of a stdio call that is one `/mnt/user-data` path (or `file:///mnt/user-data/…`
 * URL), as a whole, becomes the host path of the thread's `user-data` folder, so the server finds what the model saw;
 * unless it leaves the folder once normalized (`/mnt/user-data/../x`). A path inside a longer text is left as it is:
 * the text may be a file's content (a report linking `/mnt/user-data/outputs/chart.png` for a UI that knows that
 * folder) as well as a command line. Object keys are not read. `undefined` when nothing changes, the usual case.
 * `cwd` is the child's working folder, against which a server that takes no URLs resolves a URL as a relative path.
 */
export function hostArguments(args: Record<string, unknown>, userData: string, cwd?: string): HostArguments | undefined {
  const named = new Map<string, string>();
  const urls: [string, string][] = [];
  // Only a string that starts with the path (or a file:// URL of it) is one: no scan of a long text (a file's content).
  const host = (text: string): string =>
    text.startsWith(VIRTUAL_USER_DATA) || text.startsWith(VIRTUAL_USER_DATA, FILE_SCHEME.length) ? hostText(text, userData, named, urls) : text;
  const out = mapStrings(args, host, [], MAX_DEPTH);
  if (out === args) return undefined;
  const hosted = { args: out as Record<string, unknown>, named, urls };
  if (cwd !== undefined) nameCwdEchoes(hosted, cwd, userData);
  return hosted;
}

/**
 * Names in `hosted` the echo of each of its `file://` URLs by a server that takes no URLs and so resolved it as a
 * relative path against its cwd (`cannot open <cwd>/file:/…/a.txt`): shown as the model would have it resolved against
 * the folder it knows the cwd as. `cwd` and `userData` are one form of them: the child resolves against the real path
 * of its cwd (its `process.cwd()`), which differs when the data dir is behind a symbolic link.
 */
export function nameCwdEchoes(hosted: HostArguments, cwd: string, userData: string): void {
  const named = hosted.named as Map<string, string>;
  for (const [host, written] of hosted.urls) named.set(nodePath.resolve(cwd, host), nodePath.resolve(virtualFolder(cwd, userData), written));
}

/**
 * `nameCwdEchoes` for the real paths of `cwd` and `userData` when they differ from them (a data dir, or an operator's
 * cwd, behind a symbolic link); none for the thread's folder when it is not its own any more (see `userDataRoot`).
 */
export async function nameRealCwdEchoes(hosted: HostArguments, cwd: string, userData: string): Promise<void> {
  if (hosted.urls.length === 0) return;
  const [realCwd, realUserData] = await Promise.all([realpath(cwd).catch(() => null), userDataRoot(userData)]);
  if (realCwd === null || (realCwd === cwd && realUserData === userData)) return;
  // Inside a thread folder that is a link now, the real cwd is another folder: not shown as this thread's.
  if (realUserData === null && nodePath.resolve(cwd).startsWith(`${userData}/`)) return;
  nameCwdEchoes(hosted, realCwd, realUserData ?? userData);
}

function hostText(text: string, userData: string, named: Map<string, string>, urls: [string, string][]): string {
  const url = text.slice(0, FILE_SCHEME.length).toLowerCase() === FILE_SCHEME;
  const at = url ? FILE_SCHEME.length : 0;
  if (!text.startsWith(VIRTUAL_USER_DATA, at)) return text;
  const after = at + VIRTUAL_USER_DATA.length;
  if (after < text.length && text[after] !== "/") return text;
  // One path, not a text that mentions several or spans lines.
  if (text.includes(VIRTUAL_USER_DATA, after) || /[\n\r]/.test(text)) return text;
  const rest = text.slice(after);
  const decoded = restOnHost(rest, url);
  if (decoded === undefined) return text;
  // A server often answers with the path resolved (`cannot open /…/a.txt` for `…//a.txt`, `…/./a.txt`, `…/x/../a.txt`).
  const resolved = resolvedRest(decoded);
  if (resolved !== decoded) named.set(userData + resolved, VIRTUAL_USER_DATA + resolved);
  if (!url) {
    named.set(userData + rest, text);
    return userData + rest;
  }
  const host = pathToFileURL(userData).href + rest;
  named.set(host, text);
  // A server given a URL often answers with the path it names (`cannot open /…/my file.txt`).
  named.set(userData + decoded, VIRTUAL_USER_DATA + decoded);
  // Or with the URL as its parser gives it back (`new URL(…).href`), dot segments resolved: a data dir with a character
  // a URL escapes (a space) matches none of the above there.
  if (resolved !== decoded) addParsedUrl(host, text, named);
  // Or, taking no URLs, as a relative path it resolved against its cwd: `nameCwdEchoes`.
  urls.push([host, text]);
  return host;
}

/** `folder` as the model knows it: its `/mnt/user-data/…` form when inside `userData`, else as it is. */
function virtualFolder(folder: string, userData: string): string {
  if (folder === userData) return VIRTUAL_USER_DATA;
  return folder.startsWith(`${userData}/`) ? VIRTUAL_USER_DATA + folder.slice(userData.length) : folder;
}

function addParsedUrl(host: string, text: string, named: Map<string, string>): void {
  try {
    const parsed = new URL(host).href;
    if (parsed !== host) named.set(parsed, new URL(text).href);
  } catch {
    // not a URL a parser reads: no server gives it back parsed
  }
}

/** `rest` (a path inside the folder, from `/`, or empty) as `path.resolve` gives it: normalized, no trailing `/`. */
function resolvedRest(rest: string): string {
  if (rest === "") return rest;
  const normal = nodePath.posix.normalize(rest);
  return normal.length > 1 && normal.endsWith("/") ? normal.slice(0, -1) : normal === "/" ? "" : normal;
}

/**
 * `rest` (what follows `/mnt/user-data`) as a path (a URL's decoded, without its query and fragment), or undefined when
 * it leaves the folder or is not a path.
 */
function restOnHost(rest: string, url: boolean): string | undefined {
  let decoded = rest;
  if (url) {
    const end = rest.search(/[?#]/);
    try {
      decoded = decodeURIComponent(end === -1 ? rest : rest.slice(0, end));
    } catch {
      return undefined;
    }
  }
  if (decoded.includes("\0")) return undefined;
  const normal = nodePath.posix.normalize(VIRTUAL_USER_DATA + decoded);
  if (normal !== VIRTUAL_USER_DATA && normal !== `${VIRTUAL_USER_DATA}/` && !normal.startsWith(`${VIRTUAL_USER_DATA}/`)) return undefined;
  return decoded;
}

/**
 * What may stand right before a host path for it to be one: not a character of a longer path or URL
 * (`/backup/data/threads/…`, `http://h:8000/data/threads/…`, `host:/data/threads/…`), which is not the one named.
 */
const CONTINUES_PATH = /[\p{L}\p{N}\p{M}_.~%+@$/:\\-]/u;

/**
 * `text` with each host path `named` maps shown as the model wrote it (`/mnt/user-data/…`), longest first (a path named
 * whole and a folder of it both named); not where it is the tail of a longer path or URL, but after `file://` or `file:`
 * (the server's link to the path it was given).
 */
export function restoreNamedPaths(text: string, named: ReadonlyMap<string, string>): string {
  let out = text;
  for (const [host, virtual] of sortedPairs(named)) {
    if (!out.includes(host)) continue;
    let next = "";
    let copied = 0;
    for (let at = out.indexOf(host); at !== -1; at = out.indexOf(host, at + host.length)) {
      if (at > 0 && CONTINUES_PATH.test(out[at - 1]) && !afterFileScheme(out, at)) continue;
      next += out.slice(copied, at) + virtual;
      copied = at + host.length;
    }
    if (copied > 0) out = next + out.slice(copied);
  }
  return out;
}

/** Whether `text` has a `file://` URL's scheme, or a `file:` URI's (`file:/…`, Java's `File.toURI`), right before `at`. */
function afterFileScheme(text: string, at: number): boolean {
  if (at >= FILE_SCHEME.length && text.slice(at - FILE_SCHEME.length, at).toLowerCase() === FILE_SCHEME) return true;
  const start = at - FILE_URI_SCHEME.length;
  return start >= 0 && text.slice(start, at).toLowerCase() === FILE_URI_SCHEME && (start === 0 || !CONTINUES_PATH.test(text[start - 1]));
}

const FILE_URI_SCHEME = "file:";

const sorted = new WeakMap<ReadonlyMap<string, string>, readonly (readonly [string, string])[]>();

function sortedPairs(named: ReadonlyMap<string, string>): readonly (readonly [string, string])[] {
  let pairs = sorted.get(named);
  if (pairs === undefined) {
    pairs = [...named].sort((a, b) => b[0].length - a[0].length);
    sorted.set(named, pairs);
  }
  return pairs;
}

/**
 * `result` with each host path `named` maps shown as the model wrote it (`/mnt/user-data/…`), wherever the server
 * quoted it: in text, a link or a string of `structuredContent` (outside the top-level keys in `keep`) or `_meta` (outside
 * the keys the protocol reserves).
 */
export function withNamedPaths(result: CallToolResult, named: ReadonlyMap<string, string>, keep: readonly string[] = []): CallToolResult {
  if (named.size === 0) return result;
  const restore = (text: string): string => restoreNamedPaths(text, named);
  return mapResultStrings(result, { text: restore, uri: restore, data: restore }, keep);
}
