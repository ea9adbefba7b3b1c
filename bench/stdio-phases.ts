/**
 * Diagnostic for the stdio per-thread figure (not part of `npm run bench`): where our call spends its time against
 * a bare SDK client, split at the moment the request is written to the child's stdin and the moment the first
 * answer bytes are read. A third side, `direct`, sends bare SDK calls to our own children (the session of thread
 * t + 10, so never the child the previous call used); `NO_DIRECT=1` leaves it out.
 * `node --expose-gc --import tsx bench/stdio-phases.ts`
 *
 * What it showed (2026-12-05, 2 cores): the middle phase is not only the child's time. Work the parent does after
 * the write, before its event loop blocks, delays the answer (probably because the woken child runs on the writer's
 * CPU once the writer sleeps). With the redactor built after the write, the middle phase was 29–37 µs slower than
 * bare's; built before it, 15–27 µs slower, while the phase before the write grew by ~6 µs (three paired runs). What
 * remains is close to what the progress token costs the child to parse (a few percent of a bare call, bare clients
 * alone: bench/progress-token.ts).
 *
 * It reaches into the toolkit's private session pool to hook the children's pipes; nothing here is API.
 */
import { performance } from "node:perf_hooks";
import type { ChildProcess } from "node:child_process";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { createMcpToolkit, silentLogger } from "./built";
import type { McpSession } from "../dist/cjs/sessions/pool.cjs";
import { makeTempDir, writeConfig } from "../__tests__/fixtures/config";
import { stdioFixture } from "../__tests__/fixtures/stdio";
import { fmtMs, median } from "./stats";

const THREADS = 20;
const CALLS = Number(process.env.BENCH_CALLS ?? 1000);
const runtimeFor = (thread: number) => ({
  toolCallId: "phases",
  context: { user_id: "u", secrets: { api_key: "k" } },
  configurable: { thread_id: `t-${thread}` },
  state: {},
  store: null,
  writer: null,
});

let written = 0;
let read = 0;
function hook(transport: unknown): void {
  const child = (transport as { _process: ChildProcess })._process;
  const stdin = child.stdin!;
  const write = stdin.write.bind(stdin) as (...args: unknown[]) => boolean;
  stdin.write = ((...args: unknown[]) => {
    written = performance.now();
    return write(...args);
  }) as typeof stdin.write;
  child.stdout!.prependListener("data", () => {
    read = performance.now();
  });
}

async function main(): Promise<void> {
  const launch = stdioFixture({ name: "local", toolNames: ["echo"] });
  const configPath = await writeConfig(await makeTempDir("bench-phases-"), { mcpServers: { local: { type: "stdio", ...launch } } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: silentLogger, dataDir: await makeTempDir("bench-phases-data-") });
  const tool = (await toolkit.getTools()).find((t) => t.name === "local_echo") as DynamicStructuredTool;
  const ours = (thread: number) => tool.func({ text: "x" }, undefined, runtimeFor(thread) as never) as Promise<unknown>;
  for (let i = 0; i < THREADS; i += 1) await ours(i);
  const pool = (toolkit as unknown as { current: { pool: { entries: Map<string, { ready: Promise<McpSession> }> } } }).current.pool;
  const sessions = await Promise.all([...pool.entries.values()].map((entry) => entry.ready));
  for (const session of sessions) hook(session.client.transport);
  const ownChild = (thread: number) => {
    const session = sessions.find((s) => s.scope?.threadId === `t-${thread}`);
    if (!session) throw new Error(`no session for thread t-${thread}`);
    return session.client;
  };
  const direct = Array.from({ length: THREADS }, (_, thread) => ownChild((thread + THREADS / 2) % THREADS));
  const withDirect = !process.env.NO_DIRECT;
  const bare = await Promise.all(
    Array.from({ length: THREADS }, async () => {
      const client = new Client({ name: "bench", version: "0" });
      const transport = new StdioClientTransport({ ...launch, env: { ...getDefaultEnvironment(), ...launch.env }, stderr: "pipe" });
      await client.connect(transport);
      hook(transport);
      return client;
    }),
  );
  const sides: Record<string, number[][]> = { ours: [[], [], []], bare: [[], [], []], ...(withDirect ? { direct: [[], [], []] } : {}) };
  const record = (phases: number[][], start: number, end: number) => {
    phases[0].push(written - start);
    phases[1].push(read - written);
    phases[2].push(end - read);
  };
  for (let n = 0; n < CALLS + 100; n += 1) {
    const thread = n % THREADS;
    let start = performance.now();
    await ours(thread);
    if (n >= 100) record(sides.ours, start, performance.now());
    start = performance.now();
    await bare[thread].callTool({ name: "echo", arguments: { text: "x" } });
    if (n >= 100) record(sides.bare, start, performance.now());
    if (!withDirect) continue;
    start = performance.now();
    await direct[thread].callTool({ name: "echo", arguments: { text: "x" }, _meta: { progressToken: `direct-${n}` } });
    if (n >= 100) record(sides.direct, start, performance.now());
  }
  console.log(`stdio, ${THREADS} threads round-robin, medians of ${CALLS}: before the request is written | written → first answer bytes | after`);
  for (const [name, phases] of Object.entries(sides)) console.log(`  ${name.padEnd(6)} ${phases.map((p) => fmtMs(median(p)).padStart(9)).join(" | ")}`);
  await Promise.all([...bare.map((c) => c.close()), toolkit.close()]);
}

void main();
