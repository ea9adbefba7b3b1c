/**
 * Text from task servers and tool calls that reaches the model (inventory §O 129, 138): it is framed as data
 * and cannot open or close markup or the frame around it.
 */

export const UNTRUSTED_BEGIN = "--- BEGIN UNTRUSTED TASK EVENT ---";
export const UNTRUSTED_END = "--- END UNTRUSTED TASK EVENT ---";

/** Any spelling of a frame marker (or the user-input end marker) a text could use to break out of its frame. */
const MARKERS = /-{3,}\s*(BEGIN|END)\s+(UNTRUSTED\s+TASK\s+EVENT|USER\s+INPUT)\s*-{3,}/gi;

/** `<`/`>` escaped and frame markers defused (`--- END USER INPUT ---` becomes `[END USER INPUT]`). */
export function neutralizeUntrustedTags(text: string): string {
  return defuseMarkers(text.replace(/</g, "&lt;").replace(/>/g, "&gt;"));
}

/** Defuses the frame markers only (markup is left alone: results may hold code or HTML). */
export function defuseMarkers(text: string): string {
  return text.replace(MARKERS, (_m, edge: string, what: string) => `[${edge.toUpperCase()} ${what.toUpperCase().replace(/\s+/g, " ")}]`);
}

/** `text` between the begin and end markers, with any marker inside it defused. */
export function frameUntrustedText(text: string): string {
  return `${UNTRUSTED_BEGIN}\n${defuseMarkers(text)}\n${UNTRUSTED_END}`;
}
