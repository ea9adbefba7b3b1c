/**
 * The longest delay `setTimeout` honours: Node fires a timer set above 2^31−1 ms after 1 ms instead
 * (with a TimeoutOverflowWarning), so a huge configured timeout would act as no time at all.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** The same bound in seconds, for config fields and options given in seconds. */
export const MAX_TIMER_SECONDS = MAX_TIMER_MS / 1000;

/** `ms` as a delay `setTimeout` keeps: at most MAX_TIMER_MS, at least 0 (NaN counts as 0). */
export function timerDelay(ms: number): number {
  return ms > MAX_TIMER_MS ? MAX_TIMER_MS : ms > 0 ? ms : 0;
}

/** `setTimeout` with the delay clamped by `timerDelay`; every timer of ours whose delay comes from config goes here. */
export function setClampedTimeout(callback: () => void, ms: number): NodeJS.Timeout {
  return setTimeout(callback, timerDelay(ms));
}
