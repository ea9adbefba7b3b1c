import { describe, expect, test } from "@jest/globals";
import { SubmitSecretsMemory } from "../../lib/tasks/submit-secrets";

describe("SubmitSecretsMemory", () => {
  test("per scope: what submits carried, most recent kept within the bound; other scopes see nothing", () => {
    const memory = new SubmitSecretsMemory(10, 3);
    const ann = SubmitSecretsMemory.key("jobs", "ann", "th-1");
    memory.remember(ann, ["a", "b"]);
    expect([...memory.recall(ann)].sort()).toEqual(["a", "b"]);
    memory.remember(ann, ["c", "a", "d"]);
    expect([...memory.recall(ann)].sort()).toEqual(["a", "c", "d"]);
    expect(memory.recall(SubmitSecretsMemory.key("jobs", "ann", "th-2"))).toEqual([]);
    expect(memory.recall(SubmitSecretsMemory.key("other", "ann", "th-1"))).toEqual([]);
    // The key cannot be forged by joining parts differently.
    expect(SubmitSecretsMemory.key("a", "b:c", "d")).not.toBe(SubmitSecretsMemory.key("a:b", "c", "d"));
  });

  test("the least recently used scope is forgotten past the bound; nothing is kept for an empty submit", () => {
    const memory = new SubmitSecretsMemory(2, 8);
    memory.remember("s1", ["x"]);
    memory.remember("s2", ["y"]);
    memory.remember("s1", ["x2"]); // s1 used again: s2 is now the oldest
    memory.remember("s3", ["z"]);
    expect(memory.size).toBe(2);
    expect(memory.recall("s2")).toEqual([]);
    expect([...memory.recall("s1")].sort()).toEqual(["x", "x2"]);
    memory.remember("s4", []);
    expect(memory.recall("s4")).toEqual([]);
    expect(memory.size).toBe(2);
  });

  test("a thread's many pending submits, each with fresh tokens, are all remembered", () => {
    const memory = new SubmitSecretsMemory();
    const scope = SubmitSecretsMemory.key("jobs", "ann", "th-1");
    const submits = Array.from({ length: 100 }, (_, i) => [`bearer-${i}`, `tok-${i}`, `user-${i}`, `cookie-${i}`]);
    for (const values of submits) memory.remember(scope, values);
    expect(new Set(memory.recall(scope))).toEqual(new Set(submits.flat()));
  });

  test("past the total budget whole scopes go, the least recently used first, never the one just used", () => {
    const memory = new SubmitSecretsMemory(100, 10, 6);
    memory.remember("s1", ["a", "b", "c"]);
    memory.remember("s2", ["d", "e"]);
    memory.remember("s1", ["a"]); // s1 used again: s2 is now the oldest
    memory.remember("s3", ["f", "g"]);
    expect(memory.recall("s2")).toEqual([]);
    expect([...memory.recall("s1")].sort()).toEqual(["a", "b", "c"]);
    expect([...memory.recall("s3")].sort()).toEqual(["f", "g"]);
    memory.remember("s4", ["h", "i", "j", "k", "l", "m", "n"]);
    expect(memory.size).toBe(1);
    expect(memory.recall("s4")).toHaveLength(7);
  });
});
