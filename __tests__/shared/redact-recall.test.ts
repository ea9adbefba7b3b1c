/**
 * Recall of the redactor over generated secrets: a few hundred values mixing letters, digits, spaces and the characters
 * encoders treat specially, of 1–600 characters (past the 256-character pieces a long secret is matched in, some with a
 * backslash run where a piece ends), each encoded by real encoders (JavaScript's in this process, Python's in one
 * `python3` child over the whole batch), embedded in text, scrubbed. What is left must hold neither the encoded form nor,
 * decoded with the same decoder, the secret. The sequence is a fixed-seed generator's: every run sees the same secrets.
 * The scrubs run in a worker (see `workerRunner`): a pattern that backtracks exponentially fails the test at jest's
 * timeout instead of hanging the run.
 */
import { describe, expect, test } from "@jest/globals";
import { execFileSync } from "node:child_process";
import { libModule, workerRunner } from "../fixtures/worker";
import { REDACTED } from "../../lib/shared";

const inWorker = workerRunner();

/** mulberry32: a small fixed-seed generator (no Math.random: the same secrets every run). */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const random = generator(20261207);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
const between = (low: number, high: number): number => low + Math.floor(random() * (high - low + 1));

const LETTERS = [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"];
const AWKWARD = ["\\", "'", '"', "%", "&", "+", "/", "<", ">", "#", "?", "=", ":", "@", "é", "日", "😀", "\t", "\n", "\r", " "];

/** Backslashes and quotes, whose forms overlap each other's (`\\\"`, `'\\''`), more often than the rest. */
const DENSE = ["\\", "\\", "'", "'", '"', "\t", "é", " "];

function secretOf(length: number, dense = false): string {
  return Array.from({ length }, () => (random() < 0.6 ? pick(LETTERS) : pick(dense ? DENSE : AWKWARD))).join("");
}

/** Where the redactor's first piece of a secret of `length` characters ends (its `secretPieces`), for a long secret. */
function firstPieceEnd(length: number): number {
  const step = Math.ceil((length - 1) / Math.ceil((length - 1) / 255));
  return step + 1;
}

function generatedSecrets(): string[] {
  const secrets: string[] = [];
  for (let i = 0; i < 240; i += 1) secrets.push(secretOf(random() < 0.5 ? between(1, 12) : between(13, 80)));
  for (let i = 0; i < 48; i += 1) secrets.push(secretOf(between(1, 24), true));
  for (let i = 0; i < 24; i += 1) secrets.push(secretOf(between(257, 600), random() < 0.5));
  // A backslash run across, before or after the first piece's end.
  for (let i = 0; i < 24; i += 1) {
    const length = between(260, 600);
    const chars = [...secretOf(length, random() < 0.5)];
    const end = firstPieceEnd(chars.length);
    const run = between(1, 4);
    const at = end - run + between(-2, 2);
    for (let j = 0; j < run; j += 1) chars[at + j] = "\\";
    secrets.push(chars.join(""));
  }
  // A short secret is blanked wherever it stands: one of the characters of "[redacted]" would blank the marker's own.
  return [...new Set(secrets)].filter((secret) => secret.trim() !== "" && !REDACTED.includes(secret));
}

interface PythonForms {
  readonly dumpsAscii: string;
  readonly dumpsUnicode: string;
  readonly repr: string;
  readonly shlex: string;
  readonly quote: string;
  readonly quoteSafe: string;
  readonly quotePlus: string;
  readonly html: string;
  readonly b64: string;
  readonly b64url: string;
}

const PYTHON = `
import base64, html, json, shlex, sys, urllib.parse
out = []
for s in json.load(sys.stdin):
    b = s.encode("utf-8")
    out.append({
        "dumpsAscii": json.dumps(s), "dumpsUnicode": json.dumps(s, ensure_ascii=False), "repr": repr(s),
        "shlex": shlex.quote(s), "quote": urllib.parse.quote(s), "quoteSafe": urllib.parse.quote(s, safe=""),
        "quotePlus": urllib.parse.quote_plus(s), "html": html.escape(s),
        "b64": base64.b64encode(b).decode(), "b64url": base64.urlsafe_b64encode(b).decode(),
    })
json.dump(out, sys.stdout)
`;

/** How an encoding is read back: the text each remaining piece of a scrubbed text stands for. */
type Decoder = (text: string) => string;

const identity: Decoder = (text) => text;

/** JSON string escapes (and Python's, which add \\x, \\U and \\'), undone once; anything else as it is. */
const unescape: Decoder = (text) =>
  text.replace(/\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|["\\/bfnrt'])/g, (_, sequence: string) => {
    const kind = sequence[0];
    if (kind === "u" || kind === "U" || kind === "x") return String.fromCodePoint(parseInt(sequence.slice(1), 16));
    return ({ b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" } as Record<string, string>)[kind] ?? kind;
  });

const percent = (plus: boolean): Decoder => (text) =>
  (plus ? text.replace(/\+/g, " ") : text).replace(/(?:%[0-9a-fA-F]{2})+/g, (run) => Buffer.from(run.replace(/%/g, ""), "hex").toString("utf8"));

const unhtml: Decoder = (text) =>
  text.replace(/&(?:#(\d+)|#[xX]([0-9a-fA-F]+)|(amp|lt|gt|quot|apos));/g, (_, dec?: string, hex?: string, name?: string) => {
    if (dec !== undefined) return String.fromCodePoint(Number(dec));
    if (hex !== undefined) return String.fromCodePoint(parseInt(hex, 16));
    return ({ amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" } as Record<string, string>)[name!];
  });

const unshell: Decoder = (text) => text.replace(/'\\''|'"'"'/g, "'");

const twice = (decoder: Decoder): Decoder => (text) => decoder(decoder(text));

/** Each base64 run decoded from each of its first four characters (one of them is where a byte group starts). */
const unbase64: Decoder = (text) =>
  [...text.matchAll(/[A-Za-z0-9+/_-]+/g)]
    .flatMap(([run]) => [0, 1, 2, 3].map((from) => Buffer.from(run.slice(from).replace(/-/g, "+").replace(/_/g, "/"), "base64").toString("latin1")))
    .join("\u0000");

const unhex: Decoder = (text) =>
  [...text.matchAll(/[0-9a-fA-F]+/g)].flatMap(([run]) => [0, 1].map((from) => Buffer.from(run.slice(from), "hex").toString("latin1"))).join("\u0000");

interface Encoding {
  readonly name: string;
  readonly encoded: string;
  readonly decode: Decoder;
  /** What the decoded text is searched for (the secret's UTF-8 bytes as latin1 for the byte forms). */
  readonly target: string;
}

const json = (value: string): string => JSON.stringify(value);
const htmlNamed = (value: string): string =>
  value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
const htmlNumeric = (value: string, hex: boolean): string =>
  [...value].map((ch) => (/[A-Za-z0-9]/.test(ch) ? ch : hex ? `&#x${ch.codePointAt(0)!.toString(16)};` : `&#${ch.codePointAt(0)};`)).join("");

function encodingsOf(secret: string, python: PythonForms): Encoding[] {
  const bytes = Buffer.from(secret, "utf8");
  const latin1 = bytes.toString("latin1");
  const text = (name: string, encoded: string, decode: Decoder): Encoding => ({ name, encoded, decode, target: secret });
  const list = [
    text("raw", secret, identity),
    text("JSON.stringify", json(secret), unescape),
    text("JSON.stringify twice", json(json(secret)), twice(unescape)),
    text("JSON.stringify three times", json(json(json(secret))), (t) => unescape(unescape(unescape(t)))),
    text("encodeURIComponent", encodeURIComponent(secret), percent(false)),
    text("encodeURI", encodeURI(secret), percent(false)),
    text("form encoding", new URLSearchParams({ v: secret }).toString().slice(2), percent(true)),
    text("encodeURIComponent twice", encodeURIComponent(encodeURIComponent(secret)), twice(percent(false))),
    text("HTML named", htmlNamed(secret), unhtml),
    text("HTML decimal", htmlNumeric(secret, false), unhtml),
    text("HTML hex", htmlNumeric(secret, true), unhtml),
    text("sh quoted", `'${secret.replace(/'/g, "'\\''")}'`, unshell),
    text("python json.dumps", python.dumpsAscii, unescape),
    text("python json.dumps ensure_ascii=False", python.dumpsUnicode, unescape),
    text("python repr", python.repr, unescape),
    text("python shlex.quote", python.shlex, unshell),
    text("python quote", python.quote, percent(false)),
    text("python quote safe=''", python.quoteSafe, percent(false)),
    text("python quote_plus", python.quotePlus, percent(true)),
    text("python html.escape", python.html, unhtml),
  ];
  // Base64 forms: alone (Python's), and at each byte offset inside a longer encoded value.
  const bytesForm = (name: string, encoded: string, decode: Decoder): Encoding => ({ name, encoded, decode, target: latin1 });
  list.push(bytesForm("python b64encode", python.b64, unbase64), bytesForm("python urlsafe_b64encode", python.b64url, unbase64));
  for (const prefix of ["u:", "us:", "use:"]) {
    const blob = Buffer.concat([Buffer.from(prefix), bytes, Buffer.from(":x")]);
    list.push(bytesForm(`base64 after ${prefix.length} bytes`, blob.toString("base64"), unbase64));
    list.push(bytesForm(`base64url after ${prefix.length} bytes`, blob.toString("base64url"), unbase64));
  }
  if (bytes.length >= 4) list.push(bytesForm("hex", bytes.toString("hex"), unhex), bytesForm("HEX", bytes.toString("hex").toUpperCase(), unhex));
  return list;
}

/** Where an encoded form is put: glued to words, inside JSON, at the start, at the end, alone. */
const PLACES: ReadonlyArray<(encoded: string) => string> = [
  (e) => e,
  (e) => `${e} trailing words`,
  (e) => `leading words ${e}`,
  (e) => `glued${e}glued`,
  (e) => `{"result":"${e}","n":1}`,
  (e) => `token=${e}&next=1`,
  (e) => `<p>${e}</p>`,
  (e) => `'${e}'`,
  (e) => `"${e}"`,
  (e) => `{"log":"line\\n${e}\\tend"}`,
  (e) => `{"inner":"{\\"v\\":\\"${e}\\"}"}`,
  (e) => `${e}${e}`,
];

interface Case {
  readonly secret: string;
  readonly encoding: string;
  readonly place: number;
  readonly text: string;
}

/**
 * The byte forms of a secret this short (1–3 bytes, base64 or hex) match ordinary data by chance: they are blanked
 * from where a token starts only (see `Redactor.text`), and a decoded remainder is not searched for them.
 */
const MIN_DECODED_BYTES = 4;

/** What is wrong with a scrubbed case: the encoded form, or the secret decoded, still in it; undefined when nothing. */
function missOf(testCase: Case, form: Encoding, scrubbed: string): string | undefined {
  const pieces = scrubbed.split(REDACTED);
  if (pieces.some((piece) => piece.includes(form.encoded))) return "encoded form kept";
  if (form.target !== testCase.secret && Buffer.byteLength(testCase.secret) < MIN_DECODED_BYTES) return undefined;
  // A secret the surrounding text holds by itself (a letter) is not a miss.
  const bare = PLACES[testCase.place]("").split(REDACTED);
  if (bare.some((piece) => form.decode(piece).includes(form.target))) return undefined;
  if (pieces.some((piece) => form.decode(piece).includes(form.target))) return "secret decoded from what is left";
  return undefined;
}

/** Where a base64 value does not start a token: glued to letters, after itself. */
const INSIDE_A_TOKEN = new Set([3, 11]);

/**
 * Cases the redactor does not blank, by design: the base64 of a secret of 1–3 UTF-8 bytes has no run of digits of its
 * own at every byte offset and is found by decoding a token from its start (or after `/`, `+`, `-`, `_`, or an escape's
 * letter after a backslash), never from inside a word, where a few bits match ordinary text by chance.
 */
function excluded(secret: string, encoding: string, place: number): boolean {
  return /b64|base64/.test(encoding) && Buffer.byteLength(secret) <= 3 && INSIDE_A_TOKEN.has(place);
}

describe("Redactor: recall over generated secrets and real encoders", () => {
  test("every encoding of every generated secret is blanked wherever it is put", async () => {
    const secrets = generatedSecrets();
    const python = JSON.parse(execFileSync("python3", ["-c", PYTHON], { input: JSON.stringify(secrets), maxBuffer: 64 * 2 ** 20 }).toString("utf8")) as PythonForms[];
    const cases: Case[][] = [];
    const forms = new Map<string, Encoding>();
    secrets.forEach((secret, i) => {
      const list: Case[] = [];
      for (const form of encodingsOf(secret, python[i])) {
        const place = Math.floor(random() * PLACES.length);
        if (excluded(secret, form.name, place)) continue;
        forms.set(`${i}\u0000${form.name}`, form);
        list.push({ secret, encoding: form.name, place, text: PLACES[place](form.encoded) });
      }
      cases.push(list);
    });
    const scrubbed = (await inWorker(
      `const { Redactor } = require(workerData.module);
       parentPort.postMessage(workerData.cases.map((list, i) => { const r = Redactor.of([workerData.secrets[i]]); return list.map((c) => r.text(c.text)); }));`,
      { module: libModule("shared/redact.ts"), secrets, cases },
      { stackSizeMb: 1 },
    )) as string[][];
    const misses: string[] = [];
    cases.forEach((list, i) =>
      list.forEach((testCase, j) => {
        const miss = missOf(testCase, forms.get(`${i}\u0000${testCase.encoding}`)!, scrubbed[i][j]);
        if (miss !== undefined) misses.push(`${testCase.encoding}: ${miss}: secret ${JSON.stringify(testCase.secret)} in ${JSON.stringify(testCase.text)} -> ${JSON.stringify(scrubbed[i][j])}`);
      }),
    );
    expect(secrets.length).toBeGreaterThan(250);
    expect(misses).toEqual([]);
  });
});
