/** The first `end` UTF-16 units of `text`, one fewer when the cut would split a surrogate pair (an emoji). */
export function sliceWhole(text: string, end: number): string {
  if (end <= 0) return "";
  const code = text.charCodeAt(end - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff && end < text.length ? end - 1 : end);
}

/** `text` cut to `max` characters (never inside a surrogate pair), with a note saying how much was cut. */
export function boundText(text: string, max: number): string {
  if (text.length <= max) return text;
  const kept = sliceWhole(text, max);
  return `${kept}… [truncated ${text.length - kept.length} characters]`;
}

/**
 * C0, DEL, C1, the line/paragraph separators and the bidi controls (marks, embeddings, overrides, isolates): text a
 * server or a user controls would, shown as it is, drive a terminal (ANSI/OSC), forge a log line or table row, or
 * reorder the line it is on.
 */
const UNSAFE_CHARS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const NAMED_ESCAPES: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function visibleEscape(char: string): string {
  const named = NAMED_ESCAPES[char];
  if (named !== undefined) return named;
  const code = char.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

/** `text` with every control character shown as a visible escape (`\x1b`, `\n`, `\u202e`). */
export function escapeControls(text: string): string {
  return text.replace(UNSAFE_CHARS, visibleEscape);
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * False when the bytes are surely not text: a control byte (but a tab or line break with `breaks`), a byte no UTF-8
 * character starts with, or a sequence without its continuation bytes. Binary data fails within a few bytes, where
 * the strict decoder (about 3 µs a call) would read it whole first. The control characters are all ASCII, so after
 * this the decoder only has to refuse what is not UTF-8 (overlong forms, surrogates).
 */
function mayBeText(bytes: Uint8Array, breaks: boolean): boolean {
  for (let i = 0; i < bytes.length; ) {
    const byte = bytes[i];
    if (byte < 0x80) {
      if ((byte < 0x20 && !(breaks && (byte === 0x09 || byte === 0x0a || byte === 0x0d))) || byte === 0x7f) return false;
      i += 1;
      continue;
    }
    const continuations = byte >= 0xc2 && byte <= 0xdf ? 1 : byte >= 0xe0 && byte <= 0xef ? 2 : byte >= 0xf0 && byte <= 0xf4 ? 3 : -1;
    if (continuations === -1 || i + continuations >= bytes.length) return false;
    for (let k = 1; k <= continuations; k += 1) if ((bytes[i + k] & 0xc0) !== 0x80) return false;
    i += continuations + 1;
  }
  return true;
}

/**
 * The bytes as text when they are valid UTF-8 without control characters (tabs and line breaks allowed with
 * `breaks`), else undefined: decoded bytes that are not text (binary data) are nothing to read.
 */
export function utf8Text(bytes: Uint8Array, breaks = false): string | undefined {
  if (!mayBeText(bytes, breaks)) return undefined;
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}
