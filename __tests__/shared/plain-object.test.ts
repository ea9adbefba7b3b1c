/**
 * Plain objects are told apart from arrays and class instances also when another realm made them: Node's `fetch` parses
 * a JSON response in Node's own realm, which under jest (or in a `vm` context) is not the code's.
 */
import { runInNewContext } from "node:vm";
import { describe, expect, test } from "@jest/globals";
import { isPlainArray, isPlainObject, nestsDeeperThan } from "../../lib/shared/plain-object";

describe("isPlainArray", () => {
  test("literals, JSON.parse output and another realm's arrays are plain; an Array subclass's instances and non-arrays are not", () => {
    expect(isPlainArray([1])).toBe(true);
    expect(isPlainArray(JSON.parse("[[1]]"))).toBe(true);
    expect(isPlainArray(runInNewContext("[1, 2]"))).toBe(true);
    expect(isPlainArray(new (class Page extends Array<number> {})())).toBe(false);
    expect(isPlainArray(runInNewContext("new (class Page extends Array {})()"))).toBe(false);
    expect(isPlainArray({ length: 0 })).toBe(false);
    expect(isPlainArray(new Uint8Array(1))).toBe(false);
  });
});

describe("isPlainObject", () => {
  test("literals, JSON.parse output and null-prototype objects are plain; arrays, class instances and maps are not", () => {
    expect(isPlainObject({ a: 1 })).toBe(true);
    expect(isPlainObject(JSON.parse('{"a":{"b":1}}'))).toBe(true);
    expect(isPlainObject(Object.create(null))).toBe(true);
    expect(isPlainObject([1])).toBe(false);
    expect(isPlainObject(new (class Point {})())).toBe(false);
    expect(isPlainObject(new Map())).toBe(false);
    expect(isPlainObject(new Date())).toBe(false);
    expect(isPlainObject(Object.create({ inherited: 1 }))).toBe(false);
    expect(isPlainObject(Object.create(Object.create(null)))).toBe(false);
    expect(isPlainObject("text")).toBe(false);
    expect(isPlainObject(null)).toBe(false);
  });

  test("another realm's literals and JSON.parse output are plain; its arrays, class instances and maps are not", () => {
    expect(isPlainObject(runInNewContext("({ a: 1 })"))).toBe(true);
    expect(isPlainObject(runInNewContext('JSON.parse(\'{"a":1}\')'))).toBe(true);
    expect(isPlainObject(runInNewContext("[1]"))).toBe(false);
    expect(isPlainObject(runInNewContext("new (class Point {})()"))).toBe(false);
    expect(isPlainObject(runInNewContext("new Map()"))).toBe(false);
    expect(isPlainObject(runInNewContext("Object.create({ inherited: 1 })"))).toBe(false);
  });
});

test("nestsDeeperThan measures another realm's objects too", () => {
  const deep: unknown = runInNewContext("let v = {}; for (let i = 0; i < 600; i += 1) v = { child: v }; v");
  expect(nestsDeeperThan(deep, 512)).toBe(true);
  expect(nestsDeeperThan(deep, 601)).toBe(false);
});
