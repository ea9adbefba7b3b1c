/**
 * `${VAR}`s written into a URL's user info (`postgresql://app:${DB_PASSWORD}@db/app`) whose value would end the user
 * info there: a `/`, `?` or `#` closes the authority for every URL parser; in a web URL a `\` does for the WHATWG
 * parser, and in any other an `@` may (libpq, behind psql and psycopg, ends the user info at the first one), so the rest
 * of the secret is read as host, port, path or query, which error texts quote (`getaddrinfo ENOTFOUND …`) where no
 * redaction recognises a piece of it.
 */
import { isPlainObject } from "../shared/plain-object";
import { userInfoUnencoded, WEB_SCHEMES } from "../shared/url-user-info";
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
      const special = scheme !== undefined && WEB_SCHEMES.has(scheme.toLowerCase());
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

/**
 * A server's `url`, or an `env` value (`DATABASE_URL`), taking a URL from a variable (`"url": "$SERVER_URL"`) whose
 * user info is not percent-encoded (`https://user:p@ss/w#rd@host/mcp`, see `userInfoUnencoded`). As a skip reason
 * naming the field and the variable (never the value); `null` when there is none. Arguments are not looked at: a whole
 * `$VAR` there may well be a package pinned to a version (`git+https://host/org/repo@v1`).
 */
export function urlValueProblem(name: string, server: Record<string, unknown>, env: NodeJS.ProcessEnv): string | null {
  const fields: [PropertyKey[], unknown][] = [[["url"], server.url]];
  if (isPlainObject(server.env)) for (const [key, value] of Object.entries(server.env)) fields.push([["env", key], value]);
  for (const [field, text] of fields) {
    if (typeof text !== "string" || !text.includes("$")) continue;
    const template = resolveEnvReferences(text, NAMES).value as string;
    for (const [, variable] of template.matchAll(REFERENCE)) {
      const value: unknown = env[variable];
      if (typeof value !== "string" || !value.includes("://") || !userInfoUnencoded(value, true)) continue;
      return (
        `MCP server '${name}': ${formatIssuePath(["mcpServers", name, ...field])} takes a URL from \${${variable}} whose user ` +
        "info is not percent-encoded (an '@' after the end of its host, or a second '@' in a URL other than http, ws, ftp or " +
        "file): the start of the user info would be read as host, path or query; percent-encode the user info (an '@' in " +
        "the path or query as %40); not starting it"
      );
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
