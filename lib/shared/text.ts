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
