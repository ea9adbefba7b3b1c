import { describe, expect, test } from "@jest/globals";
import * as path from "node:path";
import { inspect } from "node:util";
import { Worker } from "node:worker_threads";
import { TSX_CJS_REGISTER } from "../fixtures/stdio";
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
    hex: Buffer.from(secret).toString("hex"),
    hexUpper: Buffer.from(secret).toString("hex").toUpperCase(),
    hexMixed: Buffer.from(secret).toString("hex").replace(/[a-f]/, (d) => d.toUpperCase()),
  };
}

describe("Redactor", () => {
  test.each(Object.entries(forms(SECRET)))("blanks the %s form of a secret", (_name, form) => {
    const out = Redactor.of([SECRET]).text(`before ${form} after`);
    expect(out).toBe(`before ${REDACTED} after`);
  });

  test("blanks a secret with control characters as Node's util.inspect and Python's repr quote it (\\x00, \\x1f)", () => {
    const secret = "tok\u0000en\u001f-7Hq2";
    for (const shown of [inspect(secret), "'tok\\x00en\\x1f-7Hq2'"]) {
      expect(Redactor.of([secret]).text(`Received ${shown}`)).toBe(`Received '${REDACTED}'`);
    }
  });

  test("blanks a secret with quotes as Node's util.inspect and Python's repr quote it (\\', nested too)", () => {
    // Holding ', " and `, util.inspect quotes with ' and escapes it; Python's repr does so for ' and " alone.
    const secret = "a\"b'c`d-S3cret";
    for (const shown of [inspect(secret), "'a\"b\\'c`d-S3cret'"]) {
      expect(Redactor.of([secret]).text(`Received ${shown}`)).toBe(`Received '${REDACTED}'`);
    }
    expect(Redactor.of([secret]).text(inspect(inspect(secret)))).toBe(`'\\'${REDACTED}\\''`);
  });

  test("blanks a secret with a ' as shells quote it: '\\'' (bash's set -x, sh) and '\"'\"' (Python's shlex.quote), JSON-escaped too", () => {
    const secret = "tok'en-S3cret";
    const bash = `'${secret.replace(/'/g, "'\\''")}'`;
    const shlex = `'${secret.replace(/'/g, `'"'"'`)}'`;
    for (const shown of [bash, shlex]) {
      expect(Redactor.of([secret]).text(`+ git clone ${shown} x`)).toBe(`+ git clone '${REDACTED}' x`);
      expect(Redactor.of([secret]).text(JSON.stringify({ cmd: `git clone ${shown}` }))).toBe(`{"cmd":"git clone '${REDACTED}'"}`);
    }
    // A secret that starts and ends with the quote: quoted, it is '\'' then the rest.
    expect(Redactor.of(["'edge'"]).text(`run ''\\''edge'\\'''`)).toBe(`run '${REDACTED}'`);
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

  test.each([
    ["MIME, 76 columns, CRLF", 76, "\r\n"],
    ["PEM, 64 columns, LF", 64, "\n"],
  ])("blanks a base64 echo wrapped in lines (%s), wherever a line break falls inside the secret", (_name, width, eol) => {
    const secret = "sk-wrapped-secret-value-0123456789";
    for (let offset = 0; offset < 60; offset += 1) {
      const encoded = Buffer.from(`${"u".repeat(offset)}${secret}:tail`).toString("base64");
      const wrapped = encoded.replace(new RegExp(`(.{${width}})`, "g"), `$1${eol}`);
      const out = Redactor.of([secret]).text(wrapped);
      expect(out).toContain(REDACTED);
      const left = out.split(REDACTED).map((part) => part.replace(/\s/g, ""));
      expect(Buffer.from(left.join(""), "base64").toString("latin1")).not.toContain("secret-value");
    }
  });

  // One pattern for the whole set, as before, was too large for V8 past ~56 such secrets.
  test("a set of 200 secrets (a thread's remembered submit tokens) scrubs all their forms", () => {
    const secrets = Array.from({ length: 200 }, (_, i) => `tok_${String(i).padStart(3, "0")}_${"ab12cd34ef56gh78ij90kl12mn34".slice(i % 7)}`);
    const r = Redactor.of(secrets);
    const [a, b, c] = [secrets[5], secrets[117], secrets[199]];
    const wrapped = Buffer.from(`x:${c}`).toString("base64").replace(/(.{16})/g, "$1\n");
    const out = r.text(`raw ${a}; encoded ${encodeURIComponent(`/${b}`)}; 50% done; base64\n${wrapped}`);
    for (const secret of [a, b, c]) expect(out).not.toContain(secret);
    expect(out).toContain(`raw ${REDACTED}; encoded %2F${REDACTED}; 50% done; base64`);
    expect(r.text(`plain text mentions ${a} only`)).toBe(`plain text mentions ${REDACTED} only`);
  });

  test("a secret that starts inside the end of another (a PIN after a token ending in its digits) is blanked whole", () => {
    const r = Redactor.of(["user:00", "0000"]);
    expect(r.text("user:000000")).toBe(REDACTED);
    expect(r.text(`{"v":"user:000000"}`)).toBe(`{"v":"${REDACTED}"}`);
    expect(r.text("u=user%3A000000")).toBe(`u=${REDACTED}`);
    expect(Redactor.of(["Zaaaaaaaaa", "aaaaaaaaaa"]).text(`${"Z"}${"a".repeat(19)} end`)).toBe(`${REDACTED} end`);
  });

  test("a hex dump of a secret is blanked in either case; a secret under 4 bytes has no hex form (numbers stay)", () => {
    const secret = "sk-live-9f8e7d6c5b4a";
    const hex = Buffer.from(secret).toString("hex");
    expect(Redactor.of([secret]).text(`bytes: ${hex} / ${hex.toUpperCase()}`)).toBe(`bytes: ${REDACTED} / ${REDACTED}`);
    expect(Redactor.of(["12"]).text("id 3132")).toBe("id 3132");
  });

  test("short secrets are blanked however short", () => {
    const r = Redactor.of(["q7Z4", "x"]);
    expect(r.text("token q7Z4 and x")).toBe(`token ${REDACTED} and ${REDACTED}`);
    // base64("q7Z4") is "cTdaNA==": the characters that encode only the secret go, the padding stays.
    expect(r.text("b64 cTdaNA==")).toBe(`b64 ${REDACTED}A==`);
  });

  test.each(["k", "W7", "Q9z"])("a secret of %j, too short for a base64 run of its own, is found by decoding base64 text", (secret) => {
    const r = Redactor.of([secret]);
    for (const prefix of ["", "X", "XY", "user:"]) {
      const text = Buffer.from(`${prefix}${secret}`);
      for (const encoded of [text.toString("base64"), text.toString("base64url"), text.toString("base64").replace(/=+$/, "")]) {
        // Two or three base64 characters alone are any short word: a token is read from 4 characters on.
        expect(r.text(`auth ${encoded} end`)).toBe(encoded.length < 4 ? `auth ${encoded} end` : `auth ${REDACTED} end`);
      }
    }
    // Glued after a path or a word: the token starts earlier than the encoded value.
    const basic = Buffer.from(`user:${secret}`).toString("base64");
    expect(r.text(`see https://logs.test/auth/${basic} for details`)).toBe(`see https://logs.test/auth/${REDACTED} for details`);
    expect(r.text(`id-${basic}`)).toBe(`id-${REDACTED}`);
    // Followed by the other alphabet's separator and more: the value is judged without its suffix.
    const url = Buffer.from(`user:${secret}`).toString("base64url");
    expect(r.text(`${url}_v2 ${url}-1 cred=${url}-retry`)).toBe(`${REDACTED}_v2 ${REDACTED}-1 cred=${REDACTED}-retry`);
    // Base64 of a JSON body quoting it (a job that echoes the headers it got).
    expect(r.text(`"b64":"${Buffer.from(JSON.stringify({ "x-key": secret })).toString("base64")}"`)).toBe(`"b64":"${REDACTED}"`);
    // Binary data holds any short value by chance: it is left whole.
    const binary = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.from(secret), Buffer.from([0x00, 0x9c])]).toString("base64");
    expect(r.text(`image ${binary}`)).toBe(`image ${binary}`);
    // Text that is not base64 of the secret is kept.
    expect(r.text("plain words stay")).toBe("plain words stay");
  });

  test("a short secret's base64 is searched from after separators only in tokens too short to be data, at most 32 times", () => {
    const r = Redactor.of(["W7"]);
    const basic = Buffer.from("user:W7").toString("base64");
    // Read from every separator, a long token of them costs its length squared (seconds for 100 KB).
    const prefix = (parts: number, part: string) => Array.from({ length: parts }, () => part).join("/");
    expect(r.text(`${prefix(10, "aa")}/${basic}`)).toBe(`${prefix(10, "aa")}/${REDACTED}`);
    expect(r.text(`${prefix(40, "aa")}/${basic}`)).toBe(`${prefix(40, "aa")}/${basic}`);
    const long = `${"A".repeat(4100)}/${basic}`;
    expect(r.text(long)).toBe(long);
    // A large image is read from its start only.
    const image = Buffer.from(Array.from({ length: 600_000 }, (_, i) => (i * 7919) % 251)).toString("base64");
    expect(r.text(image)).toBe(image);
  });

  test("a short secret's base64 right after a JSON escape (`\\n`, `\\t`) in a string: read from after the escape's letter", () => {
    const r = Redactor.of(["TS"]);
    const value = Buffer.from("u:TS:x").toString("base64");
    for (const letter of ["n", "t", "r", "b", "f"]) {
      expect(r.text(`line\\${letter}${value}\\tend`)).toBe(`line\\${letter}${REDACTED}\\tend`);
      expect(r.spans(`"\\${letter}${value}"`)).toEqual([[3, 3 + value.length]]);
    }
    // Without the backslash the letter is part of a word: not read from inside it.
    expect(r.text(`line n${value}`)).toBe(`line n${value}`);
  });

  test("a secret holding line breaks: each line alone, and with CRLF line ends (raw or JSON-escaped)", () => {
    const pem = "-----BEGIN KEY-----\nAbCdEf123XyZ\n-----END KEY-----";
    const r = Redactor.of([pem]);
    expect(r.text(`got ${pem}`)).toBe(`got ${REDACTED}`);
    expect(r.text(`got ${pem.replace(/\n/g, "\r\n")}`)).toBe(`got ${REDACTED}`);
    expect(r.text(`"got ${JSON.stringify(pem.replace(/\n/g, "\r\n")).slice(1, -1)}"`)).toBe(`"got ${REDACTED}"`);
    // One line per content block: each block is scrubbed alone, so each line must go alone.
    expect(pem.split("\n").map((line) => r.text(line))).toEqual([REDACTED, REDACTED, REDACTED]);
  });

  test("a secret holding backslash escapes is also blanked as a server that decodes them echoes it", () => {
    // The 14 characters `tok\tAbc123XyZ`; echoed decoded (a real tab), then escaped by a log line or JSON it would read as the secret again.
    const secret = "tok\\tAbc123XyZ";
    const redactor = Redactor.of([secret]);
    expect(redactor.text(`got tok\tAbc123XyZ.`)).toBe(`got ${REDACTED}.`);
    expect(redactor.text(`got ${secret}.`)).toBe(`got ${REDACTED}.`);
    expect(JSON.stringify(redactor.deep({ echoed: "tok\tAbc123XyZ" }))).not.toContain("Abc123");
    expect(Redactor.of(["k\\x1b9Q"]).text("k\u001b9Q")).toBe(REDACTED);
    expect(Redactor.of(["p\\u00e9ss"]).text("pss: p\u00e9ss")).toBe(`pss: ${REDACTED}`);
    // An escape alone decodes to a line break, which is no secret: text keeps its line breaks.
    expect(Redactor.of(["\\n"]).text("a\nb")).toBe("a\nb");
    // The decoded form is one secret, whole: its lines are no secrets of their own, nor is a decoded letter.
    expect(Redactor.of(["k9\\r1"]).text("order of 12 words: k9 unit 1.")).toBe("order of 12 words: k9 unit 1.");
    expect(Redactor.of(["Pa55\\nord"]).text("Your Password works")).toBe("Your Password works");
    expect(Redactor.of(["\\u0041"]).text("A B C")).toBe("A B C");
    // Short decoded forms are blanked only when JSON or a log line would write them as an escape again: no surface
    // escapes an apostrophe, so `\u0027s` echoed decoded (`'s`) spells no credential, and `'s` stays in every answer.
    expect(Redactor.of(["\\u0027s"]).text("the server's answer")).toBe("the server's answer");
    expect(Redactor.of(["\\u0027s"]).text("sent \\u0027s")).toBe(`sent ${REDACTED}`);
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

  test("deep() turns a number or bigint whose decimal text holds a secret into REDACTED; other numbers stay numbers", () => {
    const input = { pin: 482913, inPin: 14829131, other: 48291, list: [482913, 7], big: 482913n, bigOther: 12n, text: "n 482913" };
    const out = Redactor.of(["482913"]).deep(input);
    expect(out).toEqual({
      pin: REDACTED,
      inPin: REDACTED,
      other: 48291,
      list: [REDACTED, 7],
      big: REDACTED,
      bigOther: 12n,
      text: `n ${REDACTED}`,
    });
    const clean = { n: 1, m: [2.5, -3] };
    expect(Redactor.of(["482913"]).deep(clean)).toBe(clean);
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

  // No timer: the scrub runs in a worker, so a scrub that does not end fails the test at its timeout instead of
  // blocking it. With a match tried from every backslash of the run, 40,000 took seconds and this takes hours.
  test.each([
    ["a run of backslashes", "run"],
    ["a run of backslashes before an escaped line break in base64", "wrapped"],
  ])("%s a million long is scrubbed in linear time, and an escaped secret after it is still found", async (_label, kind) => {
    const worker = new Worker(
      `const { parentPort, workerData } = require("node:worker_threads");
       const { Redactor, REDACTED } = require(workerData.module);
       const secret = "sk-live-9f8e7d6c5b4a";
       const backslashes = "\\\\".repeat(1000000);
       const run = workerData.kind === "run" ? backslashes : "QUJD" + backslashes + "nREVG";
       const escaped = [...secret].map((c) => "\\\\\\\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")).join("");
       const scrubbed = Redactor.of([secret]).text(run + " " + escaped);
       parentPort.postMessage([scrubbed.length === run.length + 1 + REDACTED.length, scrubbed.startsWith(run), scrubbed.endsWith(" " + REDACTED)]);`,
      { eval: true, execArgv: ["--require", TSX_CJS_REGISTER], workerData: { kind, module: path.join(__dirname, "../../lib/shared/redact.ts") } },
    );
    try {
      expect(await new Promise((resolve, reject) => worker.once("message", resolve).once("error", reject))).toEqual([true, true, true]);
    } finally {
      await worker.terminate();
    }
  });

  test("cutOff: a text cut off inside a secret holding spaces is cut where the secret's first characters begin, in any form", () => {
    const redactor = Redactor.of(["correct horse battery staple"]);
    const cutAt = (text: string) => text.slice(0, redactor.cutOff(text, text.lastIndexOf(" ") + 1));
    expect(cutAt("pass correct horse batt")).toBe("pass ");
    expect(cutAt("pass=correct\\u0020horse%20battery st")).toBe("pass=");
    expect(cutAt("pass correct horses bat")).toBe("pass correct horses ");
    // Nothing to cut before the caller's own cut; an empty set cuts only there.
    expect(cutAt("nothing secret here")).toBe("nothing secret here".slice(0, 15));
    expect(Redactor.none.cutOff("correct horse batt", 14)).toBe(14);
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

  test("Basic: the decoded 'user:password' and the password alone, not the user name alone", () => {
    const token = Buffer.from("alice:hunter2:pw").toString("base64");
    const secrets = headerSecrets({ Authorization: `Basic ${token}` });
    expect(secrets).toEqual(expect.arrayContaining([`Basic ${token}`, token, "alice:hunter2:pw", "hunter2:pw"]));
    expect(secrets).not.toContain("alice");
    expect(secrets).not.toContain("Basic");
    const r = Redactor.of(secrets);
    expect(r.text("authenticated as alice:hunter2:pw; password hunter2:pw")).toBe(`authenticated as ${REDACTED}; password ${REDACTED}`);
  });

  test("Basic: a token that does not decode to UTF-8 text adds nothing decoded; with an empty password the user part is the credential", () => {
    const binary = Buffer.from([0xff, 0xfe, 0x3a, 0x80]).toString("base64");
    expect(headerSecrets({ Authorization: `Basic ${binary}` })).toEqual([`Basic ${binary}`, binary]);
    // An API key sent as the user name (Stripe's `sk_…:`): a server answers "No such API key: sk_…".
    const keyAsUser = Buffer.from("sk_test_51HxKey:").toString("base64");
    const secrets = headerSecrets({ Authorization: `basic ${keyAsUser}` });
    expect(secrets).toEqual([`basic ${keyAsUser}`, keyAsUser, "sk_test_51HxKey:", "sk_test_51HxKey"]);
    expect(Redactor.of(secrets).text("No such API key: sk_test_51HxKey")).toBe(`No such API key: ${REDACTED}`);
  });

  test("Cookie: each name=value pair and each value, not the names alone", () => {
    const secrets = headerSecrets({ Cookie: 'theme=dark; sid=s3ss10n ;  csrf="q\\w";;empty=' });
    expect(secrets).toEqual(
      expect.arrayContaining(["theme=dark", "dark", "sid=s3ss10n", "s3ss10n", 'csrf="q\\w"', '"q\\w"', "q\\w"]),
    );
    for (const name of ["theme", "sid", "csrf", "empty", "empty=", ""]) expect(secrets).not.toContain(name);
    expect(Redactor.of(secrets).text("echo sid=s3ss10n")).toBe(`echo ${REDACTED}`);
  });

  test("key=value parameters (SigV4, Digest): each credential value unquoted; descriptive ones and names are not added", () => {
    const scope = "AKIDEXAMPLE/20240101/us-east-1/s3/aws4_request";
    const sigv4 = `AWS4-HMAC-SHA256 Credential=${scope}, SignedHeaders=host;x-amz-date, Signature=fe5f80f77d5fa3be`;
    const digest =
      'Digest username="alice", realm="api", nonce="dcd98b71", uri="/x", algorithm=MD5, qop=auth, nc=00000001, cnonce="0a4f113b", ' +
      'response="6629fae49393a053", opaque="5ccc069c"';
    const secrets = headerSecrets({ Authorization: sigv4, "Proxy-Authorization": digest });
    expect(secrets).toEqual(
      expect.arrayContaining([scope, "fe5f80f77d5fa3be", "6629fae49393a053", "dcd98b71", "0a4f113b"]),
    );
    const descriptives = ["alice", "api", "/x", "MD5", "auth", "00000001", "host;x-amz-date", "Signature", "response", "AWS4-HMAC-SHA256"];
    for (const descriptive of descriptives) {
      expect(secrets).not.toContain(descriptive);
    }
    expect(Redactor.of(secrets).text("bad signature fe5f80f77d5fa3be, response 6629fae49393a053")).toBe(
      `bad signature ${REDACTED}, response ${REDACTED}`,
    );
  });

  test.each(["signature", "response", "Credential", "token", "client_secret", "password", "apikey", "cnonce", "hmac", "proof", "authorization"])(
    "a parameter list whose only credential parameter is %s is read: its value is a secret of its own",
    (key) => {
      expect(headerSecrets({ "X-Proof": `Custom ${key}="v4lu3-9f8e", realm="api"` })).toContain("v4lu3-9f8e");
    },
  );

  test("a quoted parameter's value with quoted-pairs (`\\d`) is also a secret as a server reads it, unescaped", () => {
    const r = Redactor.of(headerSecrets({ Authorization: 'Custom token="abc\\def-77", realm="api"' }));
    expect(r.text("unknown token abcdef-77")).toBe(`unknown token ${REDACTED}`);
  });

  test("no empty strings, and base64 padding is not read as a parameter", () => {
    const secrets = headerSecrets({ Authorization: "Bearer abc==", "X-Key": "k=", "X-Sig": "sig=1,b=" });
    expect(secrets).not.toContain("");
    expect(secrets).not.toContain("=");
    expect(secrets).toEqual(expect.arrayContaining(["Bearer abc==", "abc==", "k=", "sig=1,b=", "1"]));
  });

  test("the token after a scheme, however many spaces stand between them", () => {
    expect(headerSecrets({ Authorization: "Bearer  tok-2" })).toEqual(["Bearer  tok-2", "tok-2"]);
  });

  test("parameters with no credential among them (Cache-Control, Prefer) add no parts", () => {
    expect(headerSecrets({ "Cache-Control": "max-age=0", Prefer: "return=minimal, wait=5" })).toEqual([
      "max-age=0",
      "return=minimal, wait=5",
      "wait=5",
    ]);
  });
});

describe("recordSecrets", () => {
  test("the non-empty string values", () => {
    expect(recordSecrets({ a: "x", b: "", c: 3, d: { e: "f" } })).toEqual(["x"]);
    expect(recordSecrets(undefined)).toEqual([]);
  });
});
