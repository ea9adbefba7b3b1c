/**
 * Which notifier `mcp-harness worker` delivers through (`--notifier <name>`). Each entry builds one from the
 * command's options and environment; add a delivery target here and it becomes a `--notifier` value.
 * `MCP_HARNESS_TEST_NOTIFY_FILE` (tests) appends deliveries to that file instead.
 */
import {
  createLangGraphServerNotifier,
  LANGGRAPH_API_KEY_ENV_VARS,
  LANGGRAPH_API_URL_ENV_VAR,
  langGraphApiKeyFromEnv,
  type TaskNotifier,
} from "../tasks";
import { FileTaskNotifier, TEST_NOTIFY_FILE_VARIABLE } from "../worker";
import { UsageError } from "./args";
import type { CliIo } from "./io";

/** The options of `worker` that only a notifier reads, by the notifier that reads them. */
export const WORKER_NOTIFIER_OPTIONS: Readonly<Record<string, readonly string[]>> = { langgraph: ["api-url", "assistant"] };

export interface WorkerNotifierInput {
  /** Every `--option value` of the command line. */
  values: ReadonlyMap<string, string>;
  io: CliIo;
}

export interface WorkerNotifierChoice {
  notifier: TaskNotifier | undefined;
  /** For the start line: where events go (never a credential or a URL's user info). */
  description: string;
}

/**
 * Checks the options it is given (a `UsageError` for a malformed one) and returns the notifier's build, which may still
 * refuse: what it needs but was not given is asked for only when it is built (with `mcpTasks.enabled`).
 */
type NotifierFactory = (input: WorkerNotifierInput) => () => WorkerNotifierChoice | Promise<WorkerNotifierChoice>;

function httpUrl(text: string, source: string): URL {
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    throw new UsageError(`${source} must be an http(s) URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`${source} must be an http(s) URL`);
  if (url.username || url.password) throw new UsageError(`${source} must not carry credentials; set ${LANGGRAPH_API_KEY_ENV_VARS[0]} instead`);
  return url;
}

/** Runs of `--assistant` (default `agent`) on a LangGraph server's threads, through its API. */
function langGraphNotifier({ values, io }: WorkerNotifierInput): () => WorkerNotifierChoice {
  const given = values.get("api-url");
  const fromEnv = io.env[LANGGRAPH_API_URL_ENV_VAR]?.trim();
  const url = given === undefined && !fromEnv ? undefined : httpUrl(given ?? fromEnv!, given === undefined ? LANGGRAPH_API_URL_ENV_VAR : "--api-url");
  const assistantId = values.get("assistant")?.trim() ?? "agent";
  if (assistantId === "") throw new UsageError("--assistant must name an assistant or graph id");
  return () => {
    if (url === undefined) throw new UsageError(`--notifier langgraph needs --api-url <url> (or ${LANGGRAPH_API_URL_ENV_VAR})`);
    const apiKey = langGraphApiKeyFromEnv(io.env);
    return {
      notifier: createLangGraphServerNotifier({ apiUrl: url.href.replace(/\/$/, ""), assistantId, apiKey }),
      description: `langgraph (runs of '${assistantId}' on ${url.origin}${apiKey ? ", with an API key" : ""})`,
    };
  };
}

export const WORKER_NOTIFIERS: Readonly<Record<string, NotifierFactory>> = {
  none: () => () => ({ notifier: undefined, description: "none (events stay pending)" }),
  langgraph: langGraphNotifier,
};

export const DEFAULT_WORKER_NOTIFIER = "none";

/** `chooseWorkerNotifier` then its build. */
export async function resolveWorkerNotifier(input: WorkerNotifierInput): Promise<WorkerNotifierChoice> {
  return chooseWorkerNotifier(input)();
}

/**
 * Checks the notifier's name, that its options are its own and that those given are well formed (a `UsageError`
 * otherwise), and returns its build: what the notifier needs but was not given (`--api-url` for langgraph) is asked
 * for only when it is built.
 */
export function chooseWorkerNotifier(input: WorkerNotifierInput): () => Promise<WorkerNotifierChoice> {
  const name = input.values.get("notifier");
  const file = input.io.env[TEST_NOTIFY_FILE_VARIABLE]?.trim();
  const chosen = name ?? (file ? undefined : DEFAULT_WORKER_NOTIFIER);
  for (const [owner, options] of Object.entries(WORKER_NOTIFIER_OPTIONS)) {
    const stray = options.find((option) => input.values.has(option));
    if (stray !== undefined && chosen !== owner) throw new UsageError(`--${stray} is an option of --notifier ${owner}`);
  }
  if (chosen === undefined) return async () => ({ notifier: new FileTaskNotifier(file!), description: `file (${TEST_NOTIFY_FILE_VARIABLE})` });
  const factory = Object.hasOwn(WORKER_NOTIFIERS, chosen) ? WORKER_NOTIFIERS[chosen] : undefined;
  if (!factory) throw new UsageError(`unknown notifier '${chosen}' (known: ${Object.keys(WORKER_NOTIFIERS).join(", ")})`);
  const build = factory(input);
  return async () => build();
}
