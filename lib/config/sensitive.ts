/**
 * Which config names hold credentials: the masking of the config API (every key that looks sensitive) and the
 * redaction of a stdio server's literal launch credentials (names that end in a credential word).
 */

const SENSITIVE_KEY =
  /(^|_)(api_key|api_keys|apikey|access_key|private_key|client_secret|secret|secrets|token|tokens|password|passwords|passwd|credential|credentials|authorization|bearer|cookie|passphrase|auth)(_|$)/;

/**
 * A name whose value is the credential itself (`GITHUB_TOKEN`, `OPENAI_API_KEY`, `--db-password`), not a setting about
 * one (`TOKEN_TTL`, `AUTH_TYPE`, `--token-file`, `--no-auth`). A password may be glued to its prefix (`PGPASSWORD`), and
 * a few well-known names end otherwise (`MYSQL_PWD`, but not `PWD`, the working folder; `SECRET_KEY_BASE`).
 */
const CREDENTIAL_NAME =
  /(?:(^|_)(key|api_key|apikey|access_key|private_key|secret|secret_key|client_secret|token|access_token|refresh_token|pat|passphrase|credential|credentials|bearer|cookie|secret_key_base)|password|passwd|_pwd)$/;

/** Values too common to blank out of every result (`ENABLE_TOKEN=1`): never a credential. */
const NOT_A_CREDENTIAL = /^(?:.{0,3}|true|false|yes|no|on|off|null|none|undefined)$/is;

/** `refreshToken` → `refresh_token`, `APIKey` → `api_key`, `x-api-key` → `x_api_key`. */
export function normalizeConfigKey(key: string): string {
  // A run of capitals is tried from where it starts only: from each of them, a long run that no lower-case letter ends
  // was scanned again to its end (quadratic: 160,000 capitals held the event loop for seconds).
  return key
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/(?<![A-Z])([A-Z]+)([A-Z][a-z])/g, "$1_$2")
    .replace(/[^A-Za-z0-9]+/g, "_")
    .toLowerCase();
}

export function isSensitiveKey(key: string): boolean {
  return SENSITIVE_KEY.test(normalizeConfigKey(key));
}

function isCredentialName(name: string): boolean {
  const normalized = normalizeConfigKey(name).replace(/^_+|_+$/g, "");
  return !normalized.startsWith("no_") && CREDENTIAL_NAME.test(normalized);
}

const FLAG = /^--?([A-Za-z0-9][A-Za-z0-9_.-]*)(?:=([\s\S]*))?$/;

/**
 * Credentials written literally into a stdio server's launch (a `$VAR` value is a secret anyway): `env` values whose
 * name ends in a credential word, the values of such flags in `args` (`--api-key=X`, `--api-key X`), and credentials in
 * URLs anywhere in `args` or `env` values (`DATABASE_URL=postgres://app:pw@…`, see `urlCredentials`).
 */
export function launchCredentials(env: Readonly<Record<string, string>> | undefined, args: readonly string[] | undefined): string[] {
  const found: string[] = [];
  const add = (value: string | undefined): void => {
    if (value !== undefined && !NOT_A_CREDENTIAL.test(value)) found.push(value);
  };
  for (const [name, value] of Object.entries(env ?? {})) if (isCredentialName(name)) add(value);
  const list = args ?? [];
  for (let i = 0; i < list.length; i += 1) {
    const flag = FLAG.exec(list[i]);
    if (!flag || !isCredentialName(flag[1])) continue;
    if (flag[2] !== undefined) add(flag[2]);
    else if (i + 1 < list.length && !list[i + 1].startsWith("-")) add(list[++i]);
  }
  for (const value of [...list, ...Object.values(env ?? {})]) found.push(...urlCredentials(value));
  return found;
}

/**
 * `scheme://` URLs in a config value, up to whitespace or a quote (the first group: from the scheme's first letter). A
 * run of scheme characters is tried from where it starts only: from each of them, a long run without `://` after it was
 * scanned again to its end (quadratic: 160,000 letters held the event loop for seconds).
 */
const URL_IN_TEXT = /(?<![A-Za-z0-9+.-])[0-9+.-]*([A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s'"<>]+)/g;
/**
 * Query parameters that carry a credential, by name (normalized): a closed list, since `*_key` also names ordinary
 * parameters (`sort_key`, `partition_key`, `public_key`).
 */
const CREDENTIAL_PARAMS: ReadonlySet<string> = new Set([
  "api_key",
  "apikey",
  "x_api_key",
  "key",
  "access_key",
  "secret_key",
  "private_key",
  "access_token",
  "auth_token",
  "refresh_token",
  "id_token",
  "token",
  "auth",
  "password",
  "passwd",
  "pwd",
  "secret",
  "client_secret",
  "sig",
  "signature",
]);
/** A user name this long, with a digit and no password, on an http(s) URL is a token sent as the user (`https://<token>@host`). */
const TOKEN_AS_USER_MIN_CHARS = 20;

function tokenAsUser(url: URL): boolean {
  const user = url.username;
  return (url.protocol === "https:" || url.protocol === "http:") && user.length >= TOKEN_AS_USER_MIN_CHARS && /\d/.test(user) && /[A-Za-z]/.test(user);
}

function decoded(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "));
  } catch {
    return text;
  }
}

/**
 * Credentials written literally into URLs in a config value (a server's `url`, a stdio argument or `env` value such
 * as `DATABASE_URL`): the password of `user:password@`, a token sent as the user of an http(s) URL, and the values
 * of query parameters that name a credential (`?api_key=…`, `&access_token=…`, `&sig=…`).
 */
export function urlCredentials(text: string | undefined): string[] {
  const found: string[] = [];
  const add = (value: string): void => {
    if (!NOT_A_CREDENTIAL.test(value)) found.push(value);
  };
  for (const [, match] of (text ?? "").matchAll(URL_IN_TEXT)) {
    let url: URL;
    try {
      url = new URL(match);
    } catch {
      continue;
    }
    if (url.password !== "") add(decoded(url.password));
    else if (tokenAsUser(url)) add(decoded(url.username));
    for (const [name, value] of url.searchParams) if (CREDENTIAL_PARAMS.has(normalizeConfigKey(name))) add(value);
  }
  return found;
}
