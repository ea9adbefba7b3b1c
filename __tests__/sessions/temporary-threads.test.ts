/**
 * Stateless runs of a real `langgraphjs dev` (`POST /runs/wait` without a thread): the server runs them on a thread it
 * creates for the run and deletes after it. The harness tells them apart (no checkpointer in the run's config), and
 * their stdio sessions leave no thread folder once they close; nor does a thread deleted through the API.
 */
import { afterAll, beforeAll, describe, expect, jest, test } from "@jest/globals";
import { existsSync, readdirSync, readlinkSync } from "node:fs";
import { readdir } from "node:fs/promises";
import * as path from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { makeTempDir, stdioFixture, writeConfig } from "../fixtures";
import { startLangGraphDev, type LangGraphDevServer } from "../fixtures/langgraph-dev";
import { alive, waitUntil } from "../fixtures/processes";

jest.setTimeout(180_000);

const ROOT = path.resolve(__dirname, "..", "..");
let dev: LangGraphDevServer;
let dataDir: string;
let client: Client;

interface StateMessage {
  type: string;
  content: unknown;
}

beforeAll(async () => {
  const dir = await makeTempDir("langgraph-temporary-threads-");
  dataDir = path.join(dir, "data");
  const launch = stdioFixture({ name: "fx", toolNames: ["where", "write_file"] });
  // tsx keeps its compile cache in TMPDIR: in the host's, the thread's own temp folder stays empty.
  const configPath = await writeConfig(dir, { mcpServers: { fx: { type: "stdio", ...launch, env: { ...launch.env, TMPDIR: path.join(dir, "host-tmp") } } } });
  dev = await startLangGraphDev(
    { agent: `${path.join(ROOT, "graphs", "agent.ts")}:graph`, probe: `${path.join(ROOT, "__tests__", "fixtures", "temporary-probe-graph.ts")}:graph` },
    { env: { MCP_HARNESS_CONFIG: configPath, MCP_HARNESS_DATA_DIR: dataDir, MCP_HARNESS_MODEL: "" } },
  );
  client = new Client({ apiUrl: dev.url, apiKey: null });
}, 180_000);

afterAll(async () => {
  await dev?.close();
});

function toolAnswer(values: unknown): string {
  const tool = (values as { messages: StateMessage[] }).messages.filter((m) => m.type === "tool").at(-1);
  if (!tool) throw new Error(`no tool message in ${JSON.stringify(values)}\n${dev.output()}`);
  return String(tool.content);
}

/** The one live process working in `cwd` (the thread's stdio child). */
function childIn(cwd: string): number {
  const found = readdirSync("/proc")
    .filter((name) => /^[0-9]+$/.test(name))
    .filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/cwd`) === cwd;
      } catch {
        return false;
      }
    });
  if (found.length !== 1) throw new Error(`expected one process in ${cwd}, found ${found.length}`);
  return Number(found[0]);
}

function threadFolder(thread: string): string {
  return path.join(dataDir, "threads", thread);
}

describe("runs of a LangGraph server as the harness sees them", () => {
  test("a stateless run is on a temporary thread; a run on a thread, or a stateless one that keeps its thread, is not", async () => {
    const { thread_id: thread } = await client.threads.create();
    const onThread = JSON.parse(toolAnswer(await client.runs.wait(thread, "probe", { input: { messages: [] } })));
    expect(onThread).toEqual({ temporary: false, threadId: thread, scopeTemporary: false });
    const stateless = JSON.parse(toolAnswer(await client.runs.wait(null, "probe", { input: { messages: [] } })));
    expect(stateless).toMatchObject({ temporary: true, scopeTemporary: true });
    // The thread the server ran it on is gone once the run is over.
    await expect(client.threads.get(stateless.threadId)).rejects.toThrow();
    // `on_completion: "keep"` (not in the SDK's types for a run without a thread): the server keeps that thread.
    const keep = { input: { messages: [] }, onCompletion: "keep" } as unknown as Parameters<typeof client.runs.wait>[2];
    const kept = JSON.parse(toolAnswer(await client.runs.wait(null, "probe", keep)));
    expect(kept).toMatchObject({ temporary: false, scopeTemporary: false });
    expect((await client.threads.get(kept.threadId)).thread_id).toBe(kept.threadId);
  });
});

describe("stdio sessions of threads that are gone", () => {
  test("three stateless runs get a child each in a thread folder of their own, which goes with the session", async () => {
    const seen: { pid: number; cwd: string }[] = [];
    for (let i = 0; i < 3; i += 1) {
      seen.push(JSON.parse(toolAnswer(await client.runs.wait(null, "agent", { input: { messages: [{ role: "human", content: "fx_where {}" }] } }))));
    }
    expect(new Set(seen.map((s) => s.pid)).size).toBe(3);
    for (const { pid, cwd } of seen) {
      const folder = path.dirname(path.dirname(cwd));
      expect(path.dirname(folder)).toBe(path.join(dataDir, "threads"));
      expect(existsSync(cwd)).toBe(true);
      // However its session ends (here its child dies), the folder of the deleted thread held nothing: it goes.
      process.kill(pid, "SIGKILL");
      expect(await waitUntil(() => !alive(pid) && !existsSync(folder), 30_000)).toBe(true);
    }
  });

  test("what a stateless run's server left in the thread's temp folder goes with its folder; a kept thread's stays", async () => {
    const input = { input: { messages: [{ role: "human", content: `fx_write_file {"path":".mcp/tmp/scratch/x","content":"x"}` }] } };
    const write = (thread: string | null) => (thread === null ? client.runs.wait(null, "agent", input) : client.runs.wait(thread, "agent", input));
    const before = new Set(await readdir(path.join(dataDir, "threads")).catch(() => [] as string[]));
    toolAnswer(await write(null));
    const { thread_id: kept } = await client.threads.create();
    toolAnswer(await write(kept));
    const [stateless] = (await readdir(path.join(dataDir, "threads"))).filter((name) => !before.has(name) && name !== kept);
    expect(existsSync(path.join(threadFolder(stateless!), "user-data", "workspace", ".mcp", "tmp", "scratch", "x"))).toBe(true);
    for (const thread of [stateless!, kept]) {
      const pid = childIn(path.join(threadFolder(thread), "user-data", "workspace"));
      process.kill(pid, "SIGKILL");
      expect(await waitUntil(() => !alive(pid), 30_000)).toBe(true);
    }
    expect(await waitUntil(() => !existsSync(threadFolder(stateless!)), 30_000)).toBe(true);
    expect(existsSync(path.join(threadFolder(kept), "user-data", "workspace", ".mcp", "tmp", "scratch", "x"))).toBe(true);
  });

  test("a thread deleted through the API leaves no empty folder once its session ended; a thread's files stay", async () => {
    const { thread_id: gone } = await client.threads.create();
    const ask = async (thread: string, request: string) => client.runs.wait(thread, "agent", { input: { messages: [{ role: "human", content: request }] } });
    const { pid } = JSON.parse(toolAnswer(await ask(gone, "fx_where {}"))) as { pid: number };
    await client.threads.delete(gone);
    process.kill(pid, "SIGKILL");
    expect(await waitUntil(() => !alive(pid) && !existsSync(threadFolder(gone)), 30_000)).toBe(true);

    const { thread_id: written } = await client.threads.create();
    expect(toolAnswer(await ask(written, 'fx_write_file {"path":"notes.txt","content":"n"}'))).toBe("wrote /mnt/user-data/workspace/notes.txt");
    const again = JSON.parse(toolAnswer(await ask(written, "fx_where {}"))) as { pid: number; cwd: string };
    await client.threads.delete(written);
    process.kill(again.pid, "SIGKILL");
    expect(await waitUntil(() => !alive(again.pid), 30_000)).toBe(true);
    expect(existsSync(path.join(again.cwd, "notes.txt"))).toBe(true);
  });
});
