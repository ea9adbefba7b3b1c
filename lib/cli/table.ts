import { boundText } from "../shared/text";

/** Characters of one cell a person sees; `--json` keeps values whole. */
export const TABLE_CELL_MAX_CHARS = 200;

/**
 * C0, DEL, C1, the line/paragraph separators and the bidi controls (marks, embeddings, overrides, isolates): cells
 * hold server-controlled text, and these would drive the terminal (ANSI/OSC), forge table rows or reorder the line.
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

/** One cell as a person sees it: escaped, and bounded with a note when long. */
export function displayCell(text: string): string {
  return boundText(escapeControls(text), TABLE_CELL_MAX_CHARS);
}

/** A plain left-aligned text table for people; scripts use --json. */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const shown = [header, ...rows].map((cells) => cells.map((cell) => displayCell(cell ?? "")));
  const widths = shown[0]!.map((_, i) => Math.max(...shown.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (c ?? "").padEnd(widths[i]!)).join("  ").trimEnd();
  return [line(shown[0]!), line(widths.map((w) => "-".repeat(w))), ...shown.slice(1).map(line)].join("\n");
}
