import type { HeaderMap } from "./headers";
import { utf8Text } from "./text";

/**
 * Headers whose values describe the request rather than authorize it; every other header value a call
 * carries is treated as a credential.
 */
const NON_CREDENTIAL_HEADERS = new Set(["accept", "accept-language", "accept-encoding", "content-type", "user-agent"]);

/**
 * `key=value` parameters that say who is asking, where and how (Digest, SigV4, HTTP Signatures, OAuth 1.0), not
 * what proves it. Their values are short common words ("auth", "MD5", "/") that would blank ordinary text.
 */
const DESCRIPTIVE_PARAMETERS = new Set([
  "username",
  "realm",
  "uri",
  "algorithm",
  "qop",
  "nc",
  "charset",
  "userhash",
  "stale",
  "domain",
  "signedheaders",
  "headers",
  "keyid",
  "created",
  "expires",
  "oauth_signature_method",
  "oauth_version",
  "oauth_timestamp",
]);

/**
 * A parameter list is read only when one of its keys names credential material: `max-age=0` or `wait=5` in a
 * Cache-Control or Prefer header would otherwise make "0" and "5" secrets.
 */
const CREDENTIAL_PARAMETER = /sig|response|credential|token|secret|pass|key|nonce|hmac|proof|auth/i;

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const SCHEME = new RegExp(`^${TOKEN} +`);
/** One `key=value` (value quoted, bare, or empty; `=` only as base64 padding), then a comma or the end. */
const PARAMETER = new RegExp(`\\s*(${TOKEN})\\s*=\\s*("(?:[^"\\\\]|\\\\.)*"|(?:[^,\\s"=]+=*)?)\\s*(?:,|$)`, "y");
const BASIC = /^basic +([A-Za-z0-9+/]+={0,2})$/i;
/**
 * The credential values a header set carries, in the forms a server may quote them apart: each whole value,
 * the token of a `<scheme> <token>` value, the decoded `user:password` of a Basic value and its password,
 * each `name=value` pair of a Cookie and its value, and each parameter of a `key=value, …` value that carries
 * credential material (SigV4, Digest, HTTP Signatures, OAuth 1.0), unquoted. Values of descriptive headers
 * (Accept, Content-Type, …) are not credentials, nor are names, schemes, user names and descriptive parameters.
 */
export function headerSecrets(...maps: ReadonlyArray<HeaderMap | undefined>): string[] {
  const secrets: string[] = [];
  const add = (value: string): void => {
    if (value !== "") secrets.push(value);
  };
  for (const map of maps) {
    if (!map) continue;
    for (const [name, value] of Object.entries(map)) {
      const lower = name.toLowerCase();
      // A value that is not a string is refused before it is sent (see headerValueProblem): the error still needs the redactor.
      if (NON_CREDENTIAL_HEADERS.has(lower) || typeof value !== "string" || value === "") continue;
      secrets.push(value);
      const space = value.indexOf(" ");
      // The token after the scheme, however many spaces stand between them ("Bearer  tok" is valid).
      const token = space > 0 ? value.slice(space + 1).replace(/^ +/, "") : "";
      if (token !== "") secrets.push(token);
      if (lower === "cookie") {
        cookieSecrets(value, add);
      } else {
        basicSecrets(value, add);
        parameterSecrets(value, add);
      }
    }
  }
  return secrets;
}

function basicSecrets(value: string, add: (secret: string) => void): void {
  const match = BASIC.exec(value);
  if (!match) return;
  const decoded = utf8Text(Buffer.from(match[1], "base64"));
  if (decoded === undefined) return;
  add(decoded);
  const colon = decoded.indexOf(":");
  if (colon < 0) return;
  const password = decoded.slice(colon + 1);
  // With no password the user part is the credential (an API key sent as `sk_…:`), which a server echoes as a name.
  add(password === "" ? decoded.slice(0, colon) : password);
}

function cookieSecrets(value: string, add: (secret: string) => void): void {
  for (const part of value.split(";")) {
    const pair = part.trim();
    const eq = pair.indexOf("=");
    const cookie = eq < 0 ? pair : pair.slice(eq + 1).trim();
    if (cookie === "") continue;
    add(pair);
    add(cookie);
    for (const inner of unquoted(cookie)) add(inner);
  }
}

/** A value made only of `key=value` parameters, after an optional scheme: the credential values among them. */
function parameterSecrets(value: string, add: (secret: string) => void): void {
  const params = value.slice(SCHEME.exec(value)?.[0].length ?? 0);
  if (!params.includes("=")) return;
  const found: Array<[string, string]> = [];
  PARAMETER.lastIndex = 0;
  while (PARAMETER.lastIndex < params.length) {
    const match = PARAMETER.exec(params);
    if (!match) return;
    found.push([match[1], match[2]]);
  }
  if (!found.some(([key]) => CREDENTIAL_PARAMETER.test(key))) return;
  for (const [key, raw] of found) {
    if (DESCRIPTIVE_PARAMETERS.has(key.toLowerCase())) continue;
    const forms = unquoted(raw);
    if (forms.length === 0) add(raw);
    for (const form of forms) add(form);
  }
}

/** The inside of a quoted string, as written and with its `\x` escapes undone; nothing for an unquoted value. */
function unquoted(value: string): string[] {
  if (value.length < 2 || !value.startsWith('"') || !value.endsWith('"')) return [];
  const inside = value.slice(1, -1);
  const unescaped = inside.replace(/\\(.)/g, "$1");
  return unescaped === inside ? [inside] : [inside, unescaped];
}
