/**
 * A stderr line longer than the pending limit is given in pieces: no cut may split a secret, whether it is still
 * arriving when the line is cut or already there across the place a fixed-size cut would fall.
 */
import { describe, expect, test } from "@jest/globals";
import { LineSplitter } from "../../lib/sessions/lines";
import { libModule, workerRunner } from "../fixtures/worker";
import { Redactor, REDACTED } from "../../lib/shared";

const SECRET = "QZXJVWKY";
/** No letter of SECRET: a piece holding any part of it shows one of these. */
const PART_OF_SECRET = /[QZXJVWKY]/;
const redactor = Redactor.of([SECRET]);
const scrub = (text: string): string => redactor.text(text);

/** What the transport logs: each piece scrubbed (again: scrubbing a scrubbed piece changes nothing here). */
function feed(chunks: readonly string[], maxPending: number, keep?: number): string[] {
  const splitter = new LineSplitter(maxPending, redactor, keep);
  return [...chunks.flatMap((chunk) => splitter.push(Buffer.from(chunk))), ...splitter.flush()].map(scrub);
}

describe("LineSplitter", () => {
  test("a line cut for its length while a secret is still arriving: the secret is blanked whole in the next piece", () => {
    const pieces = feed([`${"-".repeat(70)}QZXJ`, "VWKY tail\n"], 64, 16);
    expect(pieces.length).toBeGreaterThanOrEqual(2);
    for (const piece of pieces) expect(piece).not.toMatch(PART_OF_SECRET);
    expect(pieces.join("")).toBe(`${"-".repeat(70)}${REDACTED} tail`);
  });

  test("a secret lying across where a fixed-size cut would fall is not split", () => {
    // 78 characters, 16 kept back: a cut at 62 would fall inside the secret (60-68).
    const pieces = feed([`${"-".repeat(60)}${SECRET}${"-".repeat(10)}`, "\n"], 64, 16);
    for (const piece of pieces) expect(piece).not.toMatch(PART_OF_SECRET);
    expect(pieces.join("")).toBe(`${"-".repeat(60)}${REDACTED}${"-".repeat(10)}`);
  });

  const sizes = [1, 2, 3, 5, 7, 8, 9, 13, 31, 64, 65, 100];
  test.each(sizes)("a long line of secrets in chunks of %i: pieces join to the scrubbed line", (size) => {
    const line = Array.from({ length: 40 }, (_, i) => `${"-".repeat(i % 5)}${SECRET}`).join(" ");
    const text = `${line}\nshort ${SECRET}\n`;
    const chunks = text.match(new RegExp(`[^]{1,${size}}`, "g")) ?? [];
    const pieces = feed(chunks, 64, 24);
    for (const piece of pieces) expect(piece).not.toMatch(PART_OF_SECRET);
    expect(pieces.length).toBeGreaterThan(3);
    expect(pieces.slice(0, -1).join("")).toBe(scrub(line));
    expect(pieces.at(-1)).toBe(`short ${REDACTED}`);
  });

  test("a secret holding line breaks (a PEM key) written at once is blanked whole, not line by line", () => {
    const pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\r\n-----END PRIVATE KEY-----";
    const multi = Redactor.of([pem]);
    const splitter = new LineSplitter(64 * 1024, multi);
    expect([...splitter.push(Buffer.from(`before\nkey: ${pem}\r\nafter\n`)), ...splitter.flush()]).toEqual([
      "before",
      `key: ${REDACTED}`,
      "after",
    ]);
  });

  test("a secret's base64 wrapped over lines (MIME, PEM) is blanked across the breaks", () => {
    const secret = "sk-live-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0";
    const wrapped = Buffer.from(`user:${secret}`).toString("base64").replace(/.{20}/g, "$&\n");
    const one = Redactor.of([secret]);
    const splitter = new LineSplitter(64 * 1024, one);
    const lines = [...splitter.push(Buffer.from(`auth ${wrapped}\n`)), ...splitter.flush()];
    expect(lines.join("\n")).toBe(one.text(`auth ${wrapped}`));
    expect(lines.join("")).toContain(REDACTED);
    expect(Buffer.from(lines.join("").replace(/^auth /, "").replace(REDACTED, ""), "base64").toString("latin1")).not.toContain("A1b2");
  });

  test.each([
    ["after its first line", 1],
    ["after its second line", 2],
    ["after its last line", 4],
  ])("a secret's wrapped base64 written over two writes, the first ending %s, is blanked across the breaks too", (_label, linesFirst) => {
    const secret = "sk-live-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0";
    const base64 = Buffer.from(`user:${secret}`).toString("base64");
    const one = Redactor.of([secret]);
    const splitter = new LineSplitter(64 * 1024, one);
    const text = `auth ${base64.replace(/.{20}/g, "$&\n")}\nnext line\n`;
    let cut = 0;
    for (let i = 0; i < linesFirst; i += 1) cut = text.indexOf("\n", cut) + 1;
    const first = splitter.push(Buffer.from(text.slice(0, cut)));
    const lines = [...first, ...splitter.push(Buffer.from(text.slice(cut)))];
    expect(first).toEqual([]);
    expect(lines).toEqual([...one.text(`auth ${base64.replace(/.{20}/g, "$&\n")}`).split("\n"), "next line"]);
    for (const piece of base64.match(/.{20}/g)!) expect(lines.join("\n")).not.toContain(piece);
    expect(splitter.flush()).toEqual([]);
  });

  test("only lines that may begin a wrapped base64 run wait for the next line: a short word at once, a held line at the end", () => {
    const splitter = new LineSplitter(64 * 1024, redactor);
    expect(splitter.push(Buffer.from("Ready\nlistening on 8080\n"))).toEqual(["Ready", "listening on 8080"]);
    expect(splitter.push(Buffer.from("session 0123456789abcdef0123\n"))).toEqual([]);
    // A short word could still be a run's last line ("dDA="); a line with a space could not.
    expect(splitter.push(Buffer.from("next\n"))).toEqual([]);
    expect(splitter.push(Buffer.from("next line\n"))).toEqual(["session 0123456789abcdef0123", "next", "next line"]);
    expect(splitter.push(Buffer.from("token 0123456789abcdef0123\n"))).toEqual([]);
    expect(splitter.flush()).toEqual(["token 0123456789abcdef0123"]);
  });

  test.each([
    ["16 digits, padding and a CR end it: held", "key: abcdefghij+/_-01==\r", []],
    ["15 digits: given", "key: bcdefghij+/_-01==\r", ["key: bcdefghij+/_-01=="]],
    ["the whole line 16 digits: held", "abcdefghij+/_-01", []],
    ["the whole line 15 digits: given", "bcdefghij+/_-01", ["bcdefghij+/_-01"]],
    ["a character after the digits: given", "key: abcdefghij+/_-0123.", ["key: abcdefghij+/_-0123."]],
    ["padding amid the last 16 digits: given", "key: abcdefgh=ij+/_-0123", ["key: abcdefgh=ij+/_-0123"]],
  ])("a line may begin a wrapped run when 16 base64 digits end it (%s)", (_label, line, given) => {
    const splitter = new LineSplitter(64 * 1024, redactor);
    expect(splitter.push(Buffer.from(`${line}\n`))).toEqual(given);
    expect(splitter.flush()).toEqual(given.length === 0 ? [line.replace(/\r$/, "")] : []);
  });

  test("a long unfinished line after a line break in the same chunk is cut for its length there, not when more comes", () => {
    const splitter = new LineSplitter(64, redactor);
    expect(splitter.push(Buffer.from(`a b\n${"x ".repeat(50)}`))).toEqual(["a b", "x ".repeat(34)]);
    expect(splitter.push(Buffer.from("end\n"))).toEqual([`${"x ".repeat(16)}end`]);
  });

  test("base64-looking lines beyond what is held back for a cut are given at once", () => {
    const splitter = new LineSplitter(64 * 1024, redactor, 100);
    const lines = Array.from({ length: 6 }, (_, i) => `${String(i).repeat(20)}`);
    expect(splitter.push(Buffer.from(`${lines.join("\n")}\n`))).toEqual(lines);
  });

  test("lines and the rest at the end come back scrubbed, split on CRLF and LF, UTF-8 kept across chunks", () => {
    const bytes = Buffer.from(`a ${SECRET}\r\nü ${SECRET}`);
    const splitter = new LineSplitter(64, redactor);
    const lines = [...splitter.push(bytes.subarray(0, 14)), ...splitter.push(bytes.subarray(14)), ...splitter.flush()];
    expect(lines).toEqual([`a ${REDACTED}`, `ü ${REDACTED}`]);
  });

  test("a stream cut under its writer: the last, unfinished line's last word is shown as [cut] unless it is a redacted secret", () => {
    const cutOff = (text: string, cut: boolean) => {
      const splitter = new LineSplitter(64, redactor);
      return [...splitter.push(Buffer.from(text)), ...splitter.flush(cut)];
    };
    // The first characters of a secret that never arrived whole: no redaction recognises them.
    expect(cutOff(`closing\nusage: --token ${SECRET.slice(0, 3)}`, true)).toEqual(["closing", "usage: --token [cut]"]);
    expect(cutOff(`last words: ${SECRET}`, true)).toEqual([`last words: ${REDACTED}`]);
    expect(cutOff("one-word-only", true)).toEqual(["[cut]"]);
    expect(cutOff("ends with a space ", true)).toEqual(["ends with a space "]);
    // Ended by the writer, or ended with a newline: the line is whole.
    expect(cutOff(`usage: --token ${SECRET.slice(0, 3)}`, false)).toEqual([`usage: --token ${SECRET.slice(0, 3)}`]);
    expect(cutOff("whole line\n", true)).toEqual(["whole line"]);
  });

  // Each scrub is a pass per secret (a redactor may hold hundreds): a line cut under its writer that ends with a secret
  // was scrubbed whole twice.
  test("a cut line kept whole is scrubbed once", () => {
    const calls: string[] = [];
    const counting = {
      text: (text: string) => (calls.push("text"), redactor.text(text)),
      cutOff: (text: string, from: number) => (calls.push("cutOff"), redactor.cutOff(text, from)),
    };
    const splitter = new LineSplitter(64, counting);
    expect([...splitter.push(Buffer.from(`last words: ${SECRET}`)), ...splitter.flush(true)]).toEqual([`last words: ${REDACTED}`]);
    expect(calls).toEqual(["text", "cutOff"]);
  });

  const PASSPHRASE = "correct horse battery staple";
  /** The lines a splitter scrubbing `secrets` gives for `text`, its stream closed under the writer. */
  const cutUnder = (secrets: readonly string[], text: string): string[] => {
    const splitter = new LineSplitter(64 * 1024, Redactor.of(secrets));
    return [...splitter.push(Buffer.from(text)), ...splitter.flush(true)];
  };

  test.each([
    ["raw", `login: ${PASSPHRASE.slice(0, 18)}`, "login: [cut]"],
    ["raw, at the line's start", PASSPHRASE.slice(0, 14), "[cut]"],
    ["raw, glued to a word", `--passphrase=${PASSPHRASE.slice(0, 15)}`, "--passphrase=[cut]"],
    ["JSON-escaped in part", `{"pass":"correct\\u0020horse battery st`, `{"pass":"[cut]`],
    ["URL-encoded in part", "body: p=correct%20horse battery+st", "body: p=[cut]"],
    ["an HTML reference in part", "<p>correct&#32;horse battery</p", "<p>[cut]"],
    ["with a tab", "pass: correct\thorse\tbat", "pass: [cut]"],
    ["its first words ending the line", `usage: ${PASSPHRASE.slice(0, 14)}`, "usage: [cut]"],
  ])("a secret holding spaces cut under its writer (%s): none of its first words is left", (_label, text, line) => {
    const secret = text.includes("\t") ? "correct\thorse\tbattery" : PASSPHRASE;
    expect(cutUnder([secret], text)).toEqual([line]);
  });

  test("a secret holding a ' shell-quoted ('\\'') and cut under its writer: none of its first words is left", () => {
    expect(cutUnder(["it's a long pass phrase"], "+ login 'it'\\''s a long pa")).toEqual(["+ login '[cut]"]);
  });

  test("a secret holding spaces whose words are secrets of their own, cut under its writer: none of its first words is left", () => {
    // Its second word is redacted alone: the words before it are still the start of the passphrase.
    expect(cutUnder([PASSPHRASE, "horse"], "pw: correct horse batt")).toEqual(["pw: [cut]"]);
    // The line ends with a whole secret: it is kept as REDACTED only when nothing before it is the start of another.
    expect(cutUnder([PASSPHRASE, "battery"], "pw: correct horse battery")).toEqual(["pw: [cut]"]);
    expect(cutUnder([PASSPHRASE, "battery"], "pw: a battery")).toEqual([`pw: a ${REDACTED}`]);
    // A whole secret across where the passphrase begins: cut from its own start, not left as its first word.
    expect(cutUnder([PASSPHRASE, "xyz correct"], "pw: xyz correct horse batt")).toEqual(["pw: [cut]"]);
  });

  test("a secret holding spaces that ends inside the last word is cut whole, not from that word", () => {
    expect(cutUnder(["my secret phrase"], "pw: my secret phrase-and-more")).toEqual(["pw: [cut]"]);
  });

  test("a secret holding a line break cut in its second line: its first line is redacted, the first words of the second cut", () => {
    const secret = "first line words\nsecond line words";
    expect(cutUnder([secret], "start\nkey: first line words\nsecond li")).toEqual(["start", `key: ${REDACTED}`, "[cut]"]);
  });

  test("a line cut under its writer whose words only look like the start of a secret is cut from its last word only", () => {
    expect(cutUnder([PASSPHRASE], "correct answers: horse battery st")).toEqual(["correct answers: horse battery [cut]"]);
  });

  test("a wrapped base64 run cut under its writer: its lines that came whole (a secret's first bytes, encoded) are [cut] too", () => {
    const secret = "sk-live-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0";
    const base64 = Buffer.from(`user:${secret}`).toString("base64");
    const one = Redactor.of([secret]);
    const splitter = new LineSplitter(64 * 1024, one);
    // Two whole lines of the run, then the first characters of the third: the child was gone before the rest.
    const wrapped = base64.match(/.{20}/g)!;
    const lines = [...splitter.push(Buffer.from(`auth\n${wrapped[0]}\n${wrapped[1]}\n${wrapped[2].slice(0, 5)}`)), ...splitter.flush(true)];
    for (const piece of wrapped.slice(0, 2)) expect(lines.join("\n")).not.toContain(piece);
    expect(lines).toEqual(["auth", "[cut]"]);
  });

  test("a wrapped base64 run cut under its writer right after a line break: its lines held back are [cut] too", () => {
    const secret = "sk-live-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0";
    const base64 = Buffer.from(`user:${secret}`).toString("base64");
    const wrapped = base64.match(/.{20}/g)!;
    for (const eol of ["\n", "\r\n"]) {
      const splitter = new LineSplitter(64 * 1024, Redactor.of([secret]));
      // Two whole lines of the run, each ended: the child was gone before the third (the run's rest) began.
      const lines = [...splitter.push(Buffer.from(`auth${eol}${wrapped[0]}${eol}${wrapped[1]}${eol}`)), ...splitter.flush(true)];
      for (const piece of wrapped.slice(0, 2)) expect(lines.join("\n")).not.toContain(piece);
      expect(lines).toEqual(["auth", "[cut]"]);
    }
    // Ended by the writer: the run is whole, shown as it came.
    const ended = new LineSplitter(64 * 1024, Redactor.of([secret]));
    expect([...ended.push(Buffer.from(`auth\n${wrapped[0]}\n${wrapped[1]}\n`)), ...ended.flush()]).toEqual(["auth", wrapped[0], wrapped[1]]);
  });

  test("a run's first line held back after words of its own, cut under its writer right after its line break, is [cut] from its digits", () => {
    const secret = "sk-live-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0";
    const wrapped = Buffer.from(`user:${secret}`).toString("base64").match(/.{20}/g)!;
    for (const eol of ["\n", "\r\n"]) {
      const splitter = new LineSplitter(64 * 1024, Redactor.of([secret]));
      const lines = [...splitter.push(Buffer.from(`auth${eol}Authorization: Basic ${wrapped[0]}${eol}`)), ...splitter.flush(true)];
      expect(lines).toEqual(["auth", "Authorization: Basic [cut]"]);
    }
  });

  // No timer: the split runs in a worker, so one that does not end fails the test at its timeout instead of blocking
  // it. A server's JSON log line quoting a long output (@agent-infra/mcp-server-commands logs a failed command's
  // stdout so): tried for a trailing base64 run from each of its digits, 60,000 of them held the event loop 9 s.
  const inWorker = workerRunner();

  test("a long run of base64 digits that does not end its line is split in linear time", async () => {
    const seen = await inWorker(
      `const { LineSplitter } = require(workerData.module);
       const line = 'WARN: {"text":"' + "a".repeat(1000000) + '","name":"STDOUT"}';
       const splitter = new LineSplitter(4 * 1024 * 1024);
       const lines = splitter.push(Buffer.from(line + "\\nnext\\n"));
       parentPort.postMessage([lines.length, lines[0] === line, lines[1]]);`,
      { module: libModule("sessions/lines.ts") },
    );
    expect(seen).toEqual([2, true, "next"]);
  });

  test("a long last word of a line cut under its writer is cut in linear time", async () => {
    const seen = await inWorker(
      `const { LineSplitter } = require(workerData.module);
       const splitter = new LineSplitter(8 * 1024 * 1024);
       splitter.push(Buffer.from(("a".repeat(1000) + " ").repeat(1000) + "b".repeat(1000000)));
       const lines = splitter.flush(true);
       parentPort.postMessage([lines.length, lines[0].endsWith(" [cut]"), lines[0].length]);`,
      { module: libModule("sessions/lines.ts") },
    );
    expect(seen).toEqual([1, true, 1001 * 1000 + 5]);
  });

  test("a long line matching a passphrase's first words in very many overlapping ways, cut under its writer, is cut in bounded time", async () => {
    const seen = await inWorker(
      `const { LineSplitter } = require(workerData.module);
       const { Redactor } = require(workerData.redact);
       const secret = Array.from({ length: 100 }, () => "a").join(" ");
       const splitter = new LineSplitter(64 * 1024, Redactor.of([secret]));
       splitter.push(Buffer.from("start ".repeat(1000) + "a ".repeat(25000) + "b"));
       const lines = splitter.flush(true);
       parentPort.postMessage([lines.length, lines[0].endsWith("[cut]"), lines[0].includes("a a")]);`,
      { module: libModule("sessions/lines.ts"), redact: libModule("shared/redact.ts") },
    );
    expect(seen).toEqual([1, true, false]);
  });
});
