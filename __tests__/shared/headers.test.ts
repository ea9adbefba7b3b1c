import { describe, expect, test } from "@jest/globals";
import {
  assertSendableHeader,
  collapseHeaderCase,
  CredentialError,
  headerNameProblem,
  headerValueProblem,
  mergeHeaders,
  shownHeaderName,
} from "../../lib/shared";

describe("mergeHeaders", () => {
  test("an override replaces a key of any case and keeps the spelling already in use", () => {
    const merged = mergeHeaders({ authorization: "Static s", "X-A": "1" }, { Authorization: "Bearer t", "x-b": "2" });
    expect(merged).toEqual({ authorization: "Bearer t", "X-A": "1", "x-b": "2" });
    expect(Object.isFrozen(merged)).toBe(true);
  });

  test("the base is not modified", () => {
    const base = Object.freeze({ "X-A": "1" });
    mergeHeaders(base, { "x-a": "2" });
    expect(base).toEqual({ "X-A": "1" });
  });
});

describe("collapseHeaderCase", () => {
  test("the later value wins under the first spelling", () => {
    expect(collapseHeaderCase({ Authorization: "old", other: "o", authorization: "new" })).toEqual({ Authorization: "new", other: "o" });
  });

  test("returns the same object when nothing collides", () => {
    const headers = { a: "1", B: "2" };
    expect(collapseHeaderCase(headers)).toBe(headers);
  });
});

describe("header validation", () => {
  test.each([
    ["a\r\nX-Evil: 1", "contains a line break (CR or LF)"],
    ["a\nb", "contains a line break (CR or LF)"],
    ["a\rb", "contains a line break (CR or LF)"],
    ["a\u0000", "contains a NUL character"],
    ["a\tb", "contains a control character"],
    ["a\u007f", "contains a control character"],
    ["café", "contains a non-ASCII character"],
    ["token\u2028", "contains a non-ASCII character"],
    [" lead", "has leading or trailing whitespace"],
    ["trail ", "has leading or trailing whitespace"],
  ])("%j is rejected: %s", (value, problem) => {
    expect(headerValueProblem(value)).toBe(problem);
  });

  test.each(["Bearer abc.def-ghi_jkl", "", "a b  c", "!#$%&'*+-.^_`|~"])("%j is sendable", (value) => {
    expect(headerValueProblem(value)).toBeNull();
  });

  test.each([
    ["X Api", "is not a valid HTTP header name"],
    ["X-Api:", "is not a valid HTTP header name"],
    ["", "is not a valid HTTP header name"],
    ["Mcp-Session-Id", "is managed by the MCP transport and cannot be set"],
    ["Host", "is managed by the MCP transport and cannot be set"],
  ])("header name %j: %s", (name, problem) => {
    expect(headerNameProblem(name)).toBe(problem);
  });

  test.each([
    ["X-Api-Key", "X-Api-Key"],
    ["Authorization: Bearer sk-123", "Authorization…"],
    ["X\nForged: line", "X…"],
    [" lead", "…"],
    ["a".repeat(70), `${"a".repeat(64)}…`],
  ])("header name %j is shown as %j", (name, shown) => {
    expect(shownHeaderName(name)).toBe(shown);
  });

  test("the error names server, header and layer, never the value", () => {
    const error = (() => {
      try {
        assertSendableHeader("docs", "X-Api-Key", "secret-value\r\nX-Evil: 1", "headers_from_context");
      } catch (err) {
        return err as Error;
      }
      throw new Error("expected a rejection");
    })();
    expect(error).toBeInstanceOf(CredentialError);
    expect(error.message).toBe(
      "MCP server 'docs': header 'X-Api-Key' from headers_from_context contains a line break (CR or LF); the value is not shown",
    );
  });
});
