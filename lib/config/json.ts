import { ConfigJsonSyntaxError, ConfigValidationError, formatIssuePath } from "./errors";

/** Deeper documents are refused: the env resolution, the schema and our walkers recurse. */
export const MAX_CONFIG_DEPTH = 64;

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The document's bytes as text. Bytes that are not UTF-8 are refused, naming their position, instead of
 * becoming U+FFFD: a Latin-1 credential would silently change, and a writer would save the change.
 */
export function decodeJsonDocument(bytes: Uint8Array, file: string): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    // The decoder drops a leading byte-order mark, so positions count from the text after it, as JSON errors do.
    const valid = strictUtf8.decode(bytes.subarray(0, validUtf8Prefix(bytes)));
    const { line, column } = lineAndColumn(valid, valid.length);
    throw new ConfigJsonSyntaxError(file, "invalid UTF-8", valid.length, line, column);
  }
}

/** How many leading bytes form whole, valid UTF-8 sequences (RFC 3629: no overlongs, surrogates or values past U+10FFFF). */
function validUtf8Prefix(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i];
    let length: number;
    let low = 0x80;
    let high = 0xbf;
    if (b < 0x80) length = 1;
    else if (b >= 0xc2 && b <= 0xdf) length = 2;
    else if (b >= 0xe0 && b <= 0xef) {
      length = 3;
      if (b === 0xe0) low = 0xa0;
      if (b === 0xed) high = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      length = 4;
      if (b === 0xf0) low = 0x90;
      if (b === 0xf4) high = 0x8f;
    } else return i;
    for (let k = 1; k < length; k += 1) {
      const next = bytes[i + k];
      if (next === undefined || next < (k === 1 ? low : 0x80) || next > (k === 1 ? high : 0xbf)) return i;
    }
    i += length;
  }
  return i;
}

/** A document's bytes, decoded strictly (`decodeJsonDocument`) and parsed (`parseJsonDocument`). */
export function parseJsonBytes(bytes: Uint8Array, file: string): unknown {
  return parseJsonDocument(decodeJsonDocument(bytes, file), file);
}

/**
 * `JSON.parse` with an error that names the position but not the content: V8's own messages quote
 * the text around the error ("Unexpected token 'S', \"{\"token\": SECRET…\" is not valid JSON").
 * A leading byte-order mark is ignored.
 */
export function parseJsonDocument(text: string, file: string): unknown {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (err) {
    const found = locateSyntaxError(body) ?? fromEngineMessage(err);
    const position = found?.position ?? null;
    const { line, column } = position === null ? { line: null, column: null } : lineAndColumn(body, position);
    throw new ConfigJsonSyntaxError(file, found?.reason ?? "syntax error", position, line, column);
  }
  assertNestingDepth(value, file);
  return value;
}

interface Level {
  value: unknown;
  depth: number;
  parent: Level | null;
  key: string | number | null;
}

/**
 * Refuses a document nested deeper than `MAX_CONFIG_DEPTH` arrays/objects (the document itself is level 1),
 * naming the JSON path of the first container past the limit. Iterative, so it cannot overflow itself.
 */
function assertNestingDepth(root: unknown, file: string): void {
  const pending: Level[] = [{ value: root, depth: 1, parent: null, key: null }];
  while (pending.length > 0) {
    const level = pending.pop()!;
    const { value, depth } = level;
    if (typeof value !== "object" || value === null) continue;
    if (depth > MAX_CONFIG_DEPTH) {
      const path: (string | number)[] = [];
      for (let at: Level | null = level; at !== null && at.key !== null; at = at.parent) path.push(at.key);
      throw new ConfigValidationError(file, [
        { path: formatIssuePath(path.reverse()), message: `nested deeper than ${MAX_CONFIG_DEPTH} levels` },
      ]);
    }
    const entries: [string | number, unknown][] = Array.isArray(value)
      ? value.map((item, index) => [index, item])
      : Object.entries(value);
    for (let i = entries.length - 1; i >= 0; i--) {
      pending.push({ value: entries[i][1], depth: depth + 1, parent: level, key: entries[i][0] });
    }
  }
}

interface SyntaxErrorLocation {
  reason: string;
  position: number | null;
}

function fromEngineMessage(err: unknown): SyntaxErrorLocation | null {
  const match = err instanceof Error ? /at position (\d+)/.exec(err.message) : null;
  return match ? { reason: "syntax error", position: Number(match[1]) } : null;
}

function lineAndColumn(text: string, position: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < position && i < text.length; i++) {
    if (text.charCodeAt(i) === 0x0a) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: position - lineStart + 1 };
}

class Fail {
  constructor(
    readonly reason: string,
    readonly position: number,
  ) {}
}

/** A strict JSON (RFC 8259) syntax walk that reports where the first error is; null if none found. */
function locateSyntaxError(text: string): SyntaxErrorLocation | null {
  let i = 0;
  const fail = (reason: string, at = i): never => {
    throw new Fail(at >= text.length && reason !== "unterminated string" ? "unexpected end of input" : reason, at);
  };
  const skipWhitespace = () => {
    while (i < text.length) {
      const c = text[i];
      if (c === " " || c === "\t" || c === "\n" || c === "\r") i++;
      else break;
    }
  };
  const literal = (word: string) => {
    for (let k = 0; k < word.length; k++) {
      if (text[i + k] !== word[k]) fail("unexpected character", i + k);
    }
    i += word.length;
  };
  const string = () => {
    i++;
    for (;;) {
      if (i >= text.length) fail("unterminated string");
      const code = text.charCodeAt(i);
      if (code === 0x22) {
        i++;
        return;
      }
      if (code < 0x20) fail("bad control character in string");
      if (code === 0x5c) {
        const esc = text[i + 1];
        if (esc === "u") {
          if (!/^[0-9A-Fa-f]{4}$/.test(text.slice(i + 2, i + 6))) fail("invalid unicode escape", i + 1);
          i += 6;
        } else if (esc !== undefined && '"\\/bfnrt'.includes(esc)) {
          i += 2;
        } else {
          fail("invalid escape sequence", i + 1);
        }
        continue;
      }
      i++;
    }
  };
  const digits = () => {
    const start = i;
    while (i < text.length && text[i] >= "0" && text[i] <= "9") i++;
    if (i === start) fail("invalid number");
  };
  const number = () => {
    if (text[i] === "-") i++;
    if (text[i] === "0") i++;
    else digits();
    if (text[i] === ".") {
      i++;
      digits();
    }
    if (text[i] === "e" || text[i] === "E") {
      i++;
      if (text[i] === "+" || text[i] === "-") i++;
      digits();
    }
  };
  /** `depth`: the level a container here would be (the document is level 1). */
  const value = (depth: number): void => {
    skipWhitespace();
    const c = text[i];
    // The document is refused past this depth anyway; deeper, the walk itself would overflow the stack.
    if ((c === "{" || c === "[") && depth > MAX_CONFIG_DEPTH) fail(`nested deeper than ${MAX_CONFIG_DEPTH} levels`);
    if (c === "{") {
      i++;
      skipWhitespace();
      if (text[i] === "}") {
        i++;
        return;
      }
      for (;;) {
        skipWhitespace();
        if (text[i] !== '"') fail("expected a property name in double quotes");
        string();
        skipWhitespace();
        if (text[i] !== ":") fail("expected ':' after a property name");
        i++;
        value(depth + 1);
        skipWhitespace();
        if (text[i] === ",") {
          i++;
          continue;
        }
        if (text[i] === "}") {
          i++;
          return;
        }
        fail("expected ',' or '}' after a property value");
      }
    }
    if (c === "[") {
      i++;
      skipWhitespace();
      if (text[i] === "]") {
        i++;
        return;
      }
      for (;;) {
        value(depth + 1);
        skipWhitespace();
        if (text[i] === ",") {
          i++;
          continue;
        }
        if (text[i] === "]") {
          i++;
          return;
        }
        fail("expected ',' or ']' after an array element");
      }
    }
    if (c === '"') return string();
    if (c === "t") return literal("true");
    if (c === "f") return literal("false");
    if (c === "n") return literal("null");
    if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) return number();
    fail("unexpected character");
  };

  try {
    value(1);
    skipWhitespace();
    if (i < text.length) fail("unexpected content after the JSON value");
    return null;
  } catch (err) {
    if (err instanceof Fail) return { reason: err.reason, position: err.position };
    return null; // e.g. nesting deeper than the call stack
  }
}
