/**
 * End to end: `npm start`'s `langgraphjs dev` on a free loopback port, the `agent` graph over the demo
 * MCP server, with the offline scripted model. Nothing here reaches the network.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { freePort } from "../fixtures/ports";

const ROOT = path.resolve(__dirname, "..", "..");
const CLI = path.join(ROOT, "node_modules", ".bin", "langgraphjs");
const STATE_DIR = path.join(ROOT, ".langgraph_api");
const GITIGNORE = path.join(ROOT, ".gitignore");
const READY_DEADLINE_MS = 90_000;
const RUN_DEADLINE_MS = 60_000;
const TOOLKIT_PRESENT = existsSync(path.join(ROOT, "lib", "index.ts"));
const ADMIN_TOKEN = "dev-server-test-admin-token";

const TEMP = mkdtempSync(path.join(tmpdir(), "dev-server-"));

/** A copy of the demo config the gateway may rewrite (its servers' `cwd` made absolute so the copy finds them). */
function demoConfigCopy(): string {
  const demo = JSON.parse(readFileSync(path.join(ROOT, "graphs", "demo", "extensions_config.json"), "utf8"));
  for (const server of Object.values(demo.mcpServers) as { cwd?: string }[]) server.cwd = path.join(ROOT, "graphs", "demo");
  const file = path.join(mkdtempSync(path.join(TEMP, "config-")), "extensions_config.json");
  writeFileSync(file, `${JSON.stringify(demo, null, 2)}\n`);
  return file;
}

jest.setTimeout(READY_DEADLINE_MS + RUN_DEADLINE_MS + 30_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface ServerHandle {
  child: ChildProcess;
  baseUrl: string;
  output: () => string;
  /** Every log line about the task worker, kept whole (the rolling `output` drops startup lines of a busy run). */
  workerLines: () => string[];
  exited: () => boolean;
}

let server: ServerHandle | undefined;
let startupMs = 0;
const createdStateDir = !existsSync(STATE_DIR);
const gitignoreBefore = existsSync(GITIGNORE) ? readFileSync(GITIGNORE, "utf8") : undefined;

async function startDevServer(extraEnv: NodeJS.ProcessEnv = {}): Promise<ServerHandle> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LANGGRAPH_CLI_NO_ANALYTICS: "1",
    BROWSER: "none",
    MCP_HARNESS_CONFIG: process.env.MCP_HARNESS_CONFIG ?? demoConfigCopy(),
    // The gateway's config endpoints (graphs/http.ts), and `node` (the demo server) allowed for re-enabling.
    MCP_HARNESS_ADMIN_TOKEN: ADMIN_TOKEN,
    MCP_HARNESS_STDIO_ALLOWLIST: "node",
    // The task database (SQLite) and thread workspaces of this run only.
    MCP_HARNESS_DATA_DIR: path.join(TEMP, `data-${port}`),
    PORT: String(port),
    // Belt and braces for "offline": no LangSmith tracing, and the scripted model rather than a provider.
    LANGSMITH_TRACING: "false",
    LANGCHAIN_TRACING_V2: "false",
  };
  delete env.MCP_HARNESS_MODEL;
  delete env.MCP_HARNESS_DATABASE_URL;
  delete env.MCP_HARNESS_LANGGRAPH_API_URL;
  delete env.MCP_HARNESS_SERVER_WORKER;
  Object.assign(env, extraEnv);

  let output = "";
  let exited = false;
  const child = spawn(CLI, ["dev", "--no-browser", "--host", "127.0.0.1", "--port", String(port)], {
    cwd: ROOT,
    env,
    detached: true, // own process group, so the whole tree (server, tsx workers, MCP servers) can be killed
    stdio: ["ignore", "pipe", "pipe"],
  });
  const workerLines: string[] = [];
  let partial = "";
  const append = (chunk: Buffer) => {
    const text = chunk.toString("utf8");
    output = (output + text).slice(-20_000);
    const lines = (partial + text).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) if (line.includes("MCP task worker")) workerLines.push(stripAnsi(line));
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  child.on("exit", () => {
    exited = true;
  });
  return { child, baseUrl: `http://127.0.0.1:${port}`, output: () => output, workerLines: () => workerLines, exited: () => exited };
}

const stripAnsi = (text: string) => text.replace(/\u001b\[[0-9;]*m/g, "");

async function waitUntilReady(handle: ServerHandle): Promise<void> {
  const deadline = Date.now() + READY_DEADLINE_MS;
  let errorSeenAt: number | undefined;
  while (Date.now() < deadline) {
    if (handle.exited()) throw new Error(`langgraphjs dev exited early:\n${handle.output()}`);
    // A graph that fails to load leaves the server up but never listening: fail fast, with the log.
    if (errorSeenAt === undefined && /^error:/m.test(stripAnsi(handle.output()))) errorSeenAt = Date.now();
    if (errorSeenAt !== undefined && Date.now() - errorSeenAt > 1_000) {
      throw new Error(`langgraphjs dev logged an error during startup:\n${stripAnsi(handle.output())}`);
    }
    try {
      const res = await fetch(`${handle.baseUrl}/ok`, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) {
        const body: unknown = await res.json();
        if (typeof body === "object" && body !== null && (body as { ok?: unknown }).ok === true) return;
      }
    } catch {
      // not listening yet
    }
    await sleep(250);
  }
  throw new Error(`/ok did not answer within ${READY_DEADLINE_MS} ms:\n${stripAnsi(handle.output())}`);
}

async function stopDevServer(handle: ServerHandle): Promise<void> {
  const pid = handle.child.pid;
  if (pid === undefined || handle.exited()) return;
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pid, signal);
    } catch {
      // group already gone
    }
  };
  killGroup("SIGTERM");
  const deadline = Date.now() + 10_000;
  while (!handle.exited() && Date.now() < deadline) await sleep(100);
  // The group may outlive the CLI (its server child and MCP servers): make sure nothing lingers.
  killGroup("SIGKILL");
}

async function api<T>(method: string, route: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
  if (!server) throw new Error("server not started");
  const res = await fetch(`${server.baseUrl}${route}`, {
    method,
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(RUN_DEADLINE_MS),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${route} -> ${res.status}: ${text}\n${stripAnsi(server.output())}`);
  return JSON.parse(text) as T;
}

interface StoredMessage {
  type?: string;
  content?: unknown;
  tool_call_id?: string;
  name?: string;
}

function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((block) => (typeof block === "object" && block !== null && "text" in block ? String(block.text) : ""))
      .join("");
  }
  return "";
}

afterAll(() => rmSync(TEMP, { recursive: true, force: true }));

describe("langgraphjs dev (npm start)", () => {
  beforeAll(async () => {
    const started = Date.now();
    server = await startDevServer();
    await waitUntilReady(server);
    startupMs = Date.now() - started;
    process.stdout.write(`langgraphjs dev answered /ok after ${startupMs} ms\n`);
  });

  afterAll(async () => {
    if (server) await stopDevServer(server);
    if (createdStateDir) rmSync(STATE_DIR, { recursive: true, force: true });
    if (gitignoreBefore !== undefined && readFileSync(GITIGNORE, "utf8") !== gitignoreBefore) {
      writeFileSync(GITIGNORE, gitignoreBefore);
    }
  });

  it("answers /ok and serves the agent graph", async () => {
    expect(startupMs).toBeLessThan(READY_DEADLINE_MS);
    const assistants = await api<{ graph_id: string }[]>("POST", "/assistants/search", { graph_id: "agent" });
    expect(assistants.map((a) => a.graph_id)).toContain("agent");
  });

  (TOOLKIT_PRESENT ? it : it.skip)("runs the agent on a thread: the demo echo tool is called with the JSON args", async () => {
    const thread = await api<{ thread_id: string }>("POST", "/threads", {});
    const run = await api<{ run_id: string }>("POST", `/threads/${thread.thread_id}/runs`, {
      assistant_id: "agent",
      input: { messages: [{ role: "user", content: 'please echo {"text":"hi"}' }] },
    });
    await api<unknown>("GET", `/threads/${thread.thread_id}/runs/${run.run_id}/join`);
    const finished = await api<{ status: string }>("GET", `/threads/${thread.thread_id}/runs/${run.run_id}`);
    expect(finished.status).toBe("success");

    const state = await api<{ values: { messages?: StoredMessage[] } }>("GET", `/threads/${thread.thread_id}/state`);
    const messages = state.values.messages ?? [];
    const toolMessages = messages.filter((m) => m.type === "tool");
    expect(toolMessages.map((m) => messageText(m.content))).toContain("hi");
    expect(messageText(messages.at(-1)?.content)).toMatch(/^Tool demo_echo returned: hi/);
  });

  (TOOLKIT_PRESENT ? it : it.skip)("serves the gateway beside the LangGraph API: config endpoints need the admin token, and a PATCH changes the next run's tools", async () => {
    if (!server) throw new Error("server not started");
    const anonymous = await fetch(`${server.baseUrl}/api/mcp/config`, { signal: AbortSignal.timeout(10_000) });
    expect(anonymous.status).toBe(401);
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const config = await api<{ mcp_servers: Record<string, { command?: string }> }>("GET", "/api/mcp/config", undefined, admin);
    expect(config.mcp_servers.demo.command).toBe("node");

    const runText = async () => {
      const thread = await api<{ thread_id: string }>("POST", "/threads", {});
      const run = await api<{ run_id: string }>("POST", `/threads/${thread.thread_id}/runs`, {
        assistant_id: "agent",
        input: { messages: [{ role: "user", content: 'please echo {"text":"hi"}' }] },
      });
      await api<unknown>("GET", `/threads/${thread.thread_id}/runs/${run.run_id}/join`);
      const state = await api<{ values: { messages?: StoredMessage[] } }>("GET", `/threads/${thread.thread_id}/state`);
      return messageText(state.values.messages?.at(-1)?.content);
    };
    await api<unknown>("PATCH", "/api/mcp/config", { server_name: "demo", enabled: false }, admin);
    const withoutDemo = await runText();
    expect(withoutDemo).toMatch(/^This is the offline demo model\. .*Tools: jobs_start_countdown, list_background_tasks, cancel_background_task\.$/);
    await api<unknown>("PATCH", "/api/mcp/config", { server_name: "demo", enabled: true }, admin);
    expect(await runText()).toMatch(/^Tool demo_echo returned: hi/);
  });

  (TOOLKIT_PRESENT ? it : it.skip)("server mode: a task submitted in a run comes back into that thread as a notification run, with nothing else running", async () => {
    if (!server) throw new Error("server not started");
    const client = new Client({ apiUrl: server.baseUrl, apiKey: null });
    const { thread_id: thread } = await client.threads.create();
    // The run's user is the gateway's admin, so the task routes below show this task to the admin token.
    const submit = await client.runs.create(thread, "agent", {
      input: { messages: [{ role: "user", content: 'start jobs_start_countdown {"seconds":1}' }] },
      context: { user_id: "admin" },
    });
    await client.runs.join(thread, submit.run_id);
    const submitted = await client.threads.getState<{ messages: StoredMessage[] }>(thread);
    const toolMessage = submitted.values.messages.find((m) => m.type === "tool");
    const task = JSON.parse(messageText(toolMessage?.content)) as { task_id: string; task_name: string; status: string };
    expect(task).toMatchObject({ task_name: "countdown", status: "submitted" });

    // The in-server worker polls the countdown and delivers its completion as a second run on the thread.
    const deadline = Date.now() + RUN_DEADLINE_MS;
    let runs = await client.runs.list(thread);
    while (runs.length < 2) {
      if (Date.now() > deadline) throw new Error(`no notification run within ${RUN_DEADLINE_MS} ms:\n${stripAnsi(server.output())}`);
      await sleep(200);
      runs = await client.runs.list(thread);
    }
    const notification = runs.find((run) => run.run_id !== submit.run_id)!;
    expect(notification.metadata).toMatchObject({
      idempotency_key: expect.stringMatching(new RegExp(`^mcp-task:${task.task_id}:\\d+:0$`)),
      mcp_task_notification: { task_id: task.task_id, user_id: "admin" },
    });
    await client.runs.join(thread, notification.run_id);
    expect((await client.runs.get(thread, notification.run_id)).status).toBe("success");
    const after = await client.threads.getState<{ messages: StoredMessage[] }>(thread);
    expect(messageText(after.values.messages.at(-1)?.content)).toMatch(/^Background task countdown is completed: \{"counted_seconds":1,/);
    expect(server.workerLines()).toEqual([
      expect.stringMatching(/MCP task worker started in the LangGraph server: ticking every 1s .* notifications to this server \(in-process\)/),
    ]);

    // The gateway's task routes run on the same runtime: the task is completed and its event delivered.
    const listed = await api<{ task_id: string; status: string }[]>("GET", `/api/threads/${thread}/mcp-tasks`, undefined, {
      authorization: `Bearer ${ADMIN_TOKEN}`,
    });
    expect(listed).toEqual([expect.objectContaining({ task_id: task.task_id, status: "completed" })]);
    expect(await client.runs.list(thread)).toHaveLength(2);
  });
});

describe("langgraphjs dev with MCP_HARNESS_SERVER_WORKER=off (a LangGraph Platform cron or mcp-harness worker ticks instead)", () => {
  let quiet: ServerHandle | undefined;
  afterAll(async () => {
    if (quiet) await stopDevServer(quiet);
  });

  (TOOLKIT_PRESENT ? it : it.skip)("no worker runs in the server; a run of mcp_task_worker (what a cron starts) is one tick that delivers", async () => {
    quiet = await startDevServer({ MCP_HARNESS_SERVER_WORKER: "off" });
    await waitUntilReady(quiet);
    const client = new Client({ apiUrl: quiet.baseUrl, apiKey: null });
    const { thread_id: thread } = await client.threads.create();
    const submit = await client.runs.create(thread, "agent", { input: { messages: [{ role: "user", content: 'start jobs_start_countdown {"seconds":1}' }] } });
    await client.runs.join(thread, submit.run_id);

    // Ticks as a cron would start them (stateless runs of the worker graph): one launches the notification run,
    // a later one confirms it succeeded. Nothing else in the server delivers.
    const tickUntil = async (counter: "notified" | "delivered", runsBefore: number) => {
      const deadline = Date.now() + RUN_DEADLINE_MS;
      for (;;) {
        if (Date.now() > deadline) throw new Error(`no tick ${counter} within ${RUN_DEADLINE_MS} ms:\n${stripAnsi(quiet!.output())}`);
        expect(await client.runs.list(thread)).toHaveLength(runsBefore);
        const tick = (await client.runs.wait(null, "mcp_task_worker", { input: {} })) as Record<string, number>;
        if (tick[counter]! > 0) return;
        await sleep(250);
      }
    };
    await tickUntil("notified", 1);
    const runs = await client.runs.list(thread);
    expect(runs).toHaveLength(2);
    const notification = runs.find((run) => run.run_id !== submit.run_id)!;
    await client.runs.join(thread, notification.run_id);
    await tickUntil("delivered", 2);
    const state = await client.threads.getState<{ messages: StoredMessage[] }>(thread);
    expect(messageText(state.values.messages.at(-1)?.content)).toMatch(/^Background task countdown is completed: /);
    expect(quiet.workerLines()).toEqual([]);
  });
});
