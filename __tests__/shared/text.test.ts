/** Reading decoded bytes as text: valid UTF-8 without control characters, or nothing. */
import { describe, expect, test } from "@jest/globals";
import { escapeControls, utf8Text } from "../../lib/shared/text";

const bytes = (...values: number[]) => Uint8Array.from(values);

describe("utf8Text", () => {
  test("valid UTF-8 text is read, multi-byte characters included", () => {
    expect(utf8Text(Buffer.from("user:pässwörd €𝄞"))).toBe("user:pässwörd €𝄞");
  });

  test("a control character makes it no text; tabs and line breaks only with `breaks`", () => {
    expect(utf8Text(Buffer.from("a\u0001b"))).toBeUndefined();
    expect(utf8Text(Buffer.from("a\u007fb"), true)).toBeUndefined();
    expect(utf8Text(Buffer.from("a\u001bb"), true)).toBeUndefined();
    for (const brk of ["\t", "\n", "\r"]) {
      expect(utf8Text(Buffer.from(`a${brk}b`))).toBeUndefined();
      expect(utf8Text(Buffer.from(`a${brk}b`), true)).toBe(`a${brk}b`);
    }
  });

  test("bytes that are not UTF-8 are no text: a stray continuation, a cut sequence, an overlong form, a surrogate", () => {
    expect(utf8Text(bytes(0x61, 0x80))).toBeUndefined();
    expect(utf8Text(bytes(0x61, 0xc3))).toBeUndefined();
    expect(utf8Text(bytes(0xe2, 0x82))).toBeUndefined();
    expect(utf8Text(bytes(0xc0, 0xaf))).toBeUndefined();
    expect(utf8Text(bytes(0xe0, 0x80, 0xaf))).toBeUndefined();
    expect(utf8Text(bytes(0xed, 0xa0, 0x80))).toBeUndefined();
    expect(utf8Text(bytes(0xff, 0x61))).toBeUndefined();
  });
});

describe("escapeControls", () => {
  test("C0, DEL, C1, the line and paragraph separators and every bidi control are shown as escapes; other text as it is", () => {
    const controls = ["\u0000", "\u001b", "\u007f", "\u0085", "\u009f", "\u061c", "\u200e", "\u200f", "\u2028", "\u2029"];
    const bidi = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"];
    for (const char of [...controls, ...bidi]) expect(escapeControls(`a${char}b`)).toMatch(/^a\\(x[0-9a-f]{2}|u[0-9a-f]{4})b$/);
    expect(escapeControls("line\nnext\r\ttab")).toBe("line\\nnext\\r\\ttab");
    expect(escapeControls("plain ü 😀 \u200d \u2030")).toBe("plain ü 😀 \u200d \u2030");
  });
});
