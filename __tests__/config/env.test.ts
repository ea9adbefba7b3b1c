import { describe, expect, it } from "@jest/globals";
import { resolveEnvReferences } from "../../lib/config";

const env: NodeJS.ProcessEnv = { TOKEN: "t0k", HOME: "/home/me", EMPTY: "", _X1: "x" };

describe("resolveEnvReferences", () => {
  it("replaces a whole $NAME or ${NAME} string", () => {
    expect(resolveEnvReferences("$TOKEN", env)).toEqual({ value: "t0k", missing: [], expanded: ["t0k"], literal: [] });
    expect(resolveEnvReferences("${TOKEN}", env)).toEqual({ value: "t0k", missing: [], expanded: ["t0k"], literal: [] });
    expect(resolveEnvReferences("$_X1", env).value).toBe("x");
  });

  it("interpolates ${NAME} inside a longer string", () => {
    expect(resolveEnvReferences("Bearer ${TOKEN}", env).value).toBe("Bearer t0k");
    expect(resolveEnvReferences("${HOME}/.cache/${TOKEN}", env).value).toBe("/home/me/.cache/t0k");
  });

  it("leaves $NAME inside a longer string literal", () => {
    expect(resolveEnvReferences("Bearer $TOKEN", env).value).toBe("Bearer $TOKEN");
    expect(resolveEnvReferences("cost: 5$", env).value).toBe("cost: 5$");
    expect(resolveEnvReferences("$", env).value).toBe("$");
    expect(resolveEnvReferences("${not valid}", env).value).toBe("${not valid}");
    expect(resolveEnvReferences("$1abc", env).value).toBe("$1abc");
  });

  it("reports the names written $NAME inside a longer string, not the escaped or braced ones", () => {
    expect(resolveEnvReferences({ a: "Bearer $TOKEN", b: ["$HOME/x:$TOKEN", "$$UNSEEN ${TOKEN} $1abc cost: 5$"] }, env).literal).toEqual(["TOKEN", "HOME"]);
  });

  it("treats $$ as an escaped dollar", () => {
    expect(resolveEnvReferences("$$HOME", env).value).toBe("$HOME");
    expect(resolveEnvReferences("a$${TOKEN}b", env).value).toBe("a${TOKEN}b");
    expect(resolveEnvReferences("$$$$", env).value).toBe("$$");
    expect(resolveEnvReferences("$$${TOKEN}", env).value).toBe("$t0k");
  });

  it("counts an empty variable as set", () => {
    expect(resolveEnvReferences("$EMPTY", env)).toEqual({ value: "", missing: [], expanded: [], literal: [] });
  });

  it("reports distinct unset names in order of appearance and keeps their references", () => {
    const result = resolveEnvReferences(
      { a: "$B_MISSING", b: ["Bearer ${A_MISSING}", "${B_MISSING}"], c: "${TOKEN}" },
      env,
    );
    expect(result.missing).toEqual(["B_MISSING", "A_MISSING"]);
    expect(result.value).toEqual({ a: "$B_MISSING", b: ["Bearer ${A_MISSING}", "${B_MISSING}"], c: "t0k" });
  });

  it("recurses through objects and arrays without resolving keys or touching non-strings", () => {
    const input = { $TOKEN: { list: [1, true, null, "$TOKEN", { deep: "${HOME}" }] } };
    const result = resolveEnvReferences(input, env);
    expect(result.value).toEqual({ $TOKEN: { list: [1, true, null, "t0k", { deep: "/home/me" }] } });
    expect(input.$TOKEN.list[3]).toBe("$TOKEN");
  });

  it("reports every distinct value it substituted, whole or interpolated, for redaction", () => {
    const result = resolveEnvReferences(
      { url: "https://h/mcp?key=${TOKEN}", args: ["--home", "$HOME", "${TOKEN}"], env: { E: "$EMPTY", L: "$$TOKEN" } },
      env,
    );
    expect(result.expanded).toEqual(["t0k", "/home/me"]);
  });

  it("keeps a JSON __proto__ key as a plain key", () => {
    const input = JSON.parse('{"__proto__": {"polluted": "$TOKEN"}}') as unknown;
    const result = resolveEnvReferences(input, env).value as Record<string, unknown>;
    expect(Object.getPrototypeOf(result)).toBe(Object.prototype);
    expect(Object.prototype.hasOwnProperty.call(result, "__proto__")).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("counts a name every object inherits as unset, in the real process.env too", () => {
    const input = { whole: "$toString", braced: "${constructor}", inside: "https://h/${valueOf}/mcp", proto: "$__proto__" };
    for (const source of [env, process.env]) {
      const result = resolveEnvReferences(input, source);
      expect(result.value).toEqual(input);
      expect(result.missing).toEqual(["toString", "constructor", "valueOf", "__proto__"]);
      expect(result.expanded).toEqual([]);
    }
  });
});
