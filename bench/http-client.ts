/**
 * Diagnostic (not part of `npm run bench`): how much of a Streamable HTTP call is Node's global `fetch` (undici), the
 * HTTP client under the SDK's transport on both sides of the per-user HTTP figure. Two sets of bare SDK clients on
 * one fixture server, round-robin: the SDK's default (global `fetch`) and the same transport handed a minimal `fetch`
 * written on `node:http` with a keep-alive agent; a third set, our toolkit's pooled per-user call (global `fetch`),
 * for scale. `node --expose-gc --import tsx bench/http-client.ts` (after `npm run build`)
 *
 * The minimal `fetch` is a measuring device, not a client to ship: it sends string bodies only, does not decode
 * compressed responses, follows no redirects, ignores a global undici dispatcher (proxies) and has no defence
 * against a keep-alive socket the server closed while idle (undici honours the server's `Keep-Alive` hint).
 *
 * 2026-12-06, 2 cores, three runs: the node:http client 0.912x, 0.929x, 0.933x of global fetch; our call 1.145x,
 * 1.155x, 1.133x of the bare clients on global fetch. The HTTP client is a few percent of a call, the same on both
 * sides of the session figure: swapping it would move that figure by about as much, not close its gap.
 */
import { Agent, request } from "node:http";
import { Readable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createMcpToolkit, silentLogger } from "./built";
import { makeTempDir, writeConfig } from "../__tests__/fixtures/config";
import { startHttpFixture } from "../__tests__/fixtures/http-server";
import { fmtMs, median, printTable, roundRobin, type Row } from "./stats";

const USERS = 20;
const CALLS = Number(process.env.BENCH_CALLS ?? 2000);
const WARMUP = 500;

function keepAliveFetch(agent: Agent): typeof fetch {
  return (input, init) =>
    new Promise<Response>((resolve, reject) => {
      const headers: Record<string, string> = {};
      new Headers(init?.headers).forEach((value, name) => (headers[name] = value));
      const req = request(new URL(String(input)), { method: init?.method ?? "GET", headers, agent, signal: init?.signal ?? undefined }, (res) => {
        const received = new Headers();
        for (let i = 0; i < res.rawHeaders.length; i += 2) received.append(res.rawHeaders[i], res.rawHeaders[i + 1]);
        const status = res.statusCode ?? 502;
        const empty = status === 204 || status === 304;
        if (empty) res.resume();
        resolve(new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, statusText: res.statusMessage, headers: received }));
      });
      req.on("error", reject);
      req.end(typeof init?.body === "string" ? init.body : undefined);
    });
}

async function main(): Promise<void> {
  const http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
  const agent = new Agent({ keepAlive: true, timeout: 4_000 });
  const clients = (fetchFn?: typeof fetch) =>
    Promise.all(
      Array.from({ length: USERS }, async (_, i) => {
        const client = new Client({ name: "bench", version: "0" });
        const requestInit = { headers: { "X-Api-Key": `key-${i}` } };
        await client.connect(new StreamableHTTPClientTransport(new URL(http.url), { requestInit, fetch: fetchFn }));
        return client;
      }),
    );
  const [viaFetch, viaHttp] = await Promise.all([clients(), clients(keepAliveFetch(agent))]);
  const configPath = await writeConfig(await makeTempDir("bench-http-client-"), {
    mcpServers: { remote: { type: "http", url: http.url, headers_from_context: { headers: { "X-Api-Key": "api_key" } } } },
  });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: silentLogger });
  const tool = (await toolkit.getTools()).find((t) => t.name === "remote_echo")!;
  const runtime = (user: number) => ({
    toolCallId: "bench",
    context: { user_id: `user-${user}`, secrets: { api_key: `key-${user}` } },
    configurable: { thread_id: "bench" },
    state: {},
    store: null,
    writer: null,
  });
  const cycle = (call: (i: number) => Promise<unknown>) => {
    let n = 0;
    return () => call(n++ % USERS);
  };
  const echo = (set: readonly Client[]) => cycle((i) => set[i].callTool({ name: "echo", arguments: { text: "x" } }));
  const [base, lean, ours] = (
    await roundRobin([echo(viaFetch), echo(viaHttp), cycle((i) => tool.func({ text: "x" }, undefined, runtime(i) as never) as Promise<unknown>)], CALLS, WARMUP)
  ).map(median);
  const rows: Row[] = [
    {
      figure: `HTTP, ${USERS} bare clients round-robin: node:http keep-alive fetch / global fetch (median of ${CALLS})`,
      ours: fmtMs(lean),
      baseline: fmtMs(base),
      ratio: lean / base,
      target: "(context)",
    },
    {
      figure: `HTTP, ${USERS} users: our pooled call (global fetch) / bare clients on global fetch (median of ${CALLS})`,
      ours: fmtMs(ours),
      baseline: fmtMs(base),
      ratio: ours / base,
      target: "(context)",
    },
  ];
  printTable(rows);
  await Promise.all([...viaFetch, ...viaHttp].map((c) => c.close()));
  await toolkit.close();
  agent.destroy();
  await http.close();
}

void main();
