import { boundText, escapeControls } from "../shared/text";

/** Characters of one cell a person sees; `--json` keeps values whole. */
export const TABLE_CELL_MAX_CHARS = 200;

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
