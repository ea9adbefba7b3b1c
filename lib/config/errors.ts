/**
 * Config errors. Their messages name files, JSON paths and positions, never an input value: a value
 * in a config may be a credential.
 */

import { shownHeaderName } from "../shared/headers";

const ROOT = "(root)";

export interface ConfigIssue {
  /** `mcpServers.github.args[1]` style; `(root)` for the document itself. */
  path: string;
  message: string;
}

export class ConfigValidationError extends Error {
  constructor(
    readonly file: string | null,
    readonly issues: ConfigIssue[],
    message = describeIssues(file, issues),
  ) {
    super(message);
    this.name = "ConfigValidationError";
  }
}

/** The config file exists (or was named) but could not be read: a folder, no permission. */
export class ConfigReadError extends Error {
  constructor(
    readonly file: string,
    /** The system's error code (`EISDIR`, `EACCES`), when there is one. */
    readonly code: string | undefined,
    reason: string,
  ) {
    super(`Failed to read extensions config at ${file}: ${code ?? reason}`);
    this.name = "ConfigReadError";
  }
}

/** The file is not JSON. `position` is a UTF-16 offset into the text, `line`/`column` are 1-based. */
export class ConfigJsonSyntaxError extends ConfigValidationError {
  constructor(
    file: string,
    readonly reason: string,
    readonly position: number | null,
    readonly line: number | null,
    readonly column: number | null,
  ) {
    const where = position === null ? "" : ` at line ${line} column ${column} (position ${position})`;
    const message = `Extensions config file at ${file} is not valid JSON: ${reason}${where}`;
    super(file, [{ path: ROOT, message: `${reason}${where}` }], message);
    this.name = "ConfigJsonSyntaxError";
  }
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** How much of a key from the user's file an error shows. */
export const MAX_SHOWN_KEY_CHARS = 64;

/**
 * A key from the user's file as an error shows it: JSON-quoted, every character outside printable ASCII
 * escaped (`\n`, `\u202e`, …) so it cannot break or forge a log line, and cut to `MAX_SHOWN_KEY_CHARS`
 * characters (a cut key ends with `…` inside the quotes).
 */
export function shownKey(key: string): string {
  const cut = key.length > MAX_SHOWN_KEY_CHARS;
  const quoted = JSON.stringify(cut ? key.slice(0, MAX_SHOWN_KEY_CHARS) : key).replace(
    /[^\x20-\x7e]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  return cut ? `${quoted.slice(0, -1)}…"` : quoted;
}

export function formatIssuePath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return ROOT;
  let out = "";
  let parent: PropertyKey | undefined;
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else if (typeof key === "symbol") out += `[${shownKey(key.description ?? "")}]`;
    else if (parent === "headers" && shownHeaderName(key) !== key) out += `[${shownCutHeader(key)}]`;
    else if (IDENTIFIER.test(key) && key.length <= MAX_SHOWN_KEY_CHARS) out += out === "" ? key : `.${key}`;
    else out += `[${shownKey(key)}]`;
    parent = key;
  }
  return out;
}

/** A header name cut as header errors cut it (a mistyped "Authorization: Bearer …" key holds its value), quoted. */
function shownCutHeader(name: string): string {
  return `${shownKey(shownHeaderName(name).slice(0, -1)).slice(0, -1)}…"`;
}

/** The issues without the file's name: what an API answer may show (it never names a local path). */
export function describeConfigIssues(issues: readonly ConfigIssue[]): string {
  return describeIssues(null, issues);
}

function describeIssues(file: string | null, issues: readonly ConfigIssue[]): string {
  const head = file === null ? "Invalid extensions config" : `Invalid extensions config at ${file}`;
  return [`${head}:`, ...issues.map((issue) => `  ${issue.path}: ${issue.message}`)].join("\n");
}

/**
 * Durable task settings that cannot work as configured (SPEC §6.3, §6.6): task tools are never exposed as
 * synchronous calls instead. The message names servers, tools and settings, never a value.
 */
export class McpTaskConfigurationError extends Error {
  /**
   * @param blockedServers Task servers no call may reach until the process restarts (their config changed since
   *   startup). The other servers' calls, a durable task's polls among them, go on.
   */
  constructor(
    message: string,
    readonly blockedServers: readonly string[] = [],
  ) {
    super(message);
    this.name = "McpTaskConfigurationError";
  }
}
