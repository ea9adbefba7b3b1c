/**
 * Forms of a secret the generated-secret recall test does not produce (its encoders never write them) but real servers
 * do: each found by a mutation audit of the redactor, where dropping the form left every other test passing.
 */
import { describe, expect, test } from "@jest/globals";
import { inspect } from "node:util";
import { Redactor, REDACTED } from "../../lib/shared";

describe("Redactor: forms no generated encoder writes", () => {
  test("a secret with DEL or a C1 control character as Node's util.inspect and Python's repr quote it (\\x7F, \\x85)", () => {
    for (const secret of ["tok\u007fen-7Hq2", "tok\u0085en-7Hq2"]) {
      const code = secret.charCodeAt(3).toString(16);
      for (const shown of [inspect(secret), `'tok\\x${code}en-7Hq2'`]) {
        expect(Redactor.of([secret]).text(`Received ${shown}`)).toBe(`Received '${REDACTED}'`);
      }
    }
  });

  test("HTML references padded with zeros (PHP's htmlspecialchars: &#039;) and with an upper-case X (&#X27;)", () => {
    const secret = "it's-S3cret";
    const r = Redactor.of([secret]);
    expect(r.text("<p>it&#039;s-S3cret</p>")).toBe(`<p>${REDACTED}</p>`);
    expect(r.text("<p>it&#X27;s-S3cret</p>")).toBe(`<p>${REDACTED}</p>`);
  });

  test("a base64 value holding '/' and '+' sent URL-encoded (a query parameter), in either hex case", () => {
    const secret = "wo??~~>wo";
    const r = Redactor.of([secret]);
    for (const prefix of ["", "u:", "us:"]) {
      const query = encodeURIComponent(Buffer.from(`${prefix}${secret}`).toString("base64"));
      expect(query).toMatch(/%2F.*%2B|%2B.*%2F/);
      for (const shown of [query, query.replace(/%2[FB]/g, (hex) => hex.toLowerCase()), encodeURIComponent(query)]) {
        const scrubbed = r.text(`GET /cb?v=${shown}&n=1`);
        expect(scrubbed).toContain(REDACTED);
        const left = decodeURIComponent(decodeURIComponent(scrubbed.split(REDACTED).join("")));
        expect(Buffer.from(left.slice("GET /cb?v=".length, -"&n=1".length), "base64").toString("latin1")).not.toContain(secret);
      }
    }
  });

  test("a decoded form of 3 characters none of which JSON or a log line escapes again is no secret: ordinary text keeps it", () => {
    expect(Redactor.of(["\\u0041BC"]).text("the ABC of it")).toBe("the ABC of it");
    expect(Redactor.of(["\\x41BC"]).text("the ABC of it")).toBe("the ABC of it");
  });
});

describe("Redactor: a text holding no backslash, % or & (the plain-text fast path)", () => {
  /** A text's spans as they are, and as found with an unrelated `%` after it (which takes the full patterns). */
  const bothWays = (r: Redactor, text: string): [string, string] => [r.text(text), r.text(`${text} 100%`).slice(0, -" 100%".length)];

  test("a long secret echoed cut short: its first pieces are blanked, as in a text with a '%'", () => {
    let seed = 7;
    const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const secret = Array.from({ length: 600 }, () => letters[(seed = (seed * 48271) % 2147483647) % letters.length]).join("");
    const r = Redactor.of([secret]);
    const cut = `error: bad token ${secret.slice(0, 450)}`;
    const [plain, marked] = bothWays(r, cut);
    expect(plain).toBe(marked);
    expect(plain).not.toContain(secret.slice(0, 256));
    const base64 = `body ${Buffer.from(secret.repeat(3)).toString("base64").slice(0, 1500)}`;
    const [plain64, marked64] = bothWays(Redactor.of([secret.repeat(3)]), base64);
    expect(plain64).toBe(marked64);
    expect(plain64.length).toBeLessThan(base64.length / 2);
  });

  test("its hex in mixed case", () => {
    const secret = "sk-live-9f8e7d6c5b4a";
    const mixed = Buffer.from(secret).toString("hex").replace(/[a-f]/, (d) => d.toUpperCase());
    expect(bothWays(Redactor.of([secret]), `bytes ${mixed}`)).toEqual([`bytes ${REDACTED}`, `bytes ${REDACTED}`]);
  });
});

describe("Redactor: the bounds on reading a short secret's base64 from inside a token", () => {
  const basic = Buffer.from("user:W7").toString("base64");
  const glued = (separators: number) => `${Array.from({ length: separators }, () => "aa").join("/")}/${basic}`;

  test("read from after each of the first 32 separators of a token, not the 33rd", () => {
    const r = Redactor.of(["W7"]);
    expect(r.text(glued(32))).toBe(glued(32).replace(basic, REDACTED));
    expect(r.text(glued(33))).toBe(glued(33));
  });

  test("read from after a separator in a token of up to 4096 characters", () => {
    const r = Redactor.of(["W7"]);
    const at = (length: number) => `${"A".repeat(length - basic.length - 1)}/${basic}`;
    expect(r.text(at(4096))).toBe(at(4096).replace(basic, REDACTED));
    expect(r.text(at(4097))).toBe(at(4097));
  });
});

test("base64 wrapped in CRLF lines and percent-encoded, in a text with no other line break", () => {
  const secret = "sk-live-9f8e7d6c5b4a-3e2d1c0b9a8f";
  const lines = Buffer.from(secret).toString("base64").match(/.{1,16}/g)!;
  for (const text of [`GET /cb?data=${encodeURIComponent(lines.join("\r\n"))}&n=1`, `GET /cb?data=${encodeURIComponent(lines.join("\n"))}&n=1`]) {
    const scrubbed = Redactor.of([secret]).text(text);
    for (const line of lines.slice(0, -1)) expect(scrubbed).not.toContain(line);
  }
});

test("cutOff: a secret's first characters in their longest form (4-byte UTF-8 URL-encoded twice, 20 characters each) are cut", () => {
  const secret = "😀😀k";
  const twice = (text: string) => encodeURIComponent(encodeURIComponent(text));
  const text = `pass=${twice("😀😀")}`;
  expect(twice("😀")).toHaveLength(20);
  expect(Redactor.of([secret]).cutOff(text, text.length)).toBe("pass=".length);
});

test("cutOff: a secret's base64 lying across the cut is cut at its start (no character form reaches the cut)", () => {
  const secret = "sk-live-9f8e7d6c5b4a";
  const text = `b64 ${Buffer.from(secret).toString("base64")}`;
  expect(Redactor.of([secret]).cutOff(text, 10)).toBe(4);
});
