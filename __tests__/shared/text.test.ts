/** Reading decoded bytes as text: valid UTF-8 without control characters, or nothing. */
import { describe, expect, test } from "@jest/globals";
import { utf8Text } from "../../lib/shared/text";

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
