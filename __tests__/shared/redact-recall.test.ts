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
import { libModule, workerRunner } from "../fixtures/worker";
import { encodingsOf, generatedSecrets, generator, PLACES, pythonFormsOf, type Encoding } from "../fixtures/generated-secrets";
import { REDACTED } from "../../lib/shared";

const inWorker = workerRunner();

const random = generator(20261207);

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
    const secrets = generatedSecrets(random);
    const python = pythonFormsOf(secrets);
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
