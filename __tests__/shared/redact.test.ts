import { describe, expect, test } from "@jest/globals";
import { headerSecrets, recordSecrets, Redactor, REDACTED } from "../../lib/shared";

const SECRET = 'tok"en\\/ü z';

function forms(secret: string): Record<string, string> {
  const json = JSON.stringify(secret).slice(1, -1);
  return {
    raw: secret,
    json,
    jsonTwice: JSON.stringify(json).slice(1, -1),
    jsonUnicode: [...secret].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join(""),
    url: encodeURIComponent(secret),
    urlLower: encodeURIComponent(secret).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
    form: new URLSearchParams({ k: secret }).toString().slice(2),
    urlTwice: encodeURIComponent(encodeURIComponent(secret)),
    html: secret.replace(/"/g, "&quot;"),
    htmlNumeric: [...secret].map((c) => `&#${c.codePointAt(0)};`).join(""),
  };
}

describe("Redactor", () => {
  test.each(Object.entries(forms(SECRET)))("blanks the %s form of a secret", (_name, form) => {
    const out = Redactor.of([SECRET]).text(`before ${form} after`);
    expect(out).toBe(`before ${REDACTED} after`);
  });

  test.each([0, 1, 2, 3, 4, 5])("blanks a base64 echo with the secret at byte offset %i, in both alphabets", (offset) => {
    const secret = "sk-base64-?>~secret";
    const blob = Buffer.from(`${"u".repeat(offset)}${secret}:tail`);
    for (const encoded of [blob.toString("base64"), blob.toString("base64url")]) {
      const out = Redactor.of([secret]).text(`auth ${encoded}`);
      expect(out).toContain(REDACTED);
      // Nothing that still decodes to the secret is left.
      expect(Buffer.from(out.replace(/^auth /, "").split(REDACTED).join(""), "base64").toString("latin1")).not.toContain("secret");
    }
  });

  test("short secrets are blanked however short", () => {
    const r = Redactor.of(["q7Z4", "x"]);
    expect(r.text("token q7Z4 and x")).toBe(`token ${REDACTED} and ${REDACTED}`);
    // base64("q7Z4") is "cTdaNA==": the characters that encode only the secret go, the padding stays.
    expect(r.text("b64 cTdaNA==")).toBe(`b64 ${REDACTED}A==`);
  });

  test("longest first: a whole 'Bearer <token>' goes before its token alone", () => {
    const r = Redactor.of(headerSecrets({ Authorization: "Bearer abc123" }));
    expect(r.text("got 'Bearer abc123', abc123")).toBe(`got '${REDACTED}', ${REDACTED}`);
  });

  test("deep() scrubs every string and key of a JSON-like value, leaving other values and the input alone", () => {
    const input = { "k-s3cr": ["v s3cr", 1, true, null, { nested: "x%20s3cr" }], n: 2 };
    const r = Redactor.of(["s3cr"]);
    expect(r.deep(input)).toEqual({ [`k-${REDACTED}`]: [`v ${REDACTED}`, 1, true, null, { nested: "x%20[redacted]" }], n: 2 });
    expect(input["k-s3cr"][0]).toBe("v s3cr");
  });

  test("deep() copies only what holds a secret: untouched parts are shared, earlier items and keys are kept in order", () => {
    const clean = { text: "nothing here", list: [1, "two"] };
    const input = { first: clean, items: ["a", { b: "c" }, "s3cr"], last: "ends with s3cr" };
    const out = Redactor.of(["s3cr"]).deep(input);
    expect(out).toEqual({ first: clean, items: ["a", { b: "c" }, REDACTED], last: `ends with ${REDACTED}` });
    expect(Object.keys(out)).toEqual(["first", "items", "last"]);
    expect(out.first).toBe(clean);
    expect(out.items[1]).toBe(input.items[1]);
    expect(input.items[2]).toBe("s3cr");
    expect(input.last).toBe("ends with s3cr");
    expect(Redactor.of(["s3cr"]).deep(clean)).toBe(clean);
  });

  test("deep() keeps a parsed '__proto__' key as an own property, scrubbed, without changing the copy's prototype", () => {
    const input = JSON.parse('{"__proto__": {"polluted": "s3cr"}, "a": "s3cr"}') as Record<string, unknown>;
    const out = Redactor.of(["s3cr"]).deep(input);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(["__proto__", "a"]);
    expect(Object.getOwnPropertyDescriptor(out, "__proto__")?.value).toEqual({ polluted: REDACTED });
    expect(out.a).toBe(REDACTED);
  });

  test("an empty set redacts nothing and returns its input", () => {
    const value = { a: "b" };
    expect(Redactor.of([undefined, ""]).isEmpty).toBe(true);
    expect(Redactor.of([]).deep(value)).toBe(value);
    expect(Redactor.of([]).text("abc")).toBe("abc");
  });

  test("one redactor per distinct set", () => {
    expect(Redactor.of(["a1", "b2"])).toBe(Redactor.of(["b2", "a1", "a1"]));
    expect(Redactor.of(new Set(["b2", "a1"]))).toBe(Redactor.of(["a1", "b2"]));
  });

  test("lists that only look alike when joined are different sets", () => {
    const joined = Redactor.of(["k1\u0000k2"]);
    const apart = Redactor.of(["k1", "k2"]);
    expect(apart).not.toBe(joined);
    expect(apart.text("k1 k2")).toBe(`${REDACTED} ${REDACTED}`);
    expect(Redactor.of(["k1\u0000k2"]).text("k1 k2")).toBe("k1 k2");
  });

  test("regex metacharacters in a secret are literal", () => {
    expect(Redactor.of(["a.c"]).text("abc a.c")).toBe(`abc ${REDACTED}`);
    expect(Redactor.of(["(x|y)*"]).text("x (x|y)*")).toBe(`x ${REDACTED}`);
  });
});

describe("headerSecrets", () => {
  test("every value and the token of '<scheme> <token>', but not descriptive headers", () => {
    expect(
      headerSecrets({ Authorization: "Bearer t1", "X-Key": "k2", Accept: "application/json", "content-type": "text/plain" }, undefined),
    ).toEqual(["Bearer t1", "t1", "k2"]);
  });
});

describe("recordSecrets", () => {
  test("the non-empty string values", () => {
    expect(recordSecrets({ a: "x", b: "", c: 3, d: { e: "f" } })).toEqual(["x"]);
    expect(recordSecrets(undefined)).toEqual([]);
  });
});
