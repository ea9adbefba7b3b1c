/**
 * End to end: `npm start`'s `langgraphjs dev` on a free loopback port, the `agent` graph over the demo
 * MCP server, with the offline scripted model. Nothing here reaches the network.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");
const CLI = path.join(ROOT, "node_modules", ".bin", "langgraphjs");
const STATE_DIR = path.join(ROOT, ".langgraph_api");
const GITIGNORE = path.join(ROOT, ".gitignore");
const READY_DEADLINE_MS = 90_000;
const RUN_DEADLINE_MS = 60_000;
const TOOLKIT_PRESENT = existsSync(path.join(ROOT, "lib", "index.ts"));
const ADMIN_TOKEN = "dev-server-test-admin-token";

/** A copy of the demo config the gateway may rewrite (its `cwd` made absolute so the copy finds the server). */
function demoConfigCopy(): string {
  const demo = JSON.parse(readFileSync(path.join(ROOT, "graphs", "demo", "extensions_config.json"), "utf8"));
  demo.mcpServers.demo.cwd = path.join(ROOT, "graphs", "demo");
  const file = path.join(mkdtempSync(path.join(tmpdir(), "dev-server-config-")), "extensions_config.json");
  writeFileSync(file, `${JSON.stringify(demo, null, 2)}\n`);
  return file;
}

jest.setTimeout(READY_DEADLINE_MS + RUN_DEADLINE_MS + 30_000);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address === null || typeof address === "string") {
        server.close();
        reject(new Error("no port"));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface ServerHandle {
  child: ChildProcess;
  baseUrl: string;
  output: () => string;
  exited: () => boolean;
}

let server: ServerHandle | undefined;
let startupMs = 0;
const createdStateDir = !existsSync(STATE_DIR);
const gitignoreBefore = existsSync(GITIGNORE) ? readFileSync(GITIGNORE, "utf8") : undefined;

async function startDevServer(): Promise<ServerHandle> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LANGGRAPH_CLI_NO_ANALYTICS: "1",
    BROWSER: "none",
    MCP_HARNESS_CONFIG: process.env.MCP_HARNESS_CONFIG ?? demoConfigCopy(),
    // The gateway's config endpoints (graphs/http.ts), and `node` (the demo server) allowed for re-enabling.
    MCP_HARNESS_ADMIN_TOKEN: ADMIN_TOKEN,
    MCP_HARNESS_STDIO_ALLOWLIST: "node",
    PORT: String(port),
    // Belt and braces for "offline": no LangSmith tracing, and the scripted model rather than a provider.
    LANGSMITH_TRACING: "false",
    LANGCHAIN_TRACING_V2: "false",
  };
  delete env.MCP_HARNESS_MODEL;

  let output = "";
  let exited = false;
  const child = spawn(CLI, ["dev", "--no-browser", "--host", "127.0.0.1", "--port", String(port)], {
    cwd: ROOT,
    env,
    detached: true, // own process group, so the whole tree (server, tsx workers, MCP servers) can be killed
    stdio: ["ignore", "pipe", "pipe"],
  });
  const append = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-20_000);
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  child.on("exit", () => {
    exited = true;
  });
  return { child, baseUrl: `http://127.0.0.1:${port}`, output: () => output, exited: () => exited };
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
    expect(await runText()).toMatch(/no tools are available/);
    await api<unknown>("PATCH", "/api/mcp/config", { server_name: "demo", enabled: true }, admin);
    expect(await runText()).toMatch(/^Tool demo_echo returned: hi/);
  });
});
