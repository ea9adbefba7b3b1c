import { describe, expect, test } from "@jest/globals";
import { getEventListeners } from "node:events";
import { withCallSignal } from "../../lib/shared";

describe("withCallSignal", () => {
  test("a call that leaves its own listener on the signal it got leaves none on the parent", async () => {
    const parent = new AbortController();
    for (let i = 0; i < 50; i += 1) {
      await withCallSignal(parent.signal, async (signal) => {
        signal.addEventListener("abort", () => undefined); // as LangGraph's invoke does, never removed
        expect(signal).not.toBe(parent.signal);
      });
    }
    expect(getEventListeners(parent.signal, "abort")).toHaveLength(0);
  });

  test("the parent aborting aborts the call's signal with the same reason; an aborted parent gives an aborted signal", async () => {
    const parent = new AbortController();
    const reason = new Error("stopping");
    const seen = withCallSignal(parent.signal, (signal) => new Promise<unknown>((resolve) => signal.addEventListener("abort", () => resolve(signal.reason))));
    parent.abort(reason);
    expect(await seen).toBe(reason);
    expect(await withCallSignal(parent.signal, async (signal) => signal.aborted)).toBe(true);
  });

  test("the call's result and error pass through; the parent is released either way", async () => {
    const parent = new AbortController();
    expect(await withCallSignal(parent.signal, async () => 7)).toBe(7);
    await expect(withCallSignal(parent.signal, async () => Promise.reject(new RangeError("no")))).rejects.toThrow(RangeError);
    expect(getEventListeners(parent.signal, "abort")).toHaveLength(0);
  });
});
