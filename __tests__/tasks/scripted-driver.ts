/**
 * A task driver for service tests: it implements our own `McpTaskDriver` interface with scripted answers,
 * records every call, and can hold a call open until the test answers it (or until it is aborted).
 */
import { afterAll, afterEach } from "@jest/globals";
import { McpTasksSettingsSchema, type McpTasksSettings } from "../../lib/config";
import { RecordingLogger } from "../../lib/shared/logger";
import {
  McpTaskDriverRegistry,
  McpTaskService,
  MemoryTaskNotifier,
  TaskSnapshot,
  TaskSubmitRequest,
  type DriverCallOptions,
  type McpTaskDriver,
  type TaskReference,
  type TaskStore,
  type TaskSubmission,
} from "../../lib/tasks";
import { ManualClock, openStore, type Target } from "./store/helpers";

export type Answer = TaskSnapshot | Error | Hold;

/** A call held open until `answer()`; `started` resolves with the call's signal when the driver is called. */
export class Hold {
  readonly started: Promise<AbortSignal>;
  #markStarted!: (signal: AbortSignal) => void;
  #settle: ((answer: TaskSnapshot | Error) => void) | undefined;

  /** `ignoreAbort`: the call never settles by itself, like a server that hangs and ignores cancellation. */
  constructor(readonly ignoreAbort = false) {
    this.started = new Promise((resolve) => (this.#markStarted = resolve));
  }

  run(signal: AbortSignal | undefined): Promise<TaskSnapshot> {
    const own = signal ?? new AbortController().signal;
    this.#markStarted(own);
    return new Promise<TaskSnapshot>((resolve, reject) => {
      this.#settle = (answer) => (answer instanceof Error ? reject(answer) : resolve(answer));
      if (!this.ignoreAbort) own.addEventListener("abort", () => reject(own.reason), { once: true });
    });
  }

  answer(answer: TaskSnapshot | Error): void {
    if (!this.#settle) throw new Error("the held call has not started");
    this.#settle(answer);
  }
}

export interface DriverCall {
  kind: "submit" | "status" | "cancel";
  localTaskId: string | null;
  remoteTaskId: string | null;
  arguments?: Record<string, unknown>;
  signal: AbortSignal | undefined;
  runtime?: unknown;
}

interface ScriptedSubmit {
  remoteTaskId: string;
  snapshot?: TaskSnapshot;
  driverData?: Record<string, unknown>;
  remoteIdHoldsSecret?: boolean;
  /** Runs just before the answer is returned (e.g. the caller aborts then). */
  onReturn?: () => void;
}

export const working = () => new TaskSnapshot({ status: "working" });
export const completed = (result: unknown = { ok: true }) => new TaskSnapshot({ status: "completed", result });
export const cancelled = () => new TaskSnapshot({ status: "cancelled" });

export class ScriptedDriver implements McpTaskDriver {
  readonly calls: DriverCall[] = [];
  readonly #submits: (ScriptedSubmit | Error)[] = [];
  readonly #status = new Map<string, Answer[]>();
  readonly #cancels = new Map<string, Answer[]>();
  #submitted = 0;

  /** `callSeconds`: how far the clock moves while each remote call runs (completion time ≠ start time). */
  constructor(
    readonly clock: ManualClock,
    public callSeconds = 0,
  ) {}

  nextSubmit(answer: ScriptedSubmit | Error): this {
    this.#submits.push(answer);
    return this;
  }

  /** Answers of the next status calls of one remote task; when they run out, `working`. */
  status(remoteTaskId: string, ...answers: Answer[]): this {
    this.#status.set(remoteTaskId, [...(this.#status.get(remoteTaskId) ?? []), ...answers]);
    return this;
  }

  /** Answers of the next cancel calls of one remote task; when they run out, `cancelled`. */
  cancelWith(remoteTaskId: string, ...answers: Answer[]): this {
    this.#cancels.set(remoteTaskId, [...(this.#cancels.get(remoteTaskId) ?? []), ...answers]);
    return this;
  }

  callsOf(kind: DriverCall["kind"], remoteTaskId?: string): DriverCall[] {
    return this.calls.filter((c) => c.kind === kind && (remoteTaskId === undefined || c.remoteTaskId === remoteTaskId));
  }

  async submit(request: TaskSubmitRequest, options?: DriverCallOptions): Promise<TaskSubmission> {
    this.calls.push({ kind: "submit", localTaskId: request.localTaskId, remoteTaskId: null, arguments: request.arguments, signal: options?.signal, runtime: options?.runtime });
    const next = this.#submits.shift();
    if (next instanceof Error) throw next;
    this.#submitted += 1;
    const scripted = next ?? { remoteTaskId: `remote-${this.#submitted}` };
    this.clock.advance(this.callSeconds);
    if (scripted.onReturn) {
      scripted.onReturn();
      // The answer arrives after the abort (one turn of the event loop later), as from a server that had already replied.
      await new Promise((resolve) => setImmediate(resolve));
    }
    return {
      remoteTaskId: scripted.remoteTaskId,
      snapshot: scripted.snapshot ?? new TaskSnapshot({ status: "submitted" }),
      driverData: scripted.driverData,
      // It carries no credential: the id is shown as it is.
      remoteIdShown: scripted.remoteTaskId,
      ...(scripted.remoteIdHoldsSecret ? { remoteIdHoldsSecret: true } : {}),
    };
  }

  getStatus(ref: TaskReference, options?: DriverCallOptions): Promise<TaskSnapshot> {
    return this.#answer("status", this.#status, ref, options, working);
  }

  cancel(ref: TaskReference, options?: DriverCallOptions): Promise<TaskSnapshot> {
    return this.#answer("cancel", this.#cancels, ref, options, cancelled);
  }

  async #answer(
    kind: "status" | "cancel",
    script: Map<string, Answer[]>,
    ref: TaskReference,
    options: DriverCallOptions | undefined,
    fallback: () => TaskSnapshot,
  ): Promise<TaskSnapshot> {
    this.calls.push({ kind, localTaskId: ref.localTaskId, remoteTaskId: ref.remoteTaskId, signal: options?.signal });
    const answer = script.get(ref.remoteTaskId)?.shift() ?? fallback();
    const value = answer instanceof Hold ? await answer.run(options?.signal) : answer;
    this.clock.advance(this.callSeconds);
    if (value instanceof Error) throw value;
    return value;
  }
}

export const DRIVER = "scripted";

export function settings(overrides: Partial<McpTasksSettings> = {}): McpTasksSettings {
  return { ...McpTasksSettingsSchema.parse({ enabled: true }), ...overrides };
}

export interface Harness {
  url: string;
  clock: ManualClock;
  store: TaskStore;
  driver: ScriptedDriver;
  drivers: McpTaskDriverRegistry;
  notifier: MemoryTaskNotifier;
  logger: RecordingLogger;
  service: McpTaskService;
  /** Another service instance (another worker) on the same database and clock. */
  another(leaseOwner: string, store?: TaskStore): McpTaskService;
  submit(overrides?: Partial<ConstructorParameters<typeof TaskSubmitRequest>[0]>): ReturnType<McpTaskService["submit"]>;
  row(taskId: string): ReturnType<TaskStore["get"]>;
  close(): Promise<void>;
}

export async function harness(
  target: Target,
  opts: { settings?: Partial<McpTasksSettings>; url?: string; clock?: ManualClock; store?: TaskStore } = {},
): Promise<Harness> {
  const clock = opts.clock ?? new ManualClock();
  const url = opts.url ?? (await target.fresh());
  const store = opts.store ?? (await openStore(url, clock));
  const driver = new ScriptedDriver(clock);
  const drivers = new McpTaskDriverRegistry();
  drivers.register(DRIVER, driver);
  const notifier = new MemoryTaskNotifier();
  const logger = new RecordingLogger();
  const make = (leaseOwner: string, on: TaskStore = store) =>
    new McpTaskService({ store: on, drivers, settings: settings(opts.settings), notifier, clock: clock.now, leaseOwner, logger });
  const service = make("worker-1");
  const opened: TaskStore[] = [store];
  return {
    url,
    clock,
    store,
    driver,
    drivers,
    notifier,
    logger,
    service,
    another: (leaseOwner, on) => {
      if (on) opened.push(on);
      return make(leaseOwner, on);
    },
    submit: (overrides = {}) =>
      service.submit(
        DRIVER,
        new TaskSubmitRequest({ userId: "alice", threadId: "thread-1", runId: "run-0", serverName: "jobs", taskName: "report", arguments: { q: 1 }, ...overrides }),
      ),
    row: async (taskId) => store.get(taskId, "alice"),
    close: async () => {
      await service.stop();
      for (const s of opened) await s.close().catch(() => undefined);
    },
  };
}

/**
 * `setup()` for one describe block over `target`: each call opens a harness on a fresh database, closed after its
 * test; the target's databases are dropped after the block.
 */
export function harnessPerTest(target: Target): (opts?: Parameters<typeof harness>[1]) => Promise<Harness> {
  const open: Harness[] = [];
  afterEach(async () => {
    for (const h of open.splice(0)) await h.close();
  });
  afterAll(() => target.cleanup());
  return async (opts = {}) => {
    const h = await harness(target, opts);
    open.push(h);
    return h;
  };
}
