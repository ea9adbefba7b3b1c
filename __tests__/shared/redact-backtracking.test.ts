/**
 * A server controls the text the redactor scrubs, and a secret's value is nobody's choice either (a password with
 * backslashes or quotes): no pair of them may make the scrub take time exponential in either, which would hold the
 * event loop for every user. Each scrub runs in a worker (see `workerRunner`): one that does not end fails the test
 * at jest's timeout instead of blocking the run; no timer of the test's own.
 */
import { describe, expect, test } from "@jest/globals";
import { libModule, workerRunner } from "../fixtures/worker";
import { REDACTED } from "../../lib/shared";

const inWorker = workerRunner();

/**
 * In a worker with a stack as small as the main thread's (where a server's text is scrubbed): each of `texts` scrubbed
 * of `secrets`.
 */
async function scrubEach(secrets: readonly string[], texts: readonly string[]): Promise<unknown> {
  return inWorker(
    `const { Redactor } = require(workerData.module);
     const redactor = Redactor.of(workerData.secrets);
     parentPort.postMessage(workerData.texts.map((text) => redactor.text(text)));`,
    { module: libModule("shared/redact.ts"), secrets, texts },
    { stackSizeMb: 1 },
  );
}

const json = (value: string): string => JSON.stringify(value).slice(1, -1);

/** `length` characters of `alphabet`, picked by a fixed pseudo-random sequence (no period a match could follow). */
function scrambled(length: number, alphabet: string): string {
  const chars = [...alphabet];
  let state = 12345;
  return Array.from({ length }, () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return chars[Math.floor(state / 65536) % chars.length];
  }).join("");
}

describe("Redactor: texts built to match a secret in very many ways", () => {
  // Each backslash of the secret matched "one or more backslashes", the space's escape too: a run of n backslashes
  // was split over the nine in every way (n^9 tries: 40 took seconds, 300 would take years).
  test("a secret of backslashes on a long run of backslashes is scrubbed in polynomial time, and still found escaped", async () => {
    const secret = "\\".repeat(8) + " x";
    const run = "\\".repeat(300);
    expect(await scrubEach([secret], [run, `${run} ${json(json(secret))}`, `${run}u0020y`, `${run}u0020y ${json(secret)}`])).toEqual([
      run,
      `${run} ${REDACTED}`,
      `${run}u0020y`,
      `${run}u0020y ${REDACTED}`,
    ]);
  });

  // `\\\"` is an escaped backslash and a quote, and a backslash run and an escaped quote.
  test("a secret of escaped quotes on a long run of escaped quotes is scrubbed in polynomial time", async () => {
    const secret = `${'\\"'.repeat(40)}x`;
    const text = '\\\\\\"'.repeat(300);
    expect(await scrubEach([secret], [text, `${text} ${json(json(secret))}`])).toEqual([text, `${text} ${REDACTED}`]);
  });

  // `'\''` is one quote as sh quotes it, and three quotes (raw, escaped, raw).
  test("a secret of single quotes on a long run of sh-quoted quotes is scrubbed in polynomial time", async () => {
    const secret = `${"'".repeat(60)}x`;
    const text = "'\\''".repeat(300);
    const quoted = `'${secret.replace(/'/g, "'\\''")}'`;
    expect(await scrubEach([secret], [text, `${text} ${quoted}`])).toEqual([text, `${text} '${REDACTED}'`]);
  });

  // `&#39;` is a quote as a decimal reference and as the one HTML escapers write for it (Python's html.escape before
  // 3.2, PHP's htmlspecialchars): two forms of one quote matching the same text were 2^n tries for n of them.
  test("a secret of single quotes on a long run of HTML-escaped quotes is scrubbed in polynomial time, and still found", async () => {
    const secret = `${"'".repeat(60)}x`;
    const text = "&#39;".repeat(300);
    const escaped = secret.replace(/'/g, "&#39;");
    expect(await scrubEach([secret], [text, `${text}y ${escaped}`, `<${secret.replace(/'/g, "&apos;")}>`])).toEqual([text, `${text}y ${REDACTED}`, `<${REDACTED}>`]);
  });
});

describe("Redactor: the forms of backslashes and quotes", () => {
  test("a run of backslashes is blanked raw, JSON-escaped at any depth, as \\u005c, percent-encoded, and before an escaped character", async () => {
    const secret = 'p\\\\ss\\"w0rd\\';
    const unicode = secret.replace(/\\/g, "\\u005c");
    const forms = [secret, json(secret), json(json(secret)), json(json(json(secret))), unicode, json(unicode), encodeURIComponent(secret), encodeURIComponent(encodeURIComponent(secret))];
    expect(await scrubEach([secret], forms.map((form) => `<${form}>`))).toEqual(forms.map(() => `<${REDACTED}>`));
    // `\\ x` JSON-escaped with the space as \u0020 is `\\\\\u0020x`; `\\\u0020x` is its decoded form `\ x` JSON-escaped
    // (which JSON writes back as the secret, so it is blanked too); with no backslash but the escape's it is another value.
    expect(await scrubEach(["\\\\ x"], ["a \\\\\\\\\\u0020x b", "a \\\\u0020x b", "a \\u0020x b"])).toEqual([`a ${REDACTED} b`, `a ${REDACTED} b`, "a \\u0020x b"]);
  });

  test("quotes: raw, escaped, sh- and shlex-quoted, and an escaped one after a raw one", async () => {
    const forms = ["it''s", "it'\\'s", "it'\\'''\\''s", `it'"'"''"'"'s`, "it\\'\\'s", json("it\\'\\'s"), "it&#39;&apos;s"];
    expect(await scrubEach(["it''s"], forms.map((form) => `<${form}>`))).toEqual(forms.map(() => `<${REDACTED}>`));
  });
});

describe("Redactor: long secrets", () => {
  // A pattern of a few thousand characters' forms overflowed V8's stack when it was compiled, on the first scrub: the
  // scrub threw, and its error's message was the pattern, the secret spelled out in it (its base64, each character).
  test.each([
    ["an 8 KiB key", scrambled(8192, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")],
    ["4 KiB of quotes and letters", scrambled(4096, "''''''ab")],
    ["a 16 KiB passphrase of backslashes, quotes, percent signs and spaces", scrambled(16384, "a\\b'c\"d%e&f/g h\u00e9i\t")],
    ["4 KiB of backslashes", "\\".repeat(4096)],
  ])("%s is blanked whole in every form, and the scrub does not throw", async (_label, secret) => {
    const forms = [secret, json(secret), json(json(secret)), encodeURIComponent(secret), Buffer.from(secret).toString("base64")];
    const scrubbed = (await scrubEach([secret], forms.map((form) => `key=<${form}>`))) as string[];
    expect(scrubbed.slice(0, -1)).toEqual(forms.slice(0, -1).map(() => `key=<${REDACTED}>`));
    // The last digit or two, padding and all, carry a few bits of the secret: only its whole digits are a run.
    expect(scrubbed.at(-1)).toMatch(/^key=<\[redacted\][A-Za-z0-9+/]?=*>$/);
  });

  test("a long secret is matched in overlapping pieces of a few hundred characters, none of them short", async () => {
    // 513 characters: [0, 172), [171, 343), [342, 513). Where encoded forms may stand, pieces found together are blanked.
    const secret = scrambled(513, "abcdefghijklmnopqrstuvwxyz");
    expect(await scrubEach([secret], [`x=${secret.slice(0, 343)}%20`, `x=${secret.slice(0, 100)}%20`])).toEqual([
      `x=${REDACTED}%20`,
      `x=${secret.slice(0, 100)}%20`,
    ]);
    // A piece does not end inside a run of backslashes: this one's first piece ends at "y", two characters before the
    // end, which go with it (a piece "yz" would blank every "yz").
    expect(await scrubEach([`${"x".repeat(171)}${"\\".repeat(300)}yz`], ["xyz%20"])).toEqual(["xyz%20"]);
  });
});

describe("Redactor.cutOff: many secrets", () => {
  // Each secret had a budget of its own (200,000 tries): 300 passphrases on a cut line of `a a a …` made 60 million
  // tries, and the stream's close held the event loop for seconds. The tries are counted, not timed.
  // With 100 words, the first secret alone spends the budget: the answer taken is the stretch searched, not the cut.
  test.each([20, 100])("one call's tries are bounded whatever the number of secrets, and the stretch that may begin one is cut (%d words)", async (words) => {
    const secrets = Array.from({ length: 300 }, (_, i) => `${"a ".repeat(words)}z${i}`);
    const text = `log: ${"a ".repeat(1024)}a`;
    const [tries, at, lines] = (await inWorker(
      `const { Redactor, firstCharsTriesMade } = require(workerData.module);
       const { LineSplitter } = require(workerData.lines);
       const redactor = Redactor.of(workerData.secrets);
       let made = firstCharsTriesMade();
       const at = redactor.cutOff(workerData.text, workerData.text.length - 1);
       const tries = [firstCharsTriesMade() - made];
       made = firstCharsTriesMade();
       const splitter = new LineSplitter(64 * 1024, redactor);
       const lines = [...splitter.push(Buffer.from(workerData.text)), ...splitter.flush(true)];
       tries.push(firstCharsTriesMade() - made);
       parentPort.postMessage([tries, at, lines]);`,
      { module: libModule("shared/redact.ts"), lines: libModule("sessions/lines.ts"), secrets, text },
    )) as [number[], number, string[]];
    // The budget (200,000) and the one try that finds it spent.
    expect(Math.max(...tries)).toBeLessThanOrEqual(200_001);
    // The secrets' first words, `a a … a `, may run up to the last word: all of that is cut, at least.
    expect(at).toBeLessThanOrEqual(text.length - 1 - 2 * words);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^(log: (a )*)?\[cut\]$/);
    expect(lines[0].length).toBeLessThanOrEqual(at + "[cut]".length);
  });
});
