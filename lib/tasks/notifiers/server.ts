/**
 * The LangGraph server notifier (SPEC §7): a task event becomes a run on the task's thread through
 * `@langchain/langgraph-sdk`, with the idempotency key in the run's metadata. `multitaskStrategy: "reject"` and
 * `ifNotExists: "reject"`: a busy thread is answered 409 (the JS server says 422), a missing (or not this
 * caller's) thread 404; a thread waiting at an interrupt is busy too, one whose `owner` is another user gone. Errors never quote the server's answer: it
 * may echo request data.
 */
import { Client, type Run, type Thread } from "@langchain/langgraph-sdk";
import {
  BusyThreadError,
  ThreadGoneError,
  type NotificationRun,
  type NotificationRunStatus,
  type NotifierCallOptions,
  type RunLookupOptions,
  type TaskDelivery,
  type TaskNotifier,
} from "../notifier";
import { NOTIFICATION_KWARG, notificationMarker, notificationMessage, type NotificationMarker } from "./message";

/** The LangGraph server a notifier outside it (`mcp-harness worker --notifier langgraph`) creates runs on. */
export const LANGGRAPH_API_URL_ENV_VAR = "MCP_HARNESS_LANGGRAPH_API_URL";
/** Where its API key is read from, first set wins (ours, then the SDK's own variables); sent as `x-api-key`. */
export const LANGGRAPH_API_KEY_ENV_VARS = ["MCP_HARNESS_LANGGRAPH_API_KEY", "LANGGRAPH_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"] as const;

export function langGraphApiKeyFromEnv(env: NodeJS.ProcessEnv): string | undefined {
  for (const name of LANGGRAPH_API_KEY_ENV_VARS) {
    const value = env[name]?.trim();
    if (value) return value;
  }
  return undefined;
}

/** The run metadata key holding the idempotency key. */
export const IDEMPOTENCY_METADATA_KEY = "idempotency_key";
/** A page of a thread's runs, searched for one already started with the same key (every page is read). */
const RUN_PAGE_SIZE = 100;
const DEFAULT_ASSISTANT = "agent";
const RUN_STATUSES: ReadonlySet<string> = new Set<NotificationRunStatus>(["success", "error", "timeout", "interrupted", "pending", "running"]);

/** The part of the SDK client the notifier uses. */
export type NotifierClient = Pick<Client, "runs" | "threads">;

export interface LangGraphServerNotifierOptions {
  /** The server's URL (default: the SDK's, `http://localhost:8123`). Ignored when `client` is given. */
  apiUrl?: string;
  /** The assistant (or graph id) that runs notifications; default `agent`. */
  assistantId?: string;
  /** Sent as `x-api-key`; default none (the SDK's environment lookup is not used). Ignored when `client` is given. */
  apiKey?: string;
  /** The fetch the SDK uses (e.g. `langGraphServerLoopback()` inside the server). Ignored when `client` is given. */
  fetch?: (url: string, init?: RequestInit) => Promise<Response>;
  /** A client of your own (auth headers, fetch, retries). */
  client?: NotifierClient;
}

function httpStatus(err: unknown): number | undefined {
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === "number" ? status : undefined;
}

/** One clean line: the status or the error's kind, never the server's text. */
function serverError(err: unknown, what: string): Error {
  const status = httpStatus(err);
  if (status !== undefined) return new Error(`LangGraph server answered HTTP ${status} to ${what}`);
  return new Error(`LangGraph server could not be reached for ${what} (${err instanceof Error ? err.name : typeof err})`);
}

function threadNotFound(threadId: string): ThreadGoneError {
  return new ThreadGoneError(`Thread '${threadId}' was not found on the LangGraph server`);
}

function markerOf(run: Run): Partial<NotificationMarker> | undefined {
  const marker = run.metadata?.[NOTIFICATION_KWARG];
  return typeof marker === "object" && marker !== null ? (marker as Partial<NotificationMarker>) : undefined;
}

class LangGraphServerNotifier implements TaskNotifier {
  readonly #client: NotifierClient;
  readonly #assistantId: string;

  constructor(options: LangGraphServerNotifierOptions) {
    this.#client =
      options.client ??
      new Client({
        apiUrl: options.apiUrl,
        apiKey: options.apiKey ?? null,
        callerOptions: { maxRetries: 2, ...(options.fetch ? { fetch: options.fetch } : {}) },
      });
    this.#assistantId = options.assistantId ?? DEFAULT_ASSISTANT;
  }

  async deliver(delivery: TaskDelivery, idempotencyKey: string, options: NotifierCallOptions = {}): Promise<{ runId: string }> {
    const { threadId } = delivery;
    const { signal } = options;
    const existing = await this.#runWithKey(threadId, idempotencyKey, signal);
    if (existing) return { runId: existing.run_id };
    // A thread waiting at an interrupt has no run in flight, but new input would run past the pending interrupt
    // (an agent's unanswered tool calls): it is busy until the interrupt is answered, as for the graph notifier.
    const thread = await this.#thread(threadId, signal);
    // A server with custom auth records who created a thread as its `owner` (the identity our runs read as the user).
    // The thread a task names comes from its run; one owned by someone else never receives the event (SPEC §6.5).
    const owner = thread.metadata?.owner;
    if (typeof owner === "string" && owner !== delivery.userId) throw new ThreadGoneError(`Thread '${threadId}' belongs to another user`);
    if (thread.status === "interrupted") {
      throw new BusyThreadError(`Thread '${threadId}' is waiting at an interrupt`);
    }

    const message = notificationMessage(delivery, idempotencyKey);
    try {
      const run = await this.#client.runs.create(threadId, this.#assistantId, {
        input: {
          messages: [{ type: "human", id: message.id, content: message.text, additional_kwargs: message.additional_kwargs }],
        },
        metadata: {
          [NOTIFICATION_KWARG]: notificationMarker(delivery, idempotencyKey),
          [IDEMPOTENCY_METADATA_KEY]: idempotencyKey,
        },
        context: { user_id: delivery.userId, non_interactive: true },
        multitaskStrategy: "reject",
        ifNotExists: "reject",
        onDisconnect: "continue",
        signal,
      });
      return { runId: run.run_id };
    } catch (err) {
      const status = httpStatus(err);
      if (status === 404) {
        // The thread was there a moment ago: a 404 now is more likely the assistant, which no retry of this event
        // can fix but a corrected deployment can, so it counts against the delivery budget instead of dead-lettering.
        if (await this.#threadMissing(threadId, signal)) throw threadNotFound(threadId);
        throw new Error(`LangGraph server answered HTTP 404 to the notification run: is '${this.#assistantId}' an assistant or graph it serves?`);
      }
      // The JS server answers 422 both for a busy thread and for a missing one (ifNotExists "reject"): ask.
      if (status === 409 || status === 422) {
        if (await this.#threadMissing(threadId, signal)) throw threadNotFound(threadId);
        throw new BusyThreadError(`Thread '${threadId}' is running another run`);
      }
      throw serverError(err, "the notification run");
    }
  }

  async getRun(runId: string, userId: string, options: RunLookupOptions = {}): Promise<NotificationRun | null> {
    const { threadId, signal } = options;
    if (!threadId) return null;
    let run: Run;
    try {
      run = await this.#client.runs.get(threadId, runId, { signal });
    } catch (err) {
      if (httpStatus(err) === 404) return null;
      throw serverError(err, "the notification run lookup");
    }
    if (markerOf(run)?.user_id !== userId) return null;
    if (!RUN_STATUSES.has(run.status)) throw new Error(`LangGraph server reported an unknown run status`);
    return run.status === "error" ? { status: "error", error: "The notification run ended with an error" } : { status: run.status };
  }

  /**
   * A run of the thread already started with this key. Every page is read: the JS server lists a thread's runs
   * oldest first, so on a thread with many runs the one a lost answer left behind is on a later page.
   */
  async #runWithKey(threadId: string, idempotencyKey: string, signal: AbortSignal | undefined): Promise<Run | undefined> {
    let previousFirst: string | undefined;
    for (let offset = 0; ; offset += RUN_PAGE_SIZE) {
      let runs: Run[];
      try {
        runs = await this.#client.runs.list(threadId, { limit: RUN_PAGE_SIZE, offset, signal });
      } catch (err) {
        if (httpStatus(err) === 404) throw threadNotFound(threadId);
        throw serverError(err, "the run list of the thread");
      }
      const found = runs.find((run) => run.metadata?.[IDEMPOTENCY_METADATA_KEY] === idempotencyKey);
      if (found || runs.length < RUN_PAGE_SIZE) return found;
      // A server (or proxy) that ignores `offset` sends the same page again: never page through it for ever.
      if (runs[0]?.run_id === previousFirst) throw new Error("LangGraph server answered the same page of the thread's runs twice; it ignores 'offset'");
      previousFirst = runs[0]?.run_id;
    }
  }

  async #thread(threadId: string, signal: AbortSignal | undefined): Promise<Thread> {
    try {
      return await this.#client.threads.get(threadId, { signal });
    } catch (err) {
      if (httpStatus(err) === 404) throw threadNotFound(threadId);
      throw serverError(err, "the thread lookup");
    }
  }

  async #threadMissing(threadId: string, signal: AbortSignal | undefined): Promise<boolean> {
    try {
      await this.#thread(threadId, signal);
      return false;
    } catch (err) {
      if (err instanceof ThreadGoneError) return true;
      throw err;
    }
  }
}

/** The LangGraph server notifier: task events become runs of `assistantId` on the task's thread. */
export function createLangGraphServerNotifier(options: LangGraphServerNotifierOptions = {}): TaskNotifier {
  return new LangGraphServerNotifier(options);
}
