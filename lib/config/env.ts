/**
 * `$VAR` references in config values (SPEC §2.2).
 *
 * - a string that is exactly `$NAME` or `${NAME}` becomes the variable's value;
 * - `${NAME}` inside a longer string is interpolated;
 * - `$$` is a literal `$`;
 * - `$NAME` inside a longer string stays literal (reported in `literal`).
 *
 * An unset variable (no string value in `env`) is reported in `missing` and its reference is left in
 * place; the caller decides what to do (the loader skips the server, fail closed).
 */
import { isPlainObject } from "../shared/plain-object";

export interface EnvResolution {
  value: unknown;
  /** Distinct unset variable names, in order of appearance. */
  missing: string[];
  /** The distinct non-empty values substituted: secrets, for redaction (SPEC §4.3). */
  expanded: string[];
  /** Distinct names written `$NAME` inside a longer string, which stay as written. */
  literal: string[];
}

const WHOLE_REFERENCE = /^\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})$/;
const BRACED_NAME = /^\{([A-Za-z_][A-Za-z0-9_]*)\}/;
const BARE_NAME = /^[A-Za-z_][A-Za-z0-9_]*/;

interface Seen {
  missing: Set<string>;
  expanded: Set<string>;
  literal: Set<string>;
}

export function resolveEnvReferences(value: unknown, env: NodeJS.ProcessEnv): EnvResolution {
  const seen: Seen = { missing: new Set<string>(), expanded: new Set<string>(), literal: new Set<string>() };
  const resolved = resolveValue(value, env, seen);
  return { value: resolved, missing: [...seen.missing], expanded: [...seen.expanded], literal: [...seen.literal] };
}

function resolveValue(value: unknown, env: NodeJS.ProcessEnv, seen: Seen): unknown {
  if (typeof value === "string") return resolveString(value, env, seen);
  if (Array.isArray(value)) return value.map((item) => resolveValue(item, env, seen));
  if (isPlainObject(value)) {
    // fromEntries defines own properties, so a JSON key "__proto__" stays a plain key.
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, resolveValue(item, env, seen)]));
  }
  return value;
}

/** The variable's string value: `$toString` or `$constructor` must not find the function every object inherits. */
function envValue(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const found: unknown = env[name];
  return typeof found === "string" ? found : undefined;
}

function resolveString(text: string, env: NodeJS.ProcessEnv, seen: Seen): string {
  const { missing, expanded } = seen;
  if (!text.includes("$")) return text;

  const whole = WHOLE_REFERENCE.exec(text);
  if (whole) {
    const name = whole[1] ?? whole[2] ?? "";
    const found = envValue(env, name);
    if (found === undefined) {
      missing.add(name);
      return text;
    }
    if (found !== "") expanded.add(found);
    return found;
  }

  let out = "";
  let i = 0;
  while (i < text.length) {
    const dollar = text.indexOf("$", i);
    if (dollar === -1) {
      out += text.slice(i);
      break;
    }
    out += text.slice(i, dollar);
    const next = text[dollar + 1];
    if (next === "$") {
      out += "$";
      i = dollar + 2;
      continue;
    }
    if (next === "{") {
      const braced = BRACED_NAME.exec(text.slice(dollar + 1));
      if (braced) {
        const name = braced[1] ?? "";
        const found = envValue(env, name);
        if (found === undefined) {
          missing.add(name);
          out += `$${braced[0]}`;
        } else {
          if (found !== "") expanded.add(found);
          out += found;
        }
        i = dollar + 1 + braced[0].length;
        continue;
      }
    }
    const bare = BARE_NAME.exec(text.slice(dollar + 1));
    if (bare) seen.literal.add(bare[0]);
    out += "$";
    i = dollar + 1;
  }
  return out;
}
