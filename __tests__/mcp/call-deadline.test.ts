/**
 * CallDeadline on its own: a walk (or path translation) announced once the call is over. An attempt whose session
 * started after the call ended (its `max_total_timeout`, the run's cancellation) goes on to walk the workspace before
 * it finds it has nothing to send; such a walk must not wait for the file system with the session held.
 */
import { describe, expect, test } from "@jest/globals";
import { CallDeadline } from "../../lib/mcp/call-deadline";

describe("a walk announced after the call ended", () => {
  test("is cut at once", () => {
    const run = new AbortController();
    const failed: unknown[] = [];
    const deadline = new CallDeadline({ timeoutMs: 60_000, maxTotalMs: null }, run.signal, (reason) => failed.push(reason));
    try {
      run.abort(new Error("run cancelled"));
      expect(deadline.hasStopped).toBe(true);
      let cut = false;
      deadline.walking(() => (cut = true));
      expect(cut).toBe(true);
      expect(failed).toHaveLength(1);
    } finally {
      deadline.dispose();
    }
  });
});
