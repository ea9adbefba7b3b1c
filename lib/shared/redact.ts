import { isPlainArray, isPlainObject, setOwn } from "./plain-object";
import { utf8Text } from "./text";

export const REDACTED = "[redacted]";

/** The shortest base64 run worth blanking: shorter ones carry a few bits of a secret and match ordinary text. */
const MIN_BASE64_RUN = 4;
const CACHE_LIMIT = 512;
/**
 * Pattern characters the caches may hold (compiled, V8 keeps ~40 bytes of code per character: a JWT-sized secret's
 * patterns are ~45,000 characters). Past it, the least recently used go first.
 */
const CACHE_PATTERN_CHARS = 1_000_000;
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

  /** The pattern characters this redactor holds (what it weighs in the cache). */
  readonly size: number;

  private constructor(
    /** One per secret, longest secret first; `null` redacts nothing. */
    private readonly matchers: readonly SecretMatcher[] | null,
    /** Secrets too short for a base64 run of their own: found by decoding base64 tokens instead (see `text`). */
    private readonly shortBase64: readonly string[] = [],
  ) {
    this.size = (matchers ?? []).reduce((sum, m) => sum + m.size, 0);
  }

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
    const redactor = cache.get(key) ?? Redactor.build(unique);
    cache.set(key, redactor);
    bySpelling.set(spelled, redactor);
    return redactor;
  }

  /**
   * The redactor of these distinct values. Each line of a secret holding line breaks is one too: a server may echo it
   * a line at a time (one content block or one stderr write per line), and the pieces would meet again only after
   * each was scrubbed.
   */
  private static build(unique: readonly string[], style: PatternStyle = "compact"): Redactor {
    const secrets = [...new Set([...withSecretLines(unique), ...unescapedForms(unique)])].sort((a, b) => b.length - a.length);
    return new Redactor(secrets.map((secret) => matcherOf(secret, style)), secrets.filter(lacksBase64Run));
  }

  /**
   * The redactor of these values with every pattern written and built as `of` did before its compile-time shortcuts
   * (see `PatternStyle`), never cached: a test checks that both find the same spans. Not exported from the package.
   */
  static reference(values: readonly string[]): Redactor {
    const unique = [...new Set(values.filter((v) => v !== ""))].sort();
    return unique.length === 0 ? Redactor.none : Redactor.build(unique, "reference");
  }

  get isEmpty(): boolean {
    return this.matchers === null;
  }

  text(text: string): string {
    if (this.matchers === null || text === "") return text;
    const spans = this.secretSpans(text);
    const scrubbed = spans.length === 0 ? text : replaceSpans(text, spans);
    if (this.shortBase64.length === 0) return scrubbed;
    return scrubbed.replace(BASE64_TOKEN, (token: string, at: number) => {
      const span = this.shortSecretSpan(token, scrubbed[at - 1] === "\\");
      return span === undefined ? token : `${token.slice(0, span[0])}${REDACTED}${token.slice(span[1])}`;
    });
  }

  /**
   * Where `text` holds a secret, in any form `text()` blanks, as `[from, to)` ranges, overlapping ones merged, in
   * order: for a caller that blanks them itself (a text cut over several blocks).
   */
  spans(text: string): Span[] {
    if (this.matchers === null || text === "") return [];
    const spans = this.secretSpans(text);
    if (this.shortBase64.length > 0) {
      for (const match of text.matchAll(BASE64_TOKEN)) {
        const span = this.shortSecretSpan(match[0], text[match.index! - 1] === "\\");
        if (span !== undefined) spans.push([match.index! + span[0], match.index! + span[1]]);
      }
    }
    return mergeSpans(spans);
  }

  /**
   * Where to cut `text`, a text cut off at its end (a stream closed under its writer) that may stop inside a secret,
   * at `from` at the latest (the caller's cut: its last word, where a secret's last character may stop inside its
   * encoding, `%2`, `\u00`), so that what is kept, scrubbed by `text()`, shows no first characters of a secret. Earlier
   * than `from` where the first whole characters of a secret, in any form `text()` blanks one character at a time
   * (raw, JSON-escaped, URL-encoded, HTML, shell-quoted, mixed), run from there up to `from`: a passphrase
   * (`correct horse battery staple`) cut in its third word, whose first words the last word alone would keep. And
   * at the start of a secret lying across the cut (one that ends inside the last word). Base64 and hex forms hold no
   * whitespace: they stop inside the last word.
   */
  cutOff(text: string, from: number): number {
    if (this.matchers === null || from <= 0) return Math.max(from, 0);
    let cut = from;
    // One budget for all the secrets: many secrets (hundreds of passphrases) each searched with a budget of its own
    // held the event loop for seconds on one cut line.
    const budget = { tries: FIRST_CHARS_TRIES };
    for (const matcher of this.matchers) cut = Math.min(cut, firstCharsStart(matcher.secret, text, from, budget));
    for (const [start, end] of this.spans(text)) if (start < cut && cut < end) return start;
    return cut;
  }

  private secretSpans(text: string): Span[] {
    const spans: Span[] = [];
    const encoded = MAY_BE_ENCODED.test(text);
    let markers: number | undefined;
    for (const { forms, plain } of this.matchers!) {
      if (!encoded && plain !== null) {
        collectSpans(plain, text, spans);
        continue;
      }
      for (const form of forms) {
        const checked = form.blocks.length > 0 && form.checks < CHECKED_SEARCHES;
        if (checked) form.checks += 1;
        if (!checked || charsMayMatch(form.blocks, text, (markers ??= markerCount(text)))) collectSpans(form.pattern, text, spans);
        else if (form.otherwise !== null) collectSpans(form.otherwise, text, spans);
      }
    }
    // Base64 wrapped in lines (MIME, PEM): its runs are matched again with the line breaks between digits taken out.
    if (MAY_WRAP.test(text)) {
      const unwrapped = unwrapBase64(text);
      if (unwrapped !== undefined) {
        const found: Span[] = [];
        for (const { runs } of this.matchers!) if (runs !== null) collectSpans(runs, unwrapped.text, found);
        for (const [from, to] of found) spans.push([unwrapped.origin[from], unwrapped.origin[to - 1] + 1]);
      }
    }
    return spans;
  }

  /**
   * Where, in a base64 token, an encoded value lies that decodes to text holding a secret too short for a base64 run
   * of its own (1–3 characters: `W7` in `dXNlcjpXNw==`, "user:W7"), at any byte offset. A value is a run of one
   * alphabet's digits (standard or URL-safe) read from where an encoder would have started it: the token's start, or,
   * in a token short enough not to be data, just after a '/', '+', '-' or '_' (a value glued to a path or a word:
   * `/auth/dXNl…`, `id-dXNl…`). A word decoded from its middle gives a byte or two of anything, and only text is
   * searched: the bytes of binary data (an image) hold any short value by chance.
   */
  private shortSecretSpan(token: string, afterBackslash: boolean): [number, number] | undefined {
    if (token.length < 4) return undefined;
    const digits = token.replace(/=+$/, "");
    const starts = [0];
    // After a backslash, the token's first letter may be an escape's (`\n` in a JSON string: `line\ndTpU…`), and the
    // value starts after it.
    if (afterBackslash && ESCAPE_LETTERS.has(digits[0])) starts.push(1);
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
   * Other objects (class instances, an `Array` subclass's among them when `other` is given) go through `other`, which
   * may return a scrubbed copy; by default they are kept.
   */
  deep<T>(value: T, other?: (value: object) => unknown): T {
    if (this.matchers === null) return value;
    return this.walk(value, other) as T;
  }

  private walk(value: unknown, other: ((value: object) => unknown) | undefined): unknown {
    if (typeof value === "string") return this.text(value);
    if (typeof value === "number" || typeof value === "bigint") {
      const decimal = String(value);
      return this.text(decimal) === decimal ? value : REDACTED;
    }
    // An instance of an Array subclass is a class instance: its JSON form may hold what its items do not.
    if (Array.isArray(value) && (other === undefined || isPlainArray(value))) {
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

/** Entries by key, least recently used first, bounded in count and in the pattern characters they hold. */
class WeighedCache<T extends { readonly size: number }> {
  private readonly entries = new Map<string, T>();
  private weight = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxWeight: number,
  ) {}

  /** The entry, made the most recently used. */
  get(key: string): T | undefined {
    const found = this.entries.get(key);
    if (found !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, found);
    }
    return found;
  }

  set(key: string, value: T): void {
    const old = this.entries.get(key);
    if (old !== undefined) {
      this.entries.delete(key);
      this.weight -= old.size;
    }
    this.entries.set(key, value);
    this.weight += value.size;
    while (this.entries.size > 1 && (this.entries.size > this.maxEntries || this.weight > this.maxWeight)) {
      const [oldestKey, oldest] = this.entries.entries().next().value as [string, T];
      this.entries.delete(oldestKey);
      this.weight -= oldest.size;
    }
  }
}

/** Redactors by their sorted, distinct values, and by the exact list they were asked for. */
const cache = new WeighedCache<Redactor>(CACHE_LIMIT, CACHE_PATTERN_CHARS);
const bySpelling = new WeighedCache<Redactor>(CACHE_LIMIT, CACHE_PATTERN_CHARS);

/** A run of base64 or base64url digits (with its padding) that may hide an encoded secret. */
const BASE64_TOKEN = /(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{2,}={0,2}/g;
/** A run of one base64 alphabet's digits from `lastIndex` (standard, then URL-safe). */
const BASE64_ALPHABETS = [/[A-Za-z0-9+/]*/y, /[A-Za-z0-9_-]*/y];
/** Where a value glued into a token may start: after one of these. */
const GLUE = new Set(["/", "+", "-", "_"]);
/** The letters of JSON's (and most languages') one-letter escapes: `\n`, `\t`, `\r`, `\b`, `\f`. */
const ESCAPE_LETTERS = new Set(["n", "t", "r", "b", "f"]);
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

const ESCAPE_SEQUENCE = /\\(?:u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}|["\\/bfnrt])/g;
const ESCAPED_CHARS: Readonly<Record<string, string>> = { b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

/** Decoded forms shorter than this are not added (a single letter would be blanked everywhere)... */
const MIN_UNESCAPED_CHARS = 4;
/**
 * ...unless they hold a character that JSON (a checkpoint, a chat API's request) or a log line's `escapeControls` writes
 * as an escape again: `a<TAB>b` is shown as `a\tb`, the secret as written; JSON also writes a lone surrogate
 * (`\ud800ab`) as its escape. Not `'`: neither escapes it.
 */
const ESCAPED_AGAIN =
  /[\u0000-\u001f\u007f-\u009f"\\\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * The values holding backslash escapes (`tok\tA1`, `a\x1bb`, `\u00e9`) as a server that decodes them would echo them
 * (JSON, C and Python decode them), whole: redacted only in its written form, the decoded one would be spelled out
 * again by whatever escapes it on its way to a log line or a checkpoint.
 */
function unescapedForms(values: readonly string[]): string[] {
  return values.flatMap((value) => {
    if (!value.includes("\\")) return [];
    const plain = value.replace(ESCAPE_SEQUENCE, (sequence) => {
      const kind = sequence[1];
      if (kind === "u" || kind === "x") return String.fromCharCode(parseInt(sequence.slice(2), 16));
      return ESCAPED_CHARS[kind] ?? kind;
    });
    const kept = plain.trim();
    return plain !== value && (kept.length >= MIN_UNESCAPED_CHARS || (kept !== "" && ESCAPED_AGAIN.test(plain))) ? [plain] : [];
  });
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

/**
 * One secret's patterns: `forms`, every form it may be echoed in (each character raw, JSON-escaped, percent-encoded or
 * as an HTML reference; its base64 runs), and `runs`, its base64 runs alone, for text whose line breaks inside base64
 * were taken out. A pattern per secret, compiled once per process: one pattern for a whole set of secrets, with a
 * possible line break after every base64 digit, took V8 seconds to compile for a single JWT-sized secret, and again
 * for every new set it was part of.
 */
interface SecretMatcher {
  /** The secret (a line of one holding line breaks, a decoded form, …). */
  readonly secret: string;
  /** Characters of its patterns. */
  readonly size: number;
  /** One pattern, or for a long secret several, each with a piece of its characters (see `MAX_PIECE_CHARS`). */
  readonly forms: readonly FormsPattern[];
  readonly runs: RegExp | null;
  /**
   * `forms` for text without `\\`, `%` or `&`, where every encoded form is impossible: the secret's pieces, base64 runs and hex
   * as they are (a much smaller pattern: the whole one is compiled only once a text needs it). `null` for a secret with a
   * space, a line break or a `'`, whose `+`, CRLF and shell-quoted (`'"'"'`) forms need no such character.
   */
  readonly plain: RegExp | null;
}

/** Whether a text may hold an encoded form: a JSON escape, percent-encoding or an HTML reference. */
const MAY_BE_ENCODED = /[\\%&]/;
/**
 * Characters with a form that holds no backslash, `%` or `&` (`+` for a space, CRLF for a line break, sh's `'"'"'` for
 * a quote): a secret holding one has neither the plain-text fast path nor the pre-check of `FormsPattern`.
 */
const UNMARKED_FORMS = /[ \r\n']/;

/**
 * One of a secret's `forms` patterns, with what tells, before it is compiled, that its characters' part cannot match a
 * text. Every form of a character but the character itself holds a backslash, `%` or `&` (of a secret without a space, a line
 * break or a `'`, whose `+`, CRLF and `'"'"'` forms hold none): where the characters' part matches, each of `blocks`
 * (runs of the secret's characters, apart) is in the text as it is or has one of those in its stretch of the match. So
 * a text holding fewer of those than blocks it lacks holds no match of it, and its pattern, whose compiling costs
 * milliseconds for each new secret, is not needed.
 */
interface FormsPattern {
  readonly pattern: RegExp;
  /** Empty: the pattern is always searched. */
  readonly blocks: readonly string[];
  /** Searched instead when the characters' part cannot match: the pattern's base64 and hex alternatives alone; `null` when it has none. */
  readonly otherwise: RegExp | null;
  /** Searches that were checked first (see `CHECKED_SEARCHES`). */
  checks: number;
}

/**
 * Searches of a pattern checked first: a secret used for more texts than one call scrubs is a lasting one (a static
 * header, a user's token), whose pattern is worth compiling; searched as it is, it scans a long text 3–4 times faster
 * than the check and the base64 alternatives alone.
 */
const CHECKED_SEARCHES = 16;

/** The characters of a secret in one of `blocks`. */
const BLOCK_CHARS = 4;

/** Whether the text, holding `markers` backslashes, `%` and `&`, may hold a match of the characters' part (see `FormsPattern`). */
function charsMayMatch(blocks: readonly string[], text: string, markers: number): boolean {
  if (blocks.length <= markers) return true;
  let missing = 0;
  for (const block of blocks) if (!text.includes(block) && (missing += 1) > markers) return false;
  return true;
}

function markerCount(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (code === 0x5c || code === 0x25 || code === 0x26) count += 1;
  }
  return count;
}

/**
 * Runs of `BLOCK_CHARS` characters of `chars` (a secret or a piece of one) each matched by a form of its own in its
 * pattern: not a backslash nor the character after a run of them (matched together, see `backslashRunPattern`).
 */
function literalBlocks(chars: string): string[] {
  const list = [...chars];
  const blocks: string[] = [];
  let run: string[] = [];
  for (let i = 0; i < list.length; i += 1) {
    if (list[i] === "\\" || list[i - 1] === "\\") {
      run = [];
      continue;
    }
    run.push(list[i]);
    if (run.length === BLOCK_CHARS) {
      blocks.push(run.join(""));
      run = [];
    }
  }
  return blocks;
}

const matcherCache = new WeighedCache<SecretMatcher>(4096, CACHE_PATTERN_CHARS);

/**
 * How a secret's patterns are written. `compact`: each character's forms built once per process, and an always-true
 * `(?=)` between the forms of consecutive characters from the third on. V8's regexp optimizer analyses a sequence of
 * alternations (each with its `\\+`, `0*` and `(?:25)?` loops) across the whole sequence, code generated again for
 * each way into the next character: 30 ms for a 40-character token, 40–130 ms for each 150-character piece of a JWT,
 * for a per-request secret new on every call. The empty lookahead matches everywhere, captures nothing and changes no
 * match; the analysis stops at it (~1 ms and ~4 ms, and a quarter to half the code). The first two characters stay
 * joined: the search for where a match may start still looks at both. A pattern is also searched (and so compiled)
 * only where a count tells that its characters' part may match (see `FormsPattern`). `reference`: as written before,
 * always searched, for the test that compares the two.
 */
type PatternStyle = "compact" | "reference";

/** The sources of a secret's patterns in a style (forms, base64 runs, plain forms): a test compares the two. Not exported from the package. */
export function patternSources(secret: string, style: PatternStyle): string[] {
  const { forms, runs, plain } = matcherOf(secret, style);
  return [...forms.map((form) => form.pattern.source), runs?.source ?? "", plain?.source ?? ""];
}

function matcherOf(secret: string, style: PatternStyle): SecretMatcher {
  const cached = style === "compact" ? matcherCache.get(secret) : undefined;
  if (cached) return cached;
  const base64 = base64Runs(secret);
  // Each list longest first, so a whole "Bearer <token>" goes before its token alone.
  const longestFirst = (list: readonly string[]) => [...new Set(list)].sort((a, b) => b.length - a.length);
  const runs = longestFirst(base64.flatMap(digitPieces).map((run) => [...run].map((digit, i) => base64DigitPattern(digit, i === 0)).join("")));
  // Hex of its UTF-8 bytes (a server's hex dump of what it received), in either case; from 4 bytes on (8 digits), so
  // that a short secret's hex does not blank ordinary numbers.
  const bytes = Buffer.from(secret, "utf8");
  const hex = bytes.length >= MIN_HEX_BYTES ? [bytes.toString("hex")] : [];
  const pieces = secretPieces(secret);
  const encodedSource = longestFirst([...runs, ...hex.flatMap(digitPieces).map(hexDigitsPattern)]);
  // Checked before compiling the characters' part (see `FormsPattern`): in the compact style, for a secret each of whose
  // characters' forms but the character itself holds a backslash, `%` or `&`.
  const unmarked = UNMARKED_FORMS.test(secret);
  const gated = style === "compact" && !unmarked;
  const formsSources: Array<{ source: string; blocks: readonly string[]; otherwise: string | null }> = [];
  if (pieces.length === 1) {
    const chars = charsPattern(secret, style);
    const alternatives = longestFirst([chars, ...encodedSource]);
    const otherwise = alternatives.filter((source) => source !== chars);
    const blocks = gated ? literalBlocks(secret) : [];
    formsSources.push({ source: alternatives.join("|"), blocks, otherwise: otherwise.length === 0 ? null : otherwise.join("|") });
  } else {
    for (const piece of pieces) formsSources.push({ source: charsPattern(piece, style), blocks: gated ? literalBlocks(piece) : [], otherwise: null });
    if (encodedSource.length > 0) formsSources.push({ source: encodedSource.join("|"), blocks: [], otherwise: null });
  }
  const runsSource = runs.join("|");
  // What the full patterns can match in a text without those characters, piece for piece: a long secret's echo cut
  // short is blanked by its first pieces here too, and hex in any case.
  const plainSource = unmarked
    ? null
    : longestFirst([...pieces.map(escapeRegExp), ...base64.flatMap(digitPieces).map(escapeRegExp), ...hex.flatMap(digitPieces).map(hexDigitsPattern)]).join("|");
  const matcher: SecretMatcher = {
    secret,
    size: formsSources.reduce((sum, form) => sum + form.source.length + (form.otherwise?.length ?? 0), 0) + runsSource.length + (plainSource?.length ?? 0),
    forms: formsSources.map((form) => ({
      pattern: new RegExp(form.source, "g"),
      blocks: form.blocks,
      otherwise: form.otherwise === null ? null : new RegExp(form.otherwise, "g"),
      checks: 0,
    })),
    runs: runs.length === 0 ? null : new RegExp(runsSource, "g"),
    plain: plainSource === null ? null : new RegExp(plainSource, "g"),
  };
  if (style === "compact") matcherCache.set(secret, matcher);
  return matcher;
}

/**
 * The most characters one character of a secret takes in a form `charForms` allows (a 4-byte UTF-8 character URL-encoded
 * twice): where the first characters of a secret ending at a cut may begin is searched no farther back. Longer forms
 * (JSON escaped more than three times over, an HTML reference padded with zeros) are not found there.
 */
const MAX_CHAR_FORM_CHARS = 20;
/**
 * Sticky-pattern tries (and first-character matches) one `cutOff` may make for all its secrets together; past it, the
 * whole stretch searched for the secret at hand is taken.
 */
const FIRST_CHARS_TRIES = 200_000;
/** The tries made by `firstCharsStart` since the module loaded: read by tests through `firstCharsTriesMade` only. */
let triesMade = 0;

/** The count of tries `cutOff` has made (all redactors): a test bounds the work of one call with it. Not exported from the package. */
export function firstCharsTriesMade(): number {
  return triesMade;
}

/** A secret's characters, each as its forms (sticky patterns), built the first time a search reaches it. */
class FirstChars {
  /** Where the secret may begin: its first character in any form. */
  readonly first: RegExp;
  /** How many characters a search may match: all but the last. */
  readonly count: number;
  private readonly chars: string[];
  private readonly built: RegExp[][] = [];

  constructor(secret: string) {
    this.chars = [...secret];
    this.count = this.chars.length - 1;
    this.first = new RegExp(charPattern(this.chars[0], true), "g");
  }

  forms(index: number): readonly RegExp[] {
    return (this.built[index] ??= charForms(this.chars[index], index === 0).map((form) => new RegExp(form, "y")));
  }
}

/** Built when a cut text first needs them (rarely: a stream closed under its writer); a few secrets' worth are kept. */
const firstCharsCache = new Map<string, FirstChars>();

function firstCharsOf(secret: string): FirstChars {
  let found = firstCharsCache.get(secret);
  if (found === undefined) {
    found = new FirstChars(secret);
    if (firstCharsCache.size >= 64) firstCharsCache.delete(firstCharsCache.keys().next().value as string);
    firstCharsCache.set(secret, found);
  }
  return found;
}

/**
 * The earliest index from which `text` up to `end` is the first whole characters of `secret` (at least one, not all),
 * each in any form `charForms` allows; `end` when there is none. Every form of each next character is tried at every
 * place the characters before it may end, so forms of different lengths (a `'` raw or as `'\''`) are all followed.
 * Each try is taken from `budget` (shared by a `cutOff` call's secrets); when it runs out (text built to match first
 * characters in many overlapping ways, or many secrets) the whole stretch searched is taken.
 */
function firstCharsStart(secret: string, text: string, end: number, budget: { tries: number }): number {
  const chars = firstCharsOf(secret);
  if (chars.count === 0) return end;
  const { first } = chars;
  const lowest = Math.max(0, end - MAX_CHAR_FORM_CHARS * chars.count);
  // Spent on the secrets before: each one left takes its whole stretch, without a try.
  if (budget.tries < 0) return lowest;
  // Where the characters matched so far may end, each with the earliest index they began at; first, where it may begin.
  let reached = new Map<number, number>();
  const stretch = text.slice(0, end);
  first.lastIndex = lowest;
  for (let match = first.exec(stretch); match !== null; match = first.exec(stretch)) {
    if (!spend(budget)) return lowest;
    reached.set(match.index, match.index);
    first.lastIndex = match.index + 1;
  }
  let best = end;
  for (let index = 0; index < chars.count; index += 1) {
    const next = new Map<number, number>();
    for (const [at, start] of reached) {
      if (start >= best) continue;
      for (const form of chars.forms(index)) {
        if (!spend(budget)) return lowest;
        form.lastIndex = at;
        if (!form.test(text) || form.lastIndex > end) continue;
        if (form.lastIndex === end) best = Math.min(best, start);
        else if ((next.get(form.lastIndex) ?? end) > start) next.set(form.lastIndex, start);
      }
    }
    if (next.size === 0) break;
    reached = next;
  }
  return best;
}

/** One try taken from `budget`: false when none was left. */
function spend(budget: { tries: number }): boolean {
  triesMade += 1;
  return (budget.tries -= 1) >= 0;
}

export type Span = [number, number];

/** `spans` sorted, overlapping ones merged. */
function mergeSpans(spans: Span[]): Span[] {
  spans.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  const merged: Span[] = [];
  for (const span of spans) {
    const last = merged[merged.length - 1];
    if (last !== undefined && span[0] < last[1]) last[1] = Math.max(last[1], span[1]);
    else merged.push([span[0], span[1]]);
  }
  return merged;
}

/**
 * Every match of `pattern`, overlapping ones included: a secret's scan resumes one character after each match, not
 * after its end. A secret's pattern runs on its own, so a match it finds inside another secret (`00` + `00` in
 * `user:00` + `0000`) must not make it skip the occurrence that starts in the middle of that match.
 */
function collectSpans(pattern: RegExp, text: string, into: Span[]): void {
  pattern.lastIndex = 0;
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    into.push([match.index, match.index + match[0].length]);
    pattern.lastIndex = match.index + 1;
  }
}

/** `text` with each span (overlapping ones merged) replaced by REDACTED. */
function replaceSpans(text: string, spans: Span[]): string {
  spans.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  const parts: string[] = [];
  let copied = 0;
  let open: Span | undefined;
  for (const span of spans) {
    if (open !== undefined && span[0] < open[1]) {
      open[1] = Math.max(open[1], span[1]);
      continue;
    }
    if (open !== undefined) {
      parts.push(text.slice(copied, open[0]), REDACTED);
      copied = open[1];
    }
    open = [span[0], span[1]];
  }
  if (open !== undefined) parts.push(text.slice(copied, open[0]), REDACTED);
  parts.push(text.slice(open === undefined ? copied : open[1]));
  return parts.join("");
}

/** A line break inside base64 (LF or CRLF): raw, JSON-escaped or percent-encoded. */
const BASE64_WRAP = /(?<=[A-Za-z0-9+/_-])(?:\r?\n|\\+(?:r\\+)?n|(?:%(?:25)?0[dD])?%(?:25)?0[aA])(?=[A-Za-z0-9+/_%\\-])/g;
/** Whether a text may hold such a line break at all (most do not: then nothing is unwrapped). */
const MAY_WRAP = /\n|(?<!\\)\\+n|%(?:25)?0[aA]/;

/**
 * Put before an escape's run of backslashes where a match may start: it starts only where the run does. Tried from
 * every backslash of a long run, a greedy `\\+` gave back one character at a time (quadratic: seconds for 40,000).
 */
const RUN_START = "(?<!\\\\)";

/** The text without the line breaks that stand between two base64 digits, with each kept character's index in `text`. */
function unwrapBase64(text: string): { text: string; origin: Int32Array } | undefined {
  BASE64_WRAP.lastIndex = 0;
  let match = BASE64_WRAP.exec(text);
  if (match === null) return undefined;
  const origin = new Int32Array(text.length);
  const parts: string[] = [];
  let kept = 0;
  let copied = 0;
  for (; match !== null; match = BASE64_WRAP.exec(text)) {
    for (let i = copied; i < match.index; i += 1) origin[kept++] = i;
    parts.push(text.slice(copied, match.index));
    copied = match.index + match[0].length;
  }
  for (let i = copied; i < text.length; i += 1) origin[kept++] = i;
  parts.push(text.slice(copied));
  return { text: parts.join(""), origin };
}

/**
 * Every way one digit of a base64 run can appear in an echo: the run may come back URL-encoded (a query parameter) or
 * JSON-escaped (`\/`), where only `/` and `+` change. `first`: the run's first digit, where a match may start.
 */
function base64DigitPattern(digit: string, first = false): string {
  if (digit === "/") return `(?:/|${first ? RUN_START : ""}\\\\+/|%(?:25)?2[fF])`;
  if (digit === "+") return "(?:\\+|%(?:25)?2[bB])";
  return digit; // A-Z a-z 0-9 - _
}

/**
 * The most characters of a secret one pattern holds: V8 compiles a pattern recursively along its sequence, and a
 * sequence of a few thousand characters' forms overflowed the stack (an error whose message is the pattern, secret and
 * all). A longer secret is matched a piece at a time: each piece found is blanked (a few hundred characters of a
 * secret), so the whole is blanked in any form its pieces are.
 */
const MAX_PIECE_CHARS = 256;

/** The secret cut in pieces of about `MAX_PIECE_CHARS` characters, none of them ending in a backslash (see `charsPattern`). */
function secretPieces(secret: string): string[] {
  const chars = [...secret];
  const size = pieceStep(chars.length, MAX_PIECE_CHARS) + 1;
  const pieces: string[] = [];
  for (let from = 0; from < chars.length; ) {
    let to = Math.min(from + size, chars.length);
    while (to < chars.length && chars[to - 1] === "\\") to += 1;
    // A short last piece would be blanked wherever it stands (a letter): it goes with the one before.
    if (chars.length - to < size / 2) to = chars.length;
    pieces.push(chars.slice(from, to).join(""));
    // The next piece starts with this one's last character: the two overlap where they are found together, and the
    // whole is blanked as one.
    from = to < chars.length ? to - 1 : to;
  }
  return pieces;
}

/** The most digits of a base64 run or a hex form one pattern holds (see `MAX_PIECE_CHARS`). */
const MAX_PIECE_DIGITS = 1024;

/** `digits` in pieces of at most `MAX_PIECE_DIGITS`, of about the same length (none short enough to match by chance). */
function digitPieces(digits: string): string[] {
  if (digits.length <= MAX_PIECE_DIGITS) return [digits];
  const step = pieceStep(digits.length, MAX_PIECE_DIGITS);
  // Each overlapping the next by a digit, as the pieces of `secretPieces` do.
  return Array.from({ length: Math.ceil((digits.length - 1) / step) }, (_, i) => digits.slice(i * step, i * step + step + 1));
}

/** How far apart pieces of at most `max` of `length` characters start, overlapping by one, all about as long. */
function pieceStep(length: number, max: number): number {
  if (length <= max) return length;
  return Math.ceil((length - 1) / Math.ceil((length - 1) / (max - 1)));
}

/**
 * Every way a secret's characters can appear in an echo, one after the other (see `charForms`), written so that a text
 * matches in at most one way (a backtracking engine takes time exponential in the ways a text that fails in the end
 * matches): a run of backslashes is one unit, the whole run of the text (JSON escaping at any depth), at least as long
 * as the secret's, with what follows it; an escaped quote does not follow an unescaped one (`'\''`, sh's quoted
 * quote, is not also three quotes).
 */
function charsPattern(secret: string, style: PatternStyle): string {
  const chars = [...secret];
  const parts: string[] = [];
  const charOf = style === "compact" ? knownCharPattern : charPattern;
  for (let i = 0; i < chars.length; ) {
    if (chars[i] !== "\\") {
      parts.push(charOf(chars[i], i === 0, chars[i - 1]));
      i += 1;
      continue;
    }
    let count = 1;
    while (chars[i + count] === "\\") count += 1;
    const next = chars[i + count] as string | undefined;
    parts.push(backslashRunPattern(count, next, i === 0));
    i += count + (next === undefined ? 0 : 1);
  }
  if (style === "reference" || parts.length <= 2) return parts.join("");
  return parts[0] + parts[1] + UNIT_BREAK + parts.slice(2).join(UNIT_BREAK);
}

/** Between the patterns of two characters of a secret: matches everywhere (see `PatternStyle`). */
const UNIT_BREAK = "(?=)";

/** The forms of a backslash other than itself repeated: each as an escape, percent-encoded or an HTML reference. */
const ENCODED_BACKSLASH = ["u005[cC]", "%(?:25)?5[cC]", "&#0*92;", "&#[xX]0*5[cC];"];

/**
 * `count` backslashes of a secret and the character after them, if any: either each backslash encoded (`\u005c`,
 * `%5C`, `&#92;`), then the character in any form; or the text's whole run of backslashes (at least `count` of them:
 * JSON escaping doubles each, at any depth) followed by that character in a form that is not an escape, or, past
 * `count` backslashes, by the rest of one of its escapes (`\\\"`). A run mixing the two (`\\\u005c` for two) is not
 * matched: no encoder writes one.
 */
function backslashRunPattern(count: number, next: string | undefined, first: boolean): string {
  const start = first ? RUN_START : "";
  let whole = `${start}\\\\{${count},}(?!\\\\)`;
  if (next !== undefined) {
    const forms = charForms(next, false);
    const plain = forms.filter((form) => !form.startsWith(ESCAPE_RUN));
    // An escape's rest that is also a form on its own (`"`, `/`) adds no text: it would only add a second way to match.
    const rests = forms.filter((form) => form.startsWith(ESCAPE_RUN)).map((form) => form.slice(ESCAPE_RUN.length)).filter((rest) => !plain.includes(rest));
    whole += `(?:${[...plain, ...(rests.length === 0 ? [] : [`(?<=\\\\{${count + 1}})(?:${rests.join("|")})`])].join("|")})`;
  }
  const encoded = (at: number) => `(?:${ENCODED_BACKSLASH.map((form, i) => (i === 0 ? `${at === 0 ? start : ""}${ESCAPE_RUN}${form}` : form)).join("|")})`;
  const each = encoded(0) + (count > 1 ? `${encoded(1)}{${count - 1}}` : "") + (next === undefined ? "" : charPattern(next));
  // Each encoded first: a run that ends the secret takes a whole `\u005c`, not only its backslash.
  return `(?:${each}|${whole})`;
}

/** How an escape's backslashes begin in a form's pattern: one or more (nested escaping). */
const ESCAPE_RUN = "\\\\+";

const JSON_SHORT_ESCAPES: Record<string, string> = { '"': '"', "\\": "\\\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t" };

/** Every way one character of a secret can appear in an echo. `first`: the secret's first, where a match may start. */
function charPattern(ch: string, first = false, previous?: string): string {
  return `(?:${charForms(ch, first, previous).join("|")})`;
}

/** `charPattern`'s patterns by character: a secret's characters come from a few dozen, each built once. */
const charPatterns = new Map<string, string>();
const CHAR_PATTERNS_LIMIT = 4096;

function knownCharPattern(ch: string, first: boolean, previous: string | undefined): string {
  // What `charForms` reads: the character, whether it is the first, and, for a quote, whether a quote is before it.
  const key = `${first ? 1 : 0}${ch === "'" && previous === "'" ? 1 : 0}${ch}`;
  let pattern = charPatterns.get(key);
  if (pattern === undefined) {
    pattern = charPattern(ch, first, previous);
    if (charPatterns.size >= CHAR_PATTERNS_LIMIT) charPatterns.clear();
    charPatterns.set(key, pattern);
  }
  return pattern;
}

/**
 * The patterns of `charPattern`, one per form. `previous`: the secret's character before, when it is matched as part of
 * the secret's pattern (not on its own).
 */
function charForms(ch: string, first: boolean, previous?: string): string[] {
  const cp = ch.codePointAt(0)!;
  const forms = [escapeRegExp(ch)];
  const escape = first ? RUN_START : "";
  // JSON: \uXXXX (UTF-16 units), the short escapes, and any depth of nested escaping.
  const units = cp > 0xffff ? [0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff)] : [cp];
  forms.push(escape + units.map((unit) => `\\\\+u${hexPattern(unit, 4)}`).join(""));
  const short = JSON_SHORT_ESCAPES[ch];
  if (short !== undefined) forms.push(escape + (ch === "\\" ? "\\\\+" : `\\\\+${escapeRegExp(short)}`));
  // A quote as util.inspect and Python's repr escape it inside '…' (a value holding both kinds of quote: `'a"b\'c'`).
  // Between an unescaped quote and a quote, not after a quote: `'\''` is that quote in sh's form, not also three quotes.
  if (ch === "'") forms.push(`${escape}${previous === "'" ? "(?:(?<!(?<!\\\\)')\\\\+'|(?<=(?<!\\\\)')\\\\+'(?!'))" : "\\\\+'"}`);
  // A quote as shells quote it inside '…': '\'' (sh, bash's `set -x`) and '"'"' (Python's shlex.quote), JSON-escaped too;
  // tried first, so a secret that ends with the quote takes the whole form, not its first '.
  if (ch === "'") forms.unshift("'\\\\+''", `'\\\\*"'\\\\*"'`);
  // A control character as Node's util.inspect (an error quoting a value: `'tok\x00en'`) and Python's repr write it.
  if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) forms.push(`${escape}\\\\+x${hexPattern(cp, 2)}`);
  // A line break may come back as CRLF (a Windows or MIME server), raw or JSON-escaped.
  if (ch === "\n") forms.push("\\r\\n", `${escape}\\\\+r\\\\+n`);
  // URL: percent-encoded UTF-8 (any hex case, possibly encoded twice); `+` for a space in forms.
  forms.push([...Buffer.from(ch, "utf8")].map((byte) => `%(?:25)?${hexPattern(byte, 2)}`).join(""));
  if (ch === " ") forms.push("\\+");
  // HTML character references.
  forms.push(`&#0*${cp};`, `&#[xX]0*${hexPattern(cp, 0)};`);
  const named = HTML_NAMED[ch];
  if (named) forms.push(`&${named};`);
  return forms;
}

/**
 * Named references. A quote's `&#39;`, which escapers write for `&apos;`, is its decimal reference already: a second
 * form matching the same text would make each quote of a text that fails in the end two tries (2^n for n quotes).
 */
const HTML_NAMED: Record<string, string> = { "&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos" };

/** A secret shorter than this (in UTF-8 bytes) has no hex form matched. */
const MIN_HEX_BYTES = 4;

/** Hex digits as a pattern matching each digit in either case. */
function hexDigitsPattern(hex: string): string {
  return [...hex].map((d) => (/[a-f]/.test(d) ? `[${d}${d.toUpperCase()}]` : d)).join("");
}

/** A hex number as a case-insensitive pattern, zero-padded to `width` digits. */
function hexPattern(n: number, width: number): string {
  return hexDigitsPattern(n.toString(16).padStart(width, "0"));
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
