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
});
