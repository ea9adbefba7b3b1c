/**
 * The redactor writes its patterns so that V8 compiles them quickly (see `PatternStyle` in lib/shared/redact.ts): each
 * character's forms built once, an always-true lookahead between characters; and it leaves a pattern unsearched (so
 * uncompiled) where the text holds too few backslashes, `%` and `&` for it to match. They must find exactly what the
 * patterns written the plain way find: both scrub the recall test's generated secrets (and a few common shapes) out of
 * their encodings by real encoders, in the recall test's surroundings, out of mixed forms (a few characters encoded,
 * each in a form of its own), and out of near misses (a character dropped, changed or doubled, the form cut short),
 * alone and several together; the spans found must be the same (`text()` blanks those spans).
 * In a worker with a stack as small as the main thread's (see `workerRunner`), where a server's text is scrubbed.
 */
import { describe, expect, test } from "@jest/globals";
import { libModule, workerRunner } from "../fixtures/worker";
import { encodingsOf, generatedSecrets, generator, PLACES, pythonFormsOf } from "../fixtures/generated-secrets";
import { Redactor, REDACTED } from "../../lib/shared";

const inWorker = workerRunner();

/** Per-request secrets as users send them. */
const COMMON = [
  "sk_live_4eC39HqLyjWDarjtT1zdp7dcSA1b2c3d",
  "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyLCJleHAiOjE3MDAwMDAwMDAsInNjb3BlIjoicmVhZDp0b29scyB3cml0ZTp0b29scyIsImF1ZCI6Im1jcC1zZXJ2ZXIifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
  `my "quoted" pass w0rd's \\x`,
  "hunter22",
  "'''",
  `\\\\"a'b\\`,
  "a\\\\\\'b c",
];

/** A text that almost holds `encoded`: a character dropped, doubled or changed, or the last one cut. */
function nearMiss(encoded: string, random: () => number): string {
  const at = Math.floor(random() * encoded.length);
  const changed = encoded[at] === "x" ? "y" : "x";
  const kind = random();
  if (kind < 0.25) return encoded.slice(0, at) + encoded.slice(at + 1);
  if (kind < 0.5) return encoded.slice(0, at) + encoded[at] + encoded.slice(at);
  if (kind < 0.75) return encoded.slice(0, at) + changed + encoded.slice(at + 1);
  return encoded.slice(0, encoded.length - 1);
}

/** `secret` with some of its characters encoded, each in a form of its own: a text holding few backslashes, `%` and `&`. */
function mixed(secret: string, random: () => number): string {
  return [...secret]
    .map((ch) => {
      const kind = random();
      if (kind < 0.85) return ch;
      if (kind < 0.9) return Array.from({ length: ch.length }, (_, k) => `\\u${ch.charCodeAt(k).toString(16).padStart(4, "0")}`).join("");
      if (kind < 0.95) return encodeURIComponent(ch) === ch ? `%${ch.charCodeAt(0).toString(16)}` : encodeURIComponent(ch);
      return random() < 0.5 ? `&#${ch.codePointAt(0)};` : `&#x${ch.codePointAt(0)!.toString(16)};`;
    })
    .join("");
}

describe("Redactor: compact patterns find what the reference patterns find", () => {
  test("each compact pattern is its reference pattern with always-true lookaheads put in", async () => {
    const secrets = [...COMMON, ...generatedSecrets(generator(20261207))];
    const differing = (await inWorker(
      `const { patternSources } = require(workerData.module);
       parentPort.postMessage(workerData.secrets.filter((secret) => {
         const compact = patternSources(secret, "compact").map((source) => source.split("(?=)").join(""));
         return JSON.stringify(compact) !== JSON.stringify(patternSources(secret, "reference"));
       }));`,
      { module: libModule("shared/redact.ts"), secrets },
    )) as string[];
    expect(differing).toEqual([]);
  });

  // Every short secret, and one in three of the long ones (over 256 characters: each compiled twice, its texts long), whose
  // patterns the test above compares whole.
  test("same spans for the generated secrets, their encodings and near misses, alone and together", async () => {
    const random = generator(20261208);
    const secrets = [...COMMON, ...generatedSecrets(generator(20261207))].filter((secret, i) => secret.length <= 256 || i % 3 === 0);
    const python = pythonFormsOf(secrets);
    const texts = secrets.map((secret, i) =>
      encodingsOf(secret, python[i]).flatMap(({ encoded }) => [
        PLACES[Math.floor(random() * PLACES.length)](encoded),
        PLACES[Math.floor(random() * PLACES.length)](nearMiss(encoded, random)),
      ]).concat([mixed(secret, random), nearMiss(mixed(secret, random), random)]),
    );
    // Groups of secrets scrubbed together, from one text holding some of each one's forms.
    const groups = Array.from({ length: 40 }, (_, g) => {
      const members = Array.from({ length: 4 }, (_, j) => (g * 7 + j * 13) % secrets.length);
      return { members, text: members.map((m) => texts[m][Math.floor(random() * texts[m].length)]).join(" | ") };
    });
    const differences = (await inWorker(
      `const { Redactor } = require(workerData.module);
       const differences = [];
       const compare = (values, texts) => {
         const compact = Redactor.of(values);
         const reference = Redactor.reference(values);
         for (const text of texts) {
           const got = compact.spans(text);
           const want = reference.spans(text);
           if (JSON.stringify(got) !== JSON.stringify(want)) differences.push({ values, text, got, want });
         }
       };
       workerData.secrets.forEach((secret, i) => compare([secret], workerData.texts[i]));
       for (const { members, text } of workerData.groups) compare(members.map((m) => workerData.secrets[m]), [text]);
       parentPort.postMessage(differences.slice(0, 5));`,
      { module: libModule("shared/redact.ts"), secrets, texts, groups },
      { stackSizeMb: 1 },
    )) as unknown[];
    expect(secrets.length).toBeGreaterThan(280);
    expect(differences).toEqual([]);
  });

  // The check before a pattern is searched counts backslashes, `%` and `&`: a secret with a form that holds none of them
  // for one of its characters (a quote as shlex quotes it, a line break as CRLF, a space as `+`) is searched whatever
  // the text holds. Each secret new to the process (its pattern not yet past the searches that are checked), each text
  // free of backslashes, `%` and `&`, the characters around the marker-free form in a block of the secret's.
  test("a form holding no backslash, % or & is found in a text holding none", () => {
    const [shlex] = pythonFormsOf(["ab'cdefgh1"]).map((forms) => forms.shlex);
    const cases: Array<[string, string]> = [
      ["ab'cdefgh1", shlex],
      ["ab\ncdefgh2", "ab\r\ncdefgh2"],
      ["ab cdefgh3", new URLSearchParams({ v: "ab cdefgh3" }).toString().slice(2)],
    ];
    for (const [secret, echoed] of cases) {
      expect(echoed).not.toMatch(/[\\%&]/);
      const text = `seen: ${echoed}.`;
      expect(Redactor.of([secret]).spans(text)).toEqual(Redactor.reference([secret]).spans(text));
      expect(Redactor.of([secret]).text(text)).toBe(`seen: ${secret.includes("'") ? `'${REDACTED}'` : REDACTED}.`);
    }
  });
});
