/**
 * Text from task servers and tool calls that reaches the model (inventory §O 129, 138): it is framed as data
 * and cannot open or close markup or the frame around it.
 */

export const UNTRUSTED_BEGIN = "--- BEGIN UNTRUSTED TASK EVENT ---";
export const UNTRUSTED_END = "--- END UNTRUSTED TASK EVENT ---";

// One class, not `(?:\s|\p{Cf})+`: U+FEFF is both, and the alternation backtracks exponentially over a run of it.
const GAP = String.raw`[\s\p{Cf}]+`;

/**
 * Any spelling of a frame marker (or the user-input end marker) a text could use to break out of its frame: the
 * words themselves, in any case, spaced by any whitespace or invisible characters (a model reads
 * `END UNTRUSTED TASK EVENT --` as the end of the frame just as well as the real marker). The dashes around
 * them are taken by hand: a pattern that began with a dash run would retry it from every dash (quadratic).
 */
const MARKER_WORDS = new RegExp(String.raw`\b(BEGIN|END)${GAP}(UNTRUSTED${GAP}TASK${GAP}EVENT|USER${GAP}INPUT)\b`, "giu");
const DASH = /\p{Pd}/u;
const DASH_OR_PAD = /[\p{Pd}\t \p{Cf}]/u;

/** `<`/`>` escaped and frame markers defused (`--- END USER INPUT ---` becomes `[END USER INPUT]`). */
export function neutralizeUntrustedTags(text: string): string {
  return defuseMarkers(text.replace(/</g, "&lt;").replace(/>/g, "&gt;"));
}

/** Defuses the frame markers only (markup is left alone: results may hold code or HTML), with the dashes around them. */
export function defuseMarkers(text: string): string {
  let out = "";
  let done = 0;
  for (const match of text.matchAll(MARKER_WORDS)) {
    const [words, edge = "", what = ""] = match;
    const defused = `[${edge.toUpperCase()} ${what.toUpperCase().replace(/[\s\p{Cf}]+/gu, " ")}]`;
    // Already defused (framing twice must not change the text again).
    if (text.startsWith(defused, match.index - 1)) continue;
    // Outwards over dashes and padding, up to the farthest dash on each side (padding alone stays).
    let start = match.index;
    for (let i = start - 1; i >= done && DASH_OR_PAD.test(text[i]!); i -= 1) if (DASH.test(text[i]!)) start = i;
    let end = match.index + words.length;
    for (let i = end; i < text.length && DASH_OR_PAD.test(text[i]!); i += 1) if (DASH.test(text[i]!)) end = i + 1;
    out += text.slice(done, start) + defused;
    done = end;
  }
  return done === 0 ? text : out + text.slice(done);
}

/** `text` between the begin and end markers, with any marker inside it defused. */
export function frameUntrustedText(text: string): string {
  return `${UNTRUSTED_BEGIN}\n${defuseMarkers(text)}\n${UNTRUSTED_END}`;
}
