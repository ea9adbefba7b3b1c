import { formatIssuePath } from "../config/errors";
import { McpOAuthSchema } from "../config/schema";
import { isSensitiveKey } from "../config/sensitive";

/**
 * Masking of the config the HTTP API shows (SPEC §8.1, inventory §P 54–55), applied to the RAW file
 * JSON: a `$VAR` placeholder is masked like any value and restored as written, so no resolved secret is
 * ever read, shown or written back.
 *
 * Shown as `"***"`: every `env` and `headers` value, every `user_auth.users` value, and the value of any
 * key whose name looks sensitive (camelCase and kebab-case normalised to snake_case first), at any
 * depth (the OAuth block's declared settings such as `token_url` excepted). `oauth.client_secret` /
 * `oauth.refresh_token` are shown as `null`. `headers_from_context` holds
 * names only and is shown as it is.
 *
 * On PUT, `"***"` in one of those places restores the stored raw value of the same server, or is a 400
 * naming the field when nothing is stored there. For the OAuth secrets `null` (what GET shows) keeps the
 * stored value and `""` clears it.
 */

export const MASK = "***";

const OAUTH_SECRETS = ["client_secret", "refresh_token"] as const;
/** The OAuth block's declared fields other than the two secrets name settings, not credentials (`token_url`, `token_field`, …). */
const OAUTH_SETTINGS = new Set(Object.keys(McpOAuthSchema.shape).filter((key) => !(OAUTH_SECRETS as readonly string[]).includes(key)));
/** Server fields whose every value is masked. */
const VALUE_MAPS = ["env", "headers"] as const;


/** A `"***"` that has nothing stored to stand for; `field` is the request's JSON path. */
export class MaskedValueError extends Error {
  constructor(readonly field: string) {
    super(`${field}: cannot be set to the masked value '${MASK}' because nothing is stored there; provide a real value`);
    this.name = "MaskedValueError";
  }
}

/** A masked copy of the `mcpServers` object of the raw file (never mutates it). */
export function maskServers(servers: unknown): Record<string, unknown> {
  if (!isRecord(servers)) return {};
  return mapEntries(servers, (_name, server) => maskServer(server));
}

export function maskServer(server: unknown): unknown {
  if (!isRecord(server)) return server;
  return mapEntries(server, (key, value) => {
    if ((VALUE_MAPS as readonly string[]).includes(key) && isRecord(value)) return mapEntries(value, () => MASK);
    // Its header mapping holds header and key names, shown as they are; anything else is masked by name.
    if (key === "headers_from_context" && isRecord(value)) {
      return mapEntries(value, (field, item) => (field === "headers" ? item : maskNested(field, item)));
    }
    if (key === "oauth" && isRecord(value)) {
      return mapEntries(value, (field, item) => {
        if ((OAUTH_SECRETS as readonly string[]).includes(field)) return null;
        return OAUTH_SETTINGS.has(field) ? maskWalk(item) : maskNested(field, item);
      });
    }
    if (key === "user_auth" && isRecord(value)) {
      return mapEntries(value, (field, item) => (field === "users" && isRecord(item) ? mapEntries(item, () => MASK) : maskNested(field, item)));
    }
    return maskNested(key, value);
  });
}

/** The value under `key`: masked whole when the key is sensitive, else walked. */
function maskNested(key: string, value: unknown): unknown {
  if (isSensitiveKey(key) && value !== null && value !== undefined) return MASK;
  return maskWalk(value);
}

function maskWalk(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(maskWalk);
  if (isRecord(value)) return mapEntries(value, (key, item) => maskNested(key, item));
  return value;
}

/**
 * The incoming `mcpServers` with every masked value restored from `stored` (the raw `mcpServers` of the
 * file). `field` is the request body's name for the servers, used in error paths.
 */
export function restoreMaskedServers(incoming: Record<string, unknown>, stored: unknown, field = "mcp_servers"): Record<string, unknown> {
  const storedServers = isRecord(stored) ? stored : {};
  return mapEntries(incoming, (name, server) => restoreServer(server, ownValue(storedServers, name), [field, name]));
}

export function restoreServer(server: unknown, stored: unknown, path: readonly (string | number)[]): unknown {
  if (!isRecord(server)) return server;
  const before = isRecord(stored) ? stored : {};
  return mapEntries(server, (key, value) => {
    const storedValue = ownValue(before, key);
    const at = [...path, key];
    if ((VALUE_MAPS as readonly string[]).includes(key) && isRecord(value)) return restoreAll(value, storedValue, at);
    if (key === "headers_from_context" && isRecord(value)) {
      const storedMapping = isRecord(storedValue) ? storedValue : {};
      return mapEntries(value, (field, item) =>
        field === "headers" ? item : restoreNested(field, item, ownValue(storedMapping, field), [...at, field]),
      );
    }
    if (key === "oauth" && isRecord(value)) {
      const storedOAuth = isRecord(storedValue) ? storedValue : {};
      return mapEntries(value, (field, item) => {
        if (!(OAUTH_SECRETS as readonly string[]).includes(field)) {
          return OAUTH_SETTINGS.has(field)
            ? restoreWalk(item, ownValue(storedOAuth, field), [...at, field])
            : restoreNested(field, item, ownValue(storedOAuth, field), [...at, field]);
        }
        if (item === "") return null;
        if (item === null || item === MASK) {
          const kept = ownValue(storedOAuth, field);
          if (kept !== undefined) return kept;
          if (item === MASK) throw new MaskedValueError(formatIssuePath([...at, field]));
        }
        return item;
      });
    }
    if (key === "user_auth" && isRecord(value)) {
      const storedAuth = isRecord(storedValue) ? storedValue : {};
      return mapEntries(value, (field, item) =>
        field === "users" && isRecord(item)
          ? restoreAll(item, ownValue(storedAuth, field), [...at, field])
          : restoreNested(field, item, ownValue(storedAuth, field), [...at, field]),
      );
    }
    return restoreNested(key, value, storedValue, at);
  });
}

/** A map whose every value may be masked (`env`, `headers`, `user_auth.users`). */
function restoreAll(values: Record<string, unknown>, stored: unknown, path: readonly (string | number)[]): Record<string, unknown> {
  const before = isRecord(stored) ? stored : {};
  return mapEntries(values, (key, value) => {
    if (value !== MASK) return value;
    const kept = ownValue(before, key);
    if (kept === undefined) throw new MaskedValueError(formatIssuePath([...path, key]));
    return kept;
  });
}

function restoreNested(key: string, value: unknown, stored: unknown, path: readonly (string | number)[]): unknown {
  if (value === MASK && isSensitiveKey(key)) {
    if (stored === undefined) throw new MaskedValueError(formatIssuePath(path));
    return stored;
  }
  return restoreWalk(value, stored, path);
}

function restoreWalk(value: unknown, stored: unknown, path: readonly (string | number)[]): unknown {
  if (Array.isArray(value)) {
    // Items are matched by position only while the list keeps its length: after an item was added or removed, the
    // same position may hold another entry, and a "***" there would take that entry's secret.
    const before = Array.isArray(stored) && stored.length === value.length ? stored : [];
    return value.map((item, index) => restoreWalk(item, before[index], [...path, index]));
  }
  if (!isRecord(value)) return value;
  const before = isRecord(stored) ? stored : {};
  return mapEntries(value, (key, item) => restoreNested(key, item, ownValue(before, key), [...path, key]));
}

/** Own enumerable property only: a key such as `__proto__` or `constructor` never reads an inherited value. */
function ownValue(record: Record<string, unknown>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(record, key) ? record[key] : undefined;
}

/** Like `Object.fromEntries(Object.entries(...).map(...))`, defining own properties (a `__proto__` key stays a key). */
function mapEntries(record: Record<string, unknown>, map: (key: string, value: unknown) => unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(record)) {
    Object.defineProperty(out, key, { value: map(key, value), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
