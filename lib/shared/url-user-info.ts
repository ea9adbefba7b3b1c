/**
 * User info written into a URL without percent-encoding (`https://user:p@ss/w#rd@host/mcp`), where a URL parser takes
 * the wrong host: the first `/`, `?` or `#` (also `\` in a web URL) ends the authority, so the user info's start is read
 * as the host (`getaddrinfo ENOTFOUND ss` quotes it) and the rest as path, query or fragment.
 */

/**
 * Web URLs: the WHATWG parser (Node's `URL`, `fetch`) reads a `\` in them as a `/`. Their parsers take the user info up to
 * the last `@` (WHATWG, Python's urllib, Go's net/url), so an `@` (a user that is an email address) may stay there.
 */
export const WEB_SCHEMES: ReadonlySet<string> = new Set(["http", "https", "ws", "wss", "ftp", "file"]);

/** A URL's scheme where a URL starts (not inside a run of scheme characters), then its `://`. */
const URL_START = /(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*):\/\//g;

/**
 * Whether a `scheme://` URL in `text` shows user info that is not percent-encoded: an `@` after its authority's end
 * (one that starts a path segment, `/@owner/server`, is not a sign), or, with `secondAt`, a second `@` in the
 * authority of a URL other than a web one (libpq, behind psql and psycopg, ends the user info at the first). A `file:`
 * URL, or one other than a web URL with an empty authority (`scheme:///`), has no user info to look at.
 */
export function userInfoUnencoded(text: string, secondAt: boolean): boolean {
  const starts = [...text.matchAll(URL_START)];
  for (const [index, match] of starts.entries()) {
    const scheme = match[1].toLowerCase();
    // A file URL holds no user info (no parser reads one there): its '@'s are the path's (`.pnpm/tsx@4.19.2/`).
    if (scheme === "file") continue;
    const web = WEB_SCHEMES.has(scheme);
    const rest = text.slice(match.index + match[0].length, starts[index + 1]?.index).split(/[\s'"<>]/, 1)[0];
    const end = rest.search(web ? /[/?#\\]/ : /[/?#]/);
    // Nor does an empty authority (`postgresql:///app?host=/socket`), but in a web URL, whose parser skips the slashes.
    if (end === 0 && !web) continue;
    const authority = end === -1 ? rest : rest.slice(0, end);
    if (secondAt && !web && authority.indexOf("@") !== authority.lastIndexOf("@")) return true;
    if (end === -1) continue;
    for (let at = rest.indexOf("@", end); at !== -1; at = rest.indexOf("@", at + 1)) {
      const before = rest[at - 1];
      if (before !== "/" && !(web && before === "\\")) return true;
    }
  }
  return false;
}
