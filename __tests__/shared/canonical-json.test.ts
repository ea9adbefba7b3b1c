import { expect, test } from "@jest/globals";
import { canonicalJson } from "../../lib/shared/canonical-json";

test("keys are sorted at every depth; equal values give one text", () => {
  expect(canonicalJson({ b: 1, a: { d: [{ y: 1, x: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[{"x":2,"y":1}]},"b":1}');
  expect(canonicalJson({ a: 1, b: 2 })).toBe(canonicalJson({ b: 2, a: 1 }));
});

test("a JSON __proto__ key is kept as a plain key, so values that differ there stay apart", () => {
  const one = canonicalJson(JSON.parse('{"__proto__": {"x": 1}, "k": 1}'));
  const two = canonicalJson(JSON.parse('{"__proto__": {"x": 2}, "k": 1}'));
  expect(one).toBe('{"__proto__":{"x":1},"k":1}');
  expect(one).not.toBe(two);
});
