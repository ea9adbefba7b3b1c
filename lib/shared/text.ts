/** `text` cut to `max` characters, with a note saying how much was cut. */
export function boundText(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… [truncated ${text.length - max} characters]`;
}
