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
 * `max_total_timeout` ends the call at once, and so does the run's cancellation, unless the server already answered the
 * call and a count bounds what follows: then the requests in flight stop, no attempt is sent, and the interceptors
 * finish within that count, so that the answer still reaches a caller that needs it (a durable task's submit learns of
 * the job it started, and its service cancels it).
 */
export class CallDeadline extends Deadline {
  /** Whether `tool_call_timeout` applies (progress then restarts it). */
  readonly counts: boolean;
  /** Whether a timer bounds the call (`tool_call_timeout` or `max_total_timeout`). */
  private readonly bounded: boolean;
  /** Whether the server answered an attempt. */
  private answered = false;
  private starting = 0;
  private sending = 0;
  /**
   * The signal of the requests in flight, not the call's own: the SDK never removes a request's abort listener, so
   * one on the call's signal would cancel (`notifications/cancelled`) a request already answered when the call ends
   * later, and each attempt would add one more. Dropped once none is in flight.
   */
  private inFlight: AbortController | undefined;
  /** How to cut the walks running (made for the first: most calls never walk off the event loop). */
  private walks: Set<() => void> | undefined;

  /** `fail` hears why the call ended early (a `DeadlineExceededError` or the run's abort reason), at most once. */
  constructor(limits: DeadlineLimits, outer: AbortSignal | undefined, fail: (reason: unknown) => void) {
    super(limits, outer, fail);
    this.counts = limits.timeoutMs !== null;
    this.bounded = this.counts || (limits.maxTotalMs ?? null) !== null;
  }

  /** The server answered an attempt: the count restarts for what remains (the walk, the interceptors after `next`). */
  answer(): void {
    this.answered = true;
    this.extend();
  }

  /** A new session starts for the call: `session_init_timeout` bounds it, not this count. */
  beginStart(): void {
    this.starting++;
  }

  endStart(): void {
    this.starting--;
    this.extend();
  }

  /** A request is sent: the signal to hand it (aborted already when the call ended, so nothing is sent). */
  beginSend(): AbortSignal {
    this.sending++;
    if (this.controller.signal.aborted) return this.controller.signal;
    return (this.inFlight ??= new AbortController()).signal;
  }

  endSend(): void {
    if (--this.sending === 0) this.inFlight = undefined;
  }

  /**
   * A workspace walk runs: should the count run out meanwhile, `cut` ends it instead of the call (every walk running,
   * those of attempts sent at once included).
   */
  walking(cut: () => void): void {
    (this.walks ??= new Set()).add(cut);
  }

  /** The walk `walking(cut)` announced is over. */
  walked(cut: () => void): void {
    this.walks?.delete(cut);
  }

  /** Cuts every walk running; whether there was one. */
  private cutWalks(): boolean {
    const walks = this.walks;
    if (walks === undefined || walks.size === 0) return false;
    this.walks = undefined;
    for (const cut of walks) cut();
    return true;
  }

  protected override expire(timeoutMs: number): void {
    if (this.hasStopped) return;
    if (this.starting > 0) return void this.timer?.refresh();
    if (this.cutWalks()) return void this.timer?.refresh();
    const error = new DeadlineExceededError(timeoutMs, "timeout");
    if (this.sending > 0 && !this.controller.signal.aborted) {
      this.controller.abort(error);
      this.inFlight?.abort(error);
      // The abort stopped the timer's restarts (see `extend`): this one is the interceptors' last.
      return void this.timer?.refresh();
    }
    this.stop(error);
  }

  // Both may run inside `Deadline`'s constructor (the run was cancelled already), before this class's fields exist:
  // `answered` and `bounded` are undefined then, and the call ends at once.
  protected override cancelled(reason: unknown): void {
    if (!this.answered || !this.bounded || this.hasStopped) return super.cancelled(reason);
    if (!this.controller.signal.aborted) this.controller.abort(reason);
    this.inFlight?.abort(reason);
  }

  protected override stop(reason: unknown): void {
    super.stop(reason);
    this.inFlight?.abort(reason);
    // A walk still running is left behind too: its attempt ends now (nothing is sent) and releases its session, rather
    // than hold it until a hung file system answers.
    this.cutWalks();
  }
}
