import type { HeaderMap } from "./headers";

/** Shorter values are not credentials, and blanking them would mangle ordinary words in the text. */
const MIN_SECRET_LENGTH = 6;
export const REDACTED = "[redacted]";

/**
 * Removes every header value of `headers` (and the token part of `<scheme> <token>` values) from `text`.
 * For error texts that come from elsewhere (an SDK or a server's response body) and may echo what was sent.
 */
export function redactHeaderValues(text: string, ...headers: ReadonlyArray<HeaderMap | undefined>): string {
  const secrets = new Set<string>();
  for (const map of headers) {
    if (!map) continue;
    for (const value of Object.values(map)) {
      if (value.length >= MIN_SECRET_LENGTH) secrets.add(value);
      const token = value.slice(value.indexOf(" ") + 1);
      if (token !== value && token.length >= MIN_SECRET_LENGTH) secrets.add(token);
    }
  }
  let result = text;
  // Longest first, so a whole "Bearer <token>" goes before its token alone.
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) {
    if (result.includes(secret)) result = result.split(secret).join(REDACTED);
  }
  return result;
}
