/**
 * The LangGraph server notifier against a real `langgraphjs dev` server (in-memory, offline) running a tiny
 * graph, and against a minimal real HTTP server for the answers the dev server never gives (409, 5xx).
 */
import { afterAll, beforeAll, describe, expect, jest, test } from "@jest/globals";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import {
  BusyThreadError,
  createLangGraphServerNotifier,
  IDEMPOTENCY_METADATA_KEY,
  notificationIdempotencyKey,
  ThreadGoneError,
  type TaskDelivery,
} from "../../../lib/tasks";
import { runCli, type CliIo } from "../../../lib/cli";
import { resolveWorkerNotifier } from "../../../lib/cli/worker-notifier";
import type { TaskWorkerTickReport } from "../../../lib/worker";
import { startHttpFixture, TaskBoard } from "../../fixtures";
import type { StreamableHttpFixture } from "../../fixtures/http-server";
import { setupRuntime, submitJob } from "../../worker/helpers";
import { startLangGraphDev, type LangGraphDevServer } from "../../fixtures/langgraph-dev";
import { taskDelivery } from "../deliveries";

jest.setTimeout(120_000);

let dev: LangGraphDevServer;
let client: Client;

beforeAll(async () => {
  dev = await startLangGraphDev({ agent: `${path.join(__dirname, "..", "..", "fixtures", "notify-graph.ts")}:graph` });
  client = new Client({ apiUrl: dev.url, apiKey: null });
}, 120_000);

afterAll(async () => {
  await dev?.close();
});

function delivery(threadId: string, taskId = "mcp-task-s1", attempt = 0): TaskDelivery {
  return taskDelivery({ taskId, threadId, dispatchAttempt: attempt, event: { task_name: "build<script>" } });
}

describe("against langgraphjs dev", () => {
  test("a delivery is one run on the thread with the key in its metadata, the owner's context, and a hidden message", async () => {
    const notifier = createLangGraphServerNotifier({ apiUrl: dev.url });
    const { thread_id: thread } = await client.threads.create();
    const key = notificationIdempotencyKey("mcp-task-s1", 1, 0);
    const { runId } = await notifier.deliver(delivery(thread), key);
    await client.runs.join(thread, runId);
    expect(await notifier.getRun(runId, "ann", { threadId: thread })).toEqual({ status: "success" });
    expect(await notifier.getRun(runId, "bob", { threadId: thread })).toBeNull();
    expect(await notifier.getRun(runId, "ann")).toBeNull();
    expect(await notifier.getRun("01a23ccf-c4fa-74ab-ac30-80106b3cb46a", "ann", { threadId: thread })).toBeNull();

    const run = await client.runs.get(thread, runId);
    expect(run.metadata).toMatchObject({ [IDEMPOTENCY_METADATA_KEY]: key, mcp_task_notification: { task_id: "mcp-task-s1", user_id: "ann" } });
    expect(run.multitask_strategy).toBe("reject");
    const state = await client.threads.getState<{ messages: { type: string; content: string; additional_kwargs?: Record<string, unknown> }[] }>(thread);
    const [note, reply] = state.values.messages;
    expect(note).toMatchObject({ type: "human", additional_kwargs: { hide_from_ui: true, mcp_task_notification: { idempotency_key: key } } });
    expect(note!.content).toContain('"task_name":"build&lt;script&gt;"');
    expect(reply!.content).toBe("notification for ann non_interactive=true");

    // The same key again: the existing run is found by its metadata; no second run.
    expect(await notifier.deliver(delivery(thread), key)).toEqual({ runId });
    expect(await client.runs.list(thread)).toHaveLength(1);
  });

  test("a busy thread (a run pending on it) is busy; once that run is gone the delivery goes through", async () => {
    const notifier = createLangGraphServerNotifier({ apiUrl: dev.url });
    const { thread_id: thread } = await client.threads.create();
    const blocker = await client.runs.create(thread, "agent", { input: { messages: [{ type: "human", content: "hi" }] }, afterSeconds: 3600 });
    const key = notificationIdempotencyKey("mcp-task-s2", 1, 0);
    await expect(notifier.deliver(delivery(thread, "mcp-task-s2"), key)).rejects.toBeInstanceOf(BusyThreadError);
    await client.runs.cancel(thread, blocker.run_id, true);
    const { runId } = await notifier.deliver(delivery(thread, "mcp-task-s2"), key);
    await client.runs.join(thread, runId);
    expect(await notifier.getRun(runId, "ann", { threadId: thread })).toEqual({ status: "success" });
  });

  test("a thread waiting at an interrupt is busy; once the interrupt is answered the delivery goes through", async () => {
    const notifier = createLangGraphServerNotifier({ apiUrl: dev.url });
    const { thread_id: thread } = await client.threads.create();
    const paused = await client.runs.create(thread, "agent", { input: { messages: [{ type: "human", content: "pause" }] } });
    await client.runs.join(thread, paused.run_id);
    expect((await client.threads.get(thread)).status).toBe("interrupted");
    const key = notificationIdempotencyKey("mcp-task-s3", 1, 0);
    await expect(notifier.deliver(delivery(thread, "mcp-task-s3"), key)).rejects.toBeInstanceOf(BusyThreadError);
    expect(await client.runs.list(thread)).toHaveLength(1);

    const resumed = await client.runs.create(thread, "agent", { command: { resume: "ok" } });
    await client.runs.join(thread, resumed.run_id);
    const { runId } = await notifier.deliver(delivery(thread, "mcp-task-s3"), key);
    await client.runs.join(thread, runId);
    expect(await notifier.getRun(runId, "ann", { threadId: thread })).toEqual({ status: "success" });
  });

  test("an assistant the server does not have is an ordinary failure, not a thread gone (which would dead-letter the event)", async () => {
    const notifier = createLangGraphServerNotifier({ apiUrl: dev.url, assistantId: "no-such-assistant" });
    const { thread_id: thread } = await client.threads.create();
    const err = await notifier.deliver(delivery(thread, "mcp-task-s4"), notificationIdempotencyKey("mcp-task-s4", 1, 0)).catch((e: unknown) => e as Error);
    expect(err).not.toBeInstanceOf(ThreadGoneError);
    expect((err as Error).message).toContain("is 'no-such-assistant' an assistant or graph it serves?");
  });

  test("a thread that does not exist, or was deleted, is gone", async () => {
    const notifier = createLangGraphServerNotifier({ apiUrl: dev.url });
    await expect(notifier.deliver(delivery("00000000-0000-4000-8000-000000000001"), "k-1")).rejects.toBeInstanceOf(ThreadGoneError);
    const { thread_id: thread } = await client.threads.create();
    await client.threads.delete(thread);
    await expect(notifier.deliver(delivery(thread), "k-2")).rejects.toBeInstanceOf(ThreadGoneError);
  });
});

describe("mcp-harness worker --notifier langgraph against langgraphjs dev", () => {
  let board: TaskBoard;
  let http: StreamableHttpFixture;
  beforeAll(async () => {
    board = new TaskBoard();
    http = await startHttpFixture({ name: "jobs", toolNames: [], taskBoard: board });
  });
  afterAll(async () => {
    await http?.close();
  });

  test("a finished task becomes one run of the assistant on its thread, through the server's API", async () => {
    const s = await setupRuntime({ url: http.url, tasks: { poll_interval_seconds: 1 } });
    const { thread_id: thread } = await client.threads.create();
    const task = await submitJob(s.runtime, { label: "report" }, { user: "ann", thread });
    await s.runtime.stop();

    const stop = new AbortController();
    let delivered!: () => void;
    const sawDelivery = new Promise<void>((resolve) => (delivered = resolve));
    const stderr: string[] = [];
    const io: CliIo = {
      out: (line) => {
        if ((JSON.parse(line) as TaskWorkerTickReport).delivered > 0) delivered();
      },
      err: (line) => stderr.push(line),
      env: { MCP_HARNESS_DATABASE_URL: s.databaseUrl, MCP_HARNESS_DATA_DIR: s.dir, MCP_HARNESS_LANGGRAPH_API_URL: dev.url },
      cwd: s.dir,
      stopSignal: stop.signal,
    };
    const exit = runCli(["worker", s.configPath, "--interval", "0.05", "--json", "--notifier", "langgraph"], io);
    await sawDelivery;
    stop.abort();
    expect(await exit).toBe(0);
    expect(stderr[0]).toContain(`notifier: langgraph (runs of 'agent' on ${dev.url})`);

    const runs = await client.runs.list(thread);
    expect(runs).toHaveLength(1);
    expect(runs[0]!.metadata).toMatchObject({ [IDEMPOTENCY_METADATA_KEY]: notificationIdempotencyKey(task.id, 1, 0) });
    await client.runs.join(thread, runs[0]!.run_id);
    const state = await client.threads.getState<{ messages: { content: string }[] }>(thread);
    expect(state.values.messages.at(-1)!.content).toBe("notification for ann non_interactive=true");
  });
});

describe("against a minimal HTTP server", () => {
  let server: Server;
  let url: string;
  const calls: string[] = [];
  const apiKeys: (string | undefined)[] = [];
  let createStatus = 409;
  let threadStatus = 200;
  let threadMetadata: Record<string, unknown> = {};
  let runPages: (offset: number) => unknown[] = () => [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      calls.push(`${req.method} ${req.url}`);
      apiKeys.push(req.headers["x-api-key"] as string | undefined);
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      req.resume();
      req.on("end", () => {
        if (req.method === "GET" && /\/threads\/[^/]+\/runs/.test(req.url ?? "")) {
          return send(200, runPages(Number(new URL(req.url ?? "", "http://x").searchParams.get("offset") ?? 0)));
        }
        if (req.method === "POST" && /\/threads\/[^/]+\/runs$/.test(req.url ?? "")) return send(createStatus, { detail: "token sk-live-secret in the answer" });
        if (req.method === "GET" && /\/threads\/[^/]+$/.test(req.url ?? "")) return send(threadStatus, { thread_id: "t", metadata: threadMetadata });
        return send(500, {});
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  test("409 is busy (after checking the thread exists), 404 gone; another status is one clean line without the server's text", async () => {
    const notifier = createLangGraphServerNotifier({ apiUrl: url });
    createStatus = 409;
    await expect(notifier.deliver(delivery("t"), "k")).rejects.toBeInstanceOf(BusyThreadError);
    expect(calls.slice(-4)).toEqual(["GET /threads/t/runs?limit=100&offset=0", "GET /threads/t", "POST /threads/t/runs", "GET /threads/t"]);
    // A 404 to the run while the thread is there is the assistant: an ordinary failure, not a thread gone for good.
    createStatus = 404;
    const noAssistant = await notifier.deliver(delivery("t"), "k").catch((e: unknown) => e as Error);
    expect(noAssistant).not.toBeInstanceOf(ThreadGoneError);
    expect(noAssistant).toEqual(new Error("LangGraph server answered HTTP 404 to the notification run: is 'agent' an assistant or graph it serves?"));
    threadStatus = 404;
    calls.length = 0;
    await expect(notifier.deliver(delivery("t"), "k")).rejects.toBeInstanceOf(ThreadGoneError);
    expect(calls).toEqual(["GET /threads/t/runs?limit=100&offset=0", "GET /threads/t"]);
    threadStatus = 200;
    createStatus = 400;
    const err = await notifier.deliver(delivery("t"), "k").catch((e: unknown) => e as Error);
    expect(err).toEqual(new Error("LangGraph server answered HTTP 400 to the notification run"));
  });

  test("a thread whose owner (custom auth) is another user is gone; its owner's own events go through", async () => {
    const notifier = createLangGraphServerNotifier({ apiUrl: url });
    threadMetadata = { owner: "mallory" };
    calls.length = 0;
    const err = await notifier.deliver(delivery("t"), "k-owner").catch((e: unknown) => e as Error);
    expect(err).toEqual(new ThreadGoneError("Thread 't' belongs to another user"));
    expect(calls.some((call) => call.startsWith("POST"))).toBe(false);
    threadMetadata = { owner: delivery("t").userId };
    createStatus = 409;
    await expect(notifier.deliver(delivery("t"), "k-owner")).rejects.toBeInstanceOf(BusyThreadError); // it got as far as the run
    threadMetadata = {};
  });

  test("a run already started with the key is found on a later page of the thread's runs: no second run", async () => {
    const notifier = createLangGraphServerNotifier({ apiUrl: url });
    const run = (id: string, key?: string) => ({ run_id: id, thread_id: "t", status: "success", metadata: key ? { [IDEMPOTENCY_METADATA_KEY]: key } : {} });
    runPages = (offset) =>
      offset === 0 ? Array.from({ length: 100 }, (_, i) => run(`old-${i}`)) : offset === 100 ? [run("old-100"), run("mine", "k-paged")] : [];
    calls.length = 0;
    expect(await notifier.deliver(delivery("t"), "k-paged")).toEqual({ runId: "mine" });
    expect(calls).toEqual(["GET /threads/t/runs?limit=100&offset=0", "GET /threads/t/runs?limit=100&offset=100"]);
    // A server that ignores the offset answers the first page for ever: one clean error, after two pages.
    runPages = () => Array.from({ length: 100 }, (_, i) => run(`old-${i}`));
    calls.length = 0;
    await expect(notifier.deliver(delivery("t"), "k-paged")).rejects.toThrow("LangGraph server answered the same page of the thread's runs twice; it ignores 'offset'");
    expect(calls).toHaveLength(2);
    runPages = () => [];
  });

  test("mcp-harness worker --notifier langgraph: --api-url, --assistant and the API key from the environment, never printed", async () => {
    const io = { out: () => undefined, err: () => undefined, cwd: process.cwd() };
    const choice = await resolveWorkerNotifier({
      values: new Map([["notifier", "langgraph"], ["api-url", `${url}/`], ["assistant", "helper"]]),
      io: { ...io, env: { LANGSMITH_API_KEY: "lsv2-fallback", MCP_HARNESS_LANGGRAPH_API_KEY: "k-ours-1" } },
    });
    expect(choice.description).toBe(`langgraph (runs of 'helper' on ${url}, with an API key)`);
    createStatus = 400;
    calls.length = 0;
    apiKeys.length = 0;
    await expect(choice.notifier!.deliver(delivery("t"), "k")).rejects.toThrow("HTTP 400");
    expect(calls).toEqual(["GET /threads/t/runs?limit=100&offset=0", "GET /threads/t", "POST /threads/t/runs"]);
    expect(apiKeys).toEqual(["k-ours-1", "k-ours-1", "k-ours-1"]);

    // The URL from the environment; the SDK's own key variable as the fallback.
    const fromEnv = await resolveWorkerNotifier({
      values: new Map([["notifier", "langgraph"]]),
      io: { ...io, env: { MCP_HARNESS_LANGGRAPH_API_URL: url, LANGSMITH_API_KEY: "lsv2-fallback" } },
    });
    apiKeys.length = 0;
    await expect(fromEnv.notifier!.deliver(delivery("t"), "k")).rejects.toThrow("HTTP 400");
    expect(apiKeys[0]).toBe("lsv2-fallback");
    expect(fromEnv.description).toBe(`langgraph (runs of 'agent' on ${url}, with an API key)`);
  });

  test("worker notifier usage errors name the option, never the value", async () => {
    const io = { out: () => undefined, err: () => undefined, cwd: process.cwd(), env: {} };
    const attempt = (pairs: [string, string][], env: NodeJS.ProcessEnv = {}) =>
      resolveWorkerNotifier({ values: new Map(pairs), io: { ...io, env } }).then(
        () => "resolved",
        (e: Error) => `${e.name}: ${e.message}`,
      );
    expect(await attempt([["notifier", "langgraph"]])).toBe("UsageError: --notifier langgraph needs --api-url <url> (or MCP_HARNESS_LANGGRAPH_API_URL)");
    expect(await attempt([["notifier", "langgraph"], ["api-url", "ftp://x"]])).toBe("UsageError: --api-url must be an http(s) URL");
    expect(await attempt([["notifier", "langgraph"]], { MCP_HARNESS_LANGGRAPH_API_URL: "not a url" })).toBe(
      "UsageError: MCP_HARNESS_LANGGRAPH_API_URL must be an http(s) URL",
    );
    const withCredentials = await attempt([["notifier", "langgraph"], ["api-url", "http://me:pw-s3cret@127.0.0.1:1"]]);
    expect(withCredentials).toBe("UsageError: --api-url must not carry credentials; set MCP_HARNESS_LANGGRAPH_API_KEY instead");
    expect(await attempt([["api-url", url]])).toBe("UsageError: --api-url is an option of --notifier langgraph");
    expect(await attempt([["notifier", "none"], ["assistant", "agent"]])).toBe("UsageError: --assistant is an option of --notifier langgraph");
    expect(await attempt([["notifier", "langgraph"], ["api-url", url], ["assistant", " "]])).toBe("UsageError: --assistant must name an assistant or graph id");
  });
});
