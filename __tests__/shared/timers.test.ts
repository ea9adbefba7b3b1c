import { afterEach, beforeEach, describe, expect, jest, test } from "@jest/globals";
import { DeadlineExceededError, withDeadline, withExtendableDeadline } from "../../lib/shared/deadline";
import { MAX_TIMER_MS, setClampedTimeout, timerDelay } from "../../lib/shared/timers";

// Fake timers behave like Node's: a delay above 2^31−1 ms fires after 1 ms.
beforeEach(() => {
  jest.useFakeTimers({ doNotFake: ["nextTick", "queueMicrotask", "setImmediate"] });
});
afterEach(() => {
  jest.useRealTimers();
});

/** Settles `promise` into an observable state without awaiting real time. */
function track<T>(promise: Promise<T>): { state: () => "pending" | "resolved" | "rejected"; error: () => unknown } {
  let state: "pending" | "resolved" | "rejected" = "pending";
  let error: unknown;
  promise.then(
    () => (state = "resolved"),
    (err: unknown) => {
      state = "rejected";
      error = err;
    },
  );
  return { state: () => state, error: () => error };
}

const never = () => new Promise<never>(() => undefined);

describe("timers hold at their limit", () => {
  test("a delay above the longest timer is clamped to it instead of firing at once", async () => {
    expect(timerDelay(1e12)).toBe(MAX_TIMER_MS);
    expect(timerDelay(-5)).toBe(0);
    const fired = jest.fn();
    setClampedTimeout(fired, 1e12);
    await jest.advanceTimersByTimeAsync(MAX_TIMER_MS - 1);
    expect(fired).not.toHaveBeenCalled();
    await jest.advanceTimersByTimeAsync(1);
    expect(fired).toHaveBeenCalledTimes(1);
  });

  test("withDeadline with a huge timeout does not fire early", async () => {
    const run = track(withDeadline(never, 1e12));
    await jest.advanceTimersByTimeAsync(24 * 3600 * 1000);
    expect(run.state()).toBe("pending");
  });
});

describe("withExtendableDeadline", () => {
  test("extend() restarts the timeout; without it the timeout fires", async () => {
    let extend!: () => void;
    const run = track(withExtendableDeadline((_signal, ext) => ((extend = ext), never()), { timeoutMs: 100 }));
    for (let i = 0; i < 10; i += 1) {
      await jest.advanceTimersByTimeAsync(90);
      extend();
    }
    expect(run.state()).toBe("pending");
    await jest.advanceTimersByTimeAsync(100);
    expect(run.state()).toBe("rejected");
    expect(run.error()).toBeInstanceOf(DeadlineExceededError);
    expect((run.error() as DeadlineExceededError).kind).toBe("timeout");
  });

  test("maxTotalMs caps the work however often it is extended, and aborts its signal", async () => {
    let extend!: () => void;
    let signal!: AbortSignal;
    const run = track(
      withExtendableDeadline((s, ext) => ((extend = ext), (signal = s), never()), { timeoutMs: 100, maxTotalMs: 250 }),
    );
    for (let i = 0; i < 2; i += 1) {
      await jest.advanceTimersByTimeAsync(90);
      extend();
    }
    expect(run.state()).toBe("pending");
    await jest.advanceTimersByTimeAsync(90);
    expect(run.state()).toBe("rejected");
    const error = run.error() as DeadlineExceededError;
    expect(error.kind).toBe("maxTotal");
    expect(error.timeoutMs).toBe(250);
    expect(signal.aborted).toBe(true);
  });

  test("a null timeout has no bound", async () => {
    const run = track(withExtendableDeadline(never, { timeoutMs: null }));
    await jest.advanceTimersByTimeAsync(MAX_TIMER_MS);
    expect(run.state()).toBe("pending");
  });
});
