import { isPlainObject, setOwn } from "./plain-object";
import { utf8Text } from "./text";

export const REDACTED = "[redacted]";

/** The shortest base64 run worth blanking: shorter ones carry a few bits of a secret and match ordinary text. */
const MIN_BASE64_RUN = 4;
const CACHE_LIMIT = 512;
/** A secret's bytes sit at one of three offsets within base64's 3-byte groups. */
const BYTE_ALIGNMENTS = 3;

/**
 * Scrubs a fixed set of secret values out of text and JSON-like values, in every form a server might echo
 * them: raw, JSON-escaped (nested escaping too), URL-encoded (any hex case, `+` for space, double-encoded),
 * HTML character references, and base64/base64url at any byte alignment. There is no minimum length: a
 * credential of any size is blanked.
 */
export class Redactor {
  /** Redacts nothing. */
  static readonly none = new Redactor(null);

  private constructor(
    private readonly pattern: RegExp | null,
    /** Secrets too short for a base64 run of their own: found by decoding base64 tokens instead (see `text`). */
    private readonly shortBase64: readonly string[] = [],
  ) {}

  /** The redactor for these values (empty and duplicate values ignored); built once per distinct set. */
  static of(values: Iterable<string | undefined>): Redactor {
    const list = Array.isArray(values) ? (values as ReadonlyArray<string | undefined>) : [...values];
    // A call's list usually comes again as it was: found by its exact spelling before it is sorted and deduplicated
    // (oldest spelling out first: a hit does not reorder the map, and a spelling pushed out still hits `cache`).
    const spelled = JSON.stringify(list);
    const known = bySpelling.get(spelled);
    if (known) return known;
    const unique = [...new Set(list.filter((v): v is string => typeof v === "string" && v !== ""))];
    if (unique.length === 0) return Redactor.none;
    unique.sort();
    const key = JSON.stringify(unique);
    const redactor = touch(cache, key) ?? Redactor.build(unique);
    remember(cache, key, redactor);
    remember(bySpelling, spelled, redactor);
    return redactor;
  }

  /**
   * The redactor of these distinct values. Each line of a secret holding line breaks is one too: a server may echo it
   * a line at a time (one content block or one stderr write per line), and the pieces would meet again only after
   * each was scrubbed.
   */
  private static build(unique: readonly string[]): Redactor {
    const secrets = withSecretLines(unique);
    return new Redactor(buildPattern(secrets), secrets.filter(lacksBase64Run));
  }

  get isEmpty(): boolean {
    return this.pattern === null;
  }

  text(text: string): string {
    if (this.pattern === null || text === "") return text;
    this.pattern.lastIndex = 0;
    const scrubbed = text.replace(this.pattern, REDACTED);
    if (this.shortBase64.length === 0) return scrubbed;
    return scrubbed.replace(BASE64_TOKEN, (token) => {
      const span = this.shortSecretSpan(token);
      return span === undefined ? token : `${token.slice(0, span[0])}${REDACTED}${token.slice(span[1])}`;
    });
  }

  /**
   * Where, in a base64 token, an encoded value lies that decodes to text holding a secret too short for a base64 run
   * of its own (1–3 characters: `W7` in `dXNlcjpXNw==`, "user:W7"), at any byte offset. A value is a run of one
   * alphabet's digits (standard or URL-safe) read from where an encoder would have started it: the token's start, or,
   * in a token short enough not to be data, just after a '/', '+', '-' or '_' (a value glued to a path or a word:
   * `/auth/dXNl…`, `id-dXNl…`). A word decoded from its middle gives a byte or two of anything, and only text is
   * searched: the bytes of binary data (an image) hold any short value by chance.
   */
  private shortSecretSpan(token: string): [number, number] | undefined {
    if (token.length < 4) return undefined;
    const digits = token.replace(/=+$/, "");
    const starts = [0];
    if (token.length <= MAX_GLUED_TOKEN_CHARS) {
      for (let i = 0; i < digits.length - 1 && starts.length <= MAX_GLUED_STARTS; i += 1) {
        if (GLUE.has(digits[i])) starts.push(i + 1);
      }
    }
    for (const start of starts) {
      for (const alphabet of BASE64_ALPHABETS) {
        alphabet.lastIndex = start;
        const end = start + alphabet.exec(digits)![0].length;
        const spanEnd = end === digits.length ? token.length : end; // the padding goes with a value that ends the token
        if (spanEnd - start < 4) continue;
        const decoded = base64Text(digits.slice(start, end));
        if (decoded !== undefined && this.shortBase64.some((secret) => decoded.includes(secret))) return [start, spanEnd];
      }
    }
    return undefined;
  }

  /**
   * A JSON-like value with every string (object keys included) scrubbed, and every number or bigint whose decimal
   * text holds a secret (a PIN echoed as a JSON number) turned into the string REDACTED; other values as they are.
   * Arrays and plain objects holding nothing to scrub are returned as they are, not copied; the others are copies.
   * Other objects (class instances) go through `other`, which may return a scrubbed copy; by default they are kept.
   */
  deep<T>(value: T, other?: (value: object) => unknown): T {
    if (this.pattern === null) return value;
    return this.walk(value, other) as T;
  }

  private walk(value: unknown, other: ((value: object) => unknown) | undefined): unknown {
    if (typeof value === "string") return this.text(value);
    if (typeof value === "number" || typeof value === "bigint") {
      const decimal = String(value);
      return this.text(decimal) === decimal ? value : REDACTED;
    }
    if (Array.isArray(value)) {
      let out: unknown[] | undefined;
      for (let i = 0; i < value.length; i += 1) {
        const item = this.walk(value[i], other);
        if (out === undefined) {
          if (item === value[i]) continue;
          out = value.slice(0, i);
        }
        out.push(item);
      }
      return out ?? value;
    }
    if (isPlainObject(value)) {
      const source = value as Record<string, unknown>;
      const keys = Object.keys(source);
      let out: Record<string, unknown> | undefined;
      for (let i = 0; i < keys.length; i += 1) {
        const key = keys[i];
        const item = this.walk(source[key], other);
        const scrubbed = this.text(key);
        if (out === undefined) {
          if (item === source[key] && scrubbed === key) continue;
          out = {};
          for (let j = 0; j < i; j += 1) setOwn(out, keys[j], source[keys[j]]);
        }
        setOwn(out, scrubbed, item);
      }
      return out ?? value;
    }
    if (other !== undefined && value !== null && typeof value === "object") return other(value);
    return value;
  }
}

/** Redactors by their sorted, distinct values (least recently used out), and by the exact list they were asked for. */
const cache = new Map<string, Redactor>();
const bySpelling = new Map<string, Redactor>();

function touch(map: Map<string, Redactor>, key: string): Redactor | undefined {
  const found = map.get(key);
  if (found) {
    map.delete(key);
    map.set(key, found);
  }
  return found;
}

function remember(map: Map<string, Redactor>, key: string, redactor: Redactor): void {
  map.set(key, redactor);
  if (map.size > CACHE_LIMIT) map.delete(map.keys().next().value as string);
}

/** A run of base64 or base64url digits (with its padding) that may hide an encoded secret. */
const BASE64_TOKEN = /(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{2,}={0,2}/g;
/** A run of one base64 alphabet's digits from `lastIndex` (standard, then URL-safe). */
const BASE64_ALPHABETS = [/[A-Za-z0-9+/]*/y, /[A-Za-z0-9_-]*/y];
/** Where a value glued into a token may start: after one of these. */
const GLUE = new Set(["/", "+", "-", "_"]);
/** Tokens longer than this are data (an image): read from their start only. */
const MAX_GLUED_TOKEN_CHARS = 4096;
/** How many glued starts a token is read from, at most. */
const MAX_GLUED_STARTS = 32;

/** The text `digits` (base64 or base64url, unpadded) decode to, when they decode to printable UTF-8. */
function base64Text(digits: string): string | undefined {
  const whole = digits.length - (digits.length % 4 === 1 ? 1 : 0);
  return utf8Text(Buffer.from(digits.slice(0, whole), "base64"), true);
}

/** Whether a secret is too short for `base64Runs` to give it a run at every byte alignment (in both alphabets). */
function lacksBase64Run(secret: string): boolean {
  return base64Runs(secret).length < 2 * BYTE_ALIGNMENTS;
}

/** `values`, and each non-empty line of those that hold a line break (the same list when none does). */
function withSecretLines(values: readonly string[]): readonly string[] {
  const broken = values.filter((value) => /[\r\n]/.test(value));
  if (broken.length === 0) return values;
  return [...values, ...broken.flatMap((value) => value.split(/\r\n|\r|\n/).filter((line) => line !== ""))];
}

/** String values of a record (the run's `context.secrets`), the ones that can be echoed. */
export function recordSecrets(record: Readonly<Record<string, unknown>> | undefined): string[] {
  if (!record) return [];
  return Object.values(record).filter((v): v is string => typeof v === "string" && v !== "");
}

function buildPattern(secrets: readonly string[]): RegExp {
  const alternatives = new Set<string>();
  for (const secret of secrets) {
    alternatives.add([...secret].map(charPattern).join(""));
    // Base64 is often wrapped in lines (MIME at 76 columns, PEM at 64): a line break may fall anywhere in the run.
    for (const run of base64Runs(secret)) alternatives.add([...run].map(base64DigitPattern).join(BASE64_WRAP));
  }
  // Longest first, so a whole "Bearer <token>" goes before its token alone.
  const ordered = [...alternatives].sort((a, b) => b.length - a.length);
  return new RegExp(ordered.join("|"), "g");
}

/**
 * Every way one digit of a base64 run can appear in an echo: the run may come back URL-encoded (a query parameter) or
 * JSON-escaped (`\/`), where only `/` and `+` change.
 */
function base64DigitPattern(digit: string): string {
  if (digit === "/") return "(?:/|\\\\+/|%(?:25)?2[fF])";
  if (digit === "+") return "(?:\\+|%(?:25)?2[bB])";
  return digit; // A-Z a-z 0-9 - _
}

/** An optional line break inside a base64 run (LF or CRLF): raw, JSON-escaped or percent-encoded. */
const BASE64_WRAP = "(?:\\r?\\n|\\\\+(?:r\\\\+)?n|(?:%(?:25)?0[dD])?%(?:25)?0[aA])?";

const JSON_SHORT_ESCAPES: Record<string, string> = { '"': '"', "\\": "\\\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t" };

/** Every way one character of a secret can appear in an echo. */
function charPattern(ch: string): string {
  const cp = ch.codePointAt(0)!;
  const forms = [escapeRegExp(ch)];
  // JSON: \uXXXX (UTF-16 units), the short escapes, and any depth of nested escaping.
  const units = cp > 0xffff ? [0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff)] : [cp];
  forms.push(units.map((unit) => `\\\\+u${hexPattern(unit, 4)}`).join(""));
  const short = JSON_SHORT_ESCAPES[ch];
  if (short !== undefined) forms.push(ch === "\\" ? "\\\\+" : `\\\\+${escapeRegExp(short)}`);
  // A line break may come back as CRLF (a Windows or MIME server), raw or JSON-escaped.
  if (ch === "\n") forms.push("\\r\\n", "\\\\+r\\\\+n");
  // URL: percent-encoded UTF-8 (any hex case, possibly encoded twice); `+` for a space in forms.
  forms.push([...Buffer.from(ch, "utf8")].map((byte) => `%(?:25)?${hexPattern(byte, 2)}`).join(""));
  if (ch === " ") forms.push("\\+");
  // HTML character references.
  forms.push(`&#0*${cp};`, `&#[xX]0*${hexPattern(cp, 0)};`);
  const named = HTML_NAMED[ch];
  if (named) forms.push(`&${named};`);
  return `(?:${forms.join("|")})`;
}

const HTML_NAMED: Record<string, string> = { "&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "(?:apos|#39)" };

/** A hex number as a case-insensitive pattern, zero-padded to `width` digits. */
function hexPattern(n: number, width: number): string {
  return [...n.toString(16).padStart(width, "0")]
    .map((d) => (/[a-f]/.test(d) ? `[${d}${d.toUpperCase()}]` : d))
    .join("");
}

/**
 * The base64 (and base64url) characters that encode the secret alone when it sits at each of the three
 * byte alignments inside a larger encoded blob (a Basic credential, a JSON body sent as base64, …).
 */
function base64Runs(secret: string): string[] {
  const bytes = Buffer.from(secret, "utf8");
  const runs: string[] = [];
  for (let shift = 0; shift < BYTE_ALIGNMENTS; shift += 1) {
    const encoded = Buffer.concat([Buffer.alloc(shift), bytes]).toString("base64");
    const first = Math.ceil((8 * shift) / 6);
    const last = Math.floor((8 * (shift + bytes.length)) / 6);
    const run = encoded.slice(first, last);
    if (run.length < MIN_BASE64_RUN) continue;
    runs.push(run, run.replace(/\+/g, "-").replace(/\//g, "_"));
  }
  return runs;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&");
}
