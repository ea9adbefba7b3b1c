/**
 * The Python original validates its file with pydantic in lax mode, which takes `"30"` for a number and `"false"`
 * for a boolean; a `$VAR` can only ever give a string. So that such a file loads here verbatim (SPEC §2.1), the
 * scalar fields are read the same way before validation. The raw JSON is left as written.
 */
import { isPlainObject } from "../shared/plain-object";

const NUMERIC = /^\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*$/;
const TRUE_WORDS = new Set(["1", "on", "t", "true", "y", "yes"]);
const FALSE_WORDS = new Set(["0", "off", "f", "false", "n", "no"]);

const SERVER_BOOLEANS = ["enabled", "tool_name_prefix"];
const SERVER_NUMBERS = ["session_init_timeout", "tool_call_timeout", "max_total_timeout"];
const ROUTING_NUMBERS = ["priority"];
const OAUTH_BOOLEANS = ["enabled"];
const OAUTH_NUMBERS = ["refresh_skew_seconds"];
const TASK_BOOLEANS = ["enabled"];
const TASK_NUMBERS = [
  "poll_interval_seconds",
  "lease_seconds",
  "max_concurrent_polls",
  "max_poll_backoff_seconds",
  "input_required_poll_interval_seconds",
  "tracking_degraded_after_errors",
  "max_result_bytes",
  "result_preview_max_chars",
];

function laxNumber(value: unknown): unknown {
  return typeof value === "string" && NUMERIC.test(value) ? Number(value) : value;
}

function laxBoolean(value: unknown): unknown {
  if (typeof value !== "string") return value;
  const word = value.trim().toLowerCase();
  if (TRUE_WORDS.has(word)) return true;
  if (FALSE_WORDS.has(word)) return false;
  return value;
}

/** `object` with the named fields read laxly; the same object when nothing changes, else a copy. */
function withLaxFields(object: Record<string, unknown>, booleans: readonly string[], numbers: readonly string[]): Record<string, unknown> {
  let out = object;
  const set = (key: string, read: (value: unknown) => unknown) => {
    if (!Object.prototype.hasOwnProperty.call(object, key)) return;
    const value = read(object[key]);
    if (value === object[key]) return;
    if (out === object) out = { ...object };
    out[key] = value;
  };
  for (const key of booleans) set(key, laxBoolean);
  for (const key of numbers) set(key, laxNumber);
  return out;
}

type Rewrite = (object: Record<string, unknown>, booleans: readonly string[], numbers: readonly string[]) => Record<string, unknown>;

/**
 * `server` with `rewrite` applied to each object holding scalar settings (the server itself, its routing, its OAuth
 * block, each tool override's routing), told which of its fields are booleans and which numbers. Only what
 * `rewrite` changes is copied.
 */
function rewriteSettings(server: Record<string, unknown>, rewrite: Rewrite): Record<string, unknown> {
  let out = rewrite(server, SERVER_BOOLEANS, SERVER_NUMBERS);
  const replace = (key: string, value: unknown) => {
    if (value === out[key]) return;
    if (out === server) out = { ...server };
    out[key] = value;
  };
  if (isPlainObject(server.routing)) replace("routing", rewrite(server.routing, [], ROUTING_NUMBERS));
  if (isPlainObject(server.oauth)) replace("oauth", rewrite(server.oauth, OAUTH_BOOLEANS, OAUTH_NUMBERS));
  if (isPlainObject(server.tools)) {
    const tools = server.tools;
    const entries = Object.entries(tools).map(([name, override]): [string, unknown] => {
      if (!isPlainObject(override) || !isPlainObject(override.routing)) return [name, override];
      const routing = rewrite(override.routing, [], ROUTING_NUMBERS);
      return [name, routing === override.routing ? override : { ...override, routing }];
    });
    if (entries.some(([name, override]) => override !== tools[name])) replace("tools", Object.fromEntries(entries));
  }
  return out;
}

/** One server entry with its scalar fields read as the Python original reads them. */
export function laxServer(server: unknown): unknown {
  return isPlainObject(server) ? rewriteSettings(server, withLaxFields) : server;
}

/** Whether the entry says `enabled: false`, as the Python original reads it (`"false"`, `"no"`, `"0"` too). */
export function isDisabledServer(server: unknown): boolean {
  return isPlainObject(server) && laxBoolean(server.enabled) === false;
}

/** The `mcpTasks` block with its scalar fields read as the Python original reads them. */
export function laxTaskSettings(settings: unknown): unknown {
  return isPlainObject(settings) ? withLaxFields(settings, TASK_BOOLEANS, TASK_NUMBERS) : settings;
}

/**
 * The server without the scalar settings `laxServer` reads (its own, routing priorities, OAuth's): a `$VAR` there is
 * a setting, not a secret, and a `5` counted among the server's secrets would be blanked out of its results.
 */
export function withoutSettings(server: Record<string, unknown>): Record<string, unknown> {
  return rewriteSettings(server, (object, booleans, numbers) => {
    const out = { ...object };
    for (const key of [...booleans, ...numbers]) delete out[key];
    return out;
  });
}
