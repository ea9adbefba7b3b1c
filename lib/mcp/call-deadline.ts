import { Deadline, DeadlineExceededError, type DeadlineLimits } from "../shared/deadline";

/** What an attempt sent after its call settled meets (only the interceptor that sent it sees it). */
const CALL_ENDED = new Error("the call had already ended: this attempt was not sent");

/**
 * The bound of one tool call as a whole (SPEC §2.1, §5.2: `tool_call_timeout` bounds calls): the interceptors before
 * and after `next`, every attempt they send, and the stdio workspace walks around them, under one timer per call
 * however many attempts there are.
 *
 * `tool_call_timeout` counts time without a sign of life: the call's progress notifications and the server's answer
 * restart it (progress only reaches it while a request is in flight). When it runs out:
 * - while a workspace walk (or the result's path translation) runs, it is cut and the count restarts: a slow file
 *   system costs the listing (or the translation), not the call;
 * - while a request is in flight, every request in flight is stopped; their timeout errors go back through the
 *   interceptors, as a server's timeout always did, and the count restarts once for them to finish; no attempt is sent
 *   after that;
 * - while a new session starts and nothing else above runs, nothing happens (`session_init_timeout` bounds the start);
 *   the count restarts once the start is over or a request is sent. A start holds the count off only while it is all
 *   the call waits for: an attempt in flight meanwhile (an interceptor sending `next` twice at once) is bounded as ever;
 * - otherwise (interceptor code is running, or that last restart ran out too) the call fails, and whatever its
 *   interceptors do later goes nowhere.
 * `max_total_timeout` ends the call at once, and so does the run's cancellation, unless the server already answered the
 * call and a count bounds what follows: then the requests in flight stop, no attempt is sent, a walk or path
 * translation is cut (now or when it starts), and the interceptors finish within that count, so that the answer still
 * reaches a caller that needs it (a durable task's submit learns of the job it started, and its service cancels it).
 * Once the call settled (`end`), no attempt is sent any more and none stays in flight.
 */
export class CallDeadline extends Deadline {
  /** Whether `tool_call_timeout` applies (progress then restarts it). */
  readonly counts: boolean;
  /** Whether a timer bounds the call (`tool_call_timeout` or `max_total_timeout`). */
  private readonly bounded: boolean;
  /** Whether the server answered an attempt. */
  private answered = false;
  /** How many requests were handed a live signal: more than one when an interceptor sent the call again. */
  private sent = 0;
  private starting = 0;
  /**
   * The requests in flight, each with a signal of its own rather than the call's: the SDK never removes a request's
   * abort listener, so one on a shared signal would cancel (`notifications/cancelled`) a request already answered
   * when the call (or another attempt's request) ends later, and each attempt would add one more. `inFlight` is the
   * first; `others` (made for the first attempt sent while one is in flight) holds those sent at once with it.
   */
  private inFlight: AbortController | undefined;
  private others: Set<AbortController> | undefined;
  /** How to cut the walks running (made for the first: most calls never walk off the event loop). */
  private walks: Set<() => void> | undefined;
  /**
   * The run was cancelled once the server answered: what remains only hands the answer on, so a walk or path translation
   * (which would wait for a hung file system until a bound ends the call, and the answer with it) is cut at once.
   */
  private walksRefused = false;

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

  /** A new session starts for the call: `session_init_timeout` bounds it, not this count (see the class). */
  beginStart(): void {
    this.starting++;
  }

  endStart(): void {
    this.starting--;
    this.extend();
  }

  /** A request is sent: the signal to hand it (aborted already when the call ended, so nothing is sent). */
  beginSend(): AbortSignal {
    if (this.controller.signal.aborted) return this.controller.signal;
    this.sent++;
    // The count another attempt's start held off now bounds this request: it gets a full one, as after a start.
    if (this.starting > 0 && !this.counting()) this.extend();
    const request = new AbortController();
    if (this.inFlight === undefined) this.inFlight = request;
    else (this.others ??= new Set()).add(request);
    return request.signal;
  }

  /** How many times the call was sent so far (every attempt an interceptor sent through `next`). */
  get sends(): number {
    return this.sent;
  }

  /** The request `beginSend` gave `signal` to is over. */
  endSend(signal: AbortSignal): void {
    if (this.inFlight?.signal === signal) {
      this.inFlight = undefined;
      return;
    }
    for (const request of this.others ?? []) {
      if (request.signal !== signal) continue;
      this.others?.delete(request);
      return;
    }
  }

  /** Whether a request is in flight. */
  private sending(): boolean {
    return this.inFlight !== undefined || (this.others !== undefined && this.others.size > 0);
  }

  /** Whether the count bounds something running now (a request or a walk), which a start then does not hold off. */
  private counting(): boolean {
    return this.sending() || (this.walks !== undefined && this.walks.size > 0);
  }

  /** Stops every request in flight. */
  private abortRequests(reason: unknown): void {
    this.inFlight?.abort(reason);
    for (const request of this.others ?? []) request.abort(reason);
  }

  /**
   * A workspace walk (or path translation) runs: should the count run out meanwhile, `cut` ends it instead of the call
   * (every walk running, those of attempts sent at once included).
   */
  walking(cut: () => void): void {
    // Once the call ended, an attempt whose session started since has nothing to send: its walk would only hold it.
    if (this.walksRefused || this.hasStopped) return cut();
    if (this.starting > 0 && !this.counting()) this.extend();
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
    if (this.cutWalks()) return void this.timer?.refresh();
    const error = new DeadlineExceededError(timeoutMs, "timeout");
    const aborted = this.controller.signal.aborted;
    if (!aborted && this.sending()) {
      this.controller.abort(error);
      this.abortRequests(error);
      // The abort stopped the timer's restarts (see `extend`): this one is the interceptors' last.
      return void this.timer?.refresh();
    }
    // Nothing is sent once the call's signal aborted, so a start still running is of no use to it any more.
    if (!aborted && this.starting > 0) return void this.timer?.refresh();
    this.stop(error);
  }

  /**
   * The call settled (its outcome, or its failure, is what the caller gets): an attempt an interceptor still sends goes
   * nowhere, so none is sent after this (a hedge sent once the race was lost would otherwise reach the server after the
   * model read that the call was not sent again), a request still in flight is stopped and a walk is cut.
   */
  end(): void {
    this.dispose();
    this.walksRefused = true;
    if (!this.controller.signal.aborted) this.controller.abort(CALL_ENDED);
    this.abortRequests(CALL_ENDED);
    this.cutWalks();
  }

  // Both may run inside `Deadline`'s constructor (the run was cancelled already), before this class's fields exist:
  // `answered` and `bounded` are undefined then, and the call ends at once.
  protected override cancelled(reason: unknown): void {
    if (!this.answered || !this.bounded || this.hasStopped) return super.cancelled(reason);
    if (!this.controller.signal.aborted) this.controller.abort(reason);
    this.abortRequests(reason);
    this.walksRefused = true;
    this.cutWalks();
  }

  protected override stop(reason: unknown): void {
    super.stop(reason);
    this.abortRequests(reason);
    // A walk still running is left behind too: its attempt ends now (nothing is sent) and releases its session, rather
    // than hold it until a hung file system answers.
    this.cutWalks();
  }
}
