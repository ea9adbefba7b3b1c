import { Deadline, DeadlineExceededError, type DeadlineLimits } from "../shared/deadline";

/**
 * The bound of one tool call as a whole (SPEC §2.1, §5.2: `tool_call_timeout` bounds calls): the interceptors before
 * and after `next`, every attempt they send, and the stdio workspace walks around them, under one timer per call
 * however many attempts there are.
 *
 * `tool_call_timeout` counts time without a sign of life: the call's progress notifications and the server's answer
 * restart it (progress only reaches it while a request is in flight). When it runs out:
 * - while a new session starts, nothing happens (`session_init_timeout` bounds that); the count restarts once it is ready;
 * - while a workspace walk runs, the walk is cut and the count restarts: a slow walk costs the listing, not the call;
 * - while a request is in flight, the request is stopped; its timeout error goes back through the interceptors, as a
 *   server's timeout always did, and the count restarts once for them to finish; no attempt is sent after that;
 * - otherwise (interceptor code is running, or that last restart ran out too) the call fails, and whatever its
 *   interceptors do later goes nowhere.
 * `max_total_timeout` and the run's cancellation end the call at once.
 */
export class CallDeadline extends Deadline {
  /** Whether `tool_call_timeout` applies (progress then restarts it). */
  readonly counts: boolean;
  private starting = 0;
  private sending = 0;
  private cutWalk: (() => void) | undefined;

  /** `fail` hears why the call ended early (a `DeadlineExceededError` or the run's abort reason), at most once. */
  constructor(limits: DeadlineLimits, outer: AbortSignal | undefined, fail: (reason: unknown) => void) {
    super(limits, outer, fail);
    this.counts = limits.timeoutMs !== null;
  }

  /** A new session starts for the call: `session_init_timeout` bounds it, not this count. */
  beginStart(): void {
    this.starting++;
  }

  endStart(): void {
    this.starting--;
    this.extend();
  }

  beginSend(): void {
    this.sending++;
  }

  endSend(): void {
    this.sending--;
  }

  /** A workspace walk runs: should the count run out meanwhile, `cut` ends it instead of the call. */
  walking(cut: () => void): void {
    this.cutWalk = cut;
  }

  /** The walk `walking(cut)` announced is over (a walk cut earlier may finish after another began). */
  walked(cut: () => void): void {
    if (this.cutWalk === cut) this.cutWalk = undefined;
  }

  protected override expire(timeoutMs: number): void {
    if (this.hasStopped) return;
    if (this.starting > 0) return void this.timer?.refresh();
    const cut = this.cutWalk;
    if (cut) {
      this.cutWalk = undefined;
      cut();
      return void this.timer?.refresh();
    }
    const error = new DeadlineExceededError(timeoutMs, "timeout");
    if (this.sending > 0 && !this.controller.signal.aborted) {
      this.controller.abort(error);
      // The abort stopped the timer's restarts (see `extend`): this one is the interceptors' last.
      return void this.timer?.refresh();
    }
    this.stop(error);
  }
}
