/**
 * `${VAR}`s written into a URL's user info (`postgresql://app:${DB_PASSWORD}@db/app`) whose value would end the user
 * info there: a `/`, `?` or `#` closes the authority for every URL parser; in a web URL a `\` does for the WHATWG
 * parser, and in any other an `@` may (libpq, behind psql and psycopg, ends the user info at the first one), so the rest
 * of the secret is read as host, port, path or query, which error texts quote (`getaddrinfo ENOTFOUND …`) where no
 * redaction recognises a piece of it.
 */
import { isPlainObject } from "../shared/plain-object";
import { resolveEnvReferences } from "./env";
import { formatIssuePath } from "./errors";

/** Each reference resolves to its name between two private-use characters, which no URL delimiter matches. */
const OPEN = "\uE000";
const CLOSE = "\uE001";
const NAMES: NodeJS.ProcessEnv = new Proxy({}, { get: (_target, name) => (typeof name === "string" ? `${OPEN}${name}${CLOSE}` : undefined) });
/**
 * A URL's scheme (a match starts only where a run of scheme characters does, so a long run is read once) and its
 * authority after the `://`, up to the first `/`, `?`, `#`, whitespace or quote: looked ahead at, not consumed, so the
 * authority of `http://a,postgresql://u:p@b` does not swallow the second URL's `:`.
 */
const AUTHORITY = /(?:(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*))?:\/\/(?=([^/?#\s'"<>]*))/g;
const REFERENCE = new RegExp(`${OPEN}([A-Za-z_][A-Za-z0-9_]*)${CLOSE}`, "g");
const ENDS_USER_INFO = /[/?#]/;
/**
 * Web URLs: the WHATWG parser (Node's `URL`, `fetch`) reads a `\` in them as a `/`. Their parsers take the user info up to
 * the last `@` (WHATWG, Python's urllib, Go's net/url), so an `@` (a user that is an email address) may stay there.
 */
const SPECIAL_SCHEMES: ReadonlySet<string> = new Set(["http", "https", "ws", "wss", "ftp", "file"]);

/**
 * The first string of an enabled server that puts a variable with such a value into a URL's user info, as a skip
 * reason naming the JSON path and the variable (never the value); `null` when there is none.
 */
export function userInfoReferenceProblem(name: string, server: Record<string, unknown>, env: NodeJS.ProcessEnv): string | null {
  for (const [path, text] of strings(server, ["mcpServers", name])) {
    if (!text.includes("://") || !text.includes("$")) continue;
    const template = resolveEnvReferences(text, NAMES).value as string;
    for (const [, scheme, authority] of template.matchAll(AUTHORITY)) {
      const at = authority.lastIndexOf("@");
      if (at === -1) continue;
      const special = scheme !== undefined && SPECIAL_SCHEMES.has(scheme.toLowerCase());
      for (const [, variable] of authority.slice(0, at).matchAll(REFERENCE)) {
        const value: unknown = env[variable];
        if (typeof value === "string" && (ENDS_USER_INFO.test(value) || value.includes(special ? "\\" : "@"))) {
          return (
            `MCP server '${name}': ${formatIssuePath(path)} puts \${${variable}} into a URL's user info, and the value holds '/', '?', '#', ` +
            "'\\' (in an http, ws, ftp or file URL) or '@' (in any other), which end the user info there (the rest would be read " +
            "as host, path or query); percent-encode the value; not starting it"
          );
        }
      }
    }
  }
  return null;
}

/** Every string value under `value`, with its path. */
function* strings(value: unknown, path: PropertyKey[]): Generator<[PropertyKey[], string]> {
  if (typeof value === "string") yield [path, value];
  else if (Array.isArray(value)) for (let i = 0; i < value.length; i += 1) yield* strings(value[i], [...path, i]);
  else if (isPlainObject(value)) for (const [key, item] of Object.entries(value)) yield* strings(item, [...path, key]);
}
