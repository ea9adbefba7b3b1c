/**
 * Gateway figures (issue 14): config GET and PUT under 8 concurrent clients over loopback HTTP, as median,
 * p99 and requests/s, each against a baseline served by the same node:http adapter in the same process:
 * - GET: a bare handler that reads and parses the file and returns its servers (no auth, no masking, no Hono);
 * - PUT: a bare handler that writes the body to a temp file and renames it (no validation, no restore of
 *   masked values, no locks, no fsync): what the gateway's durability and locking cost on top.
 */
import { randomBytes } from "node:crypto";
import { readFile, rename, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import { createGatewayApp } from "./built";
import { makeTempDir, writeConfig } from "../__tests__/fixtures/config";
import { fmtMs, median, type Row } from "./stats";

const CLIENTS = 8;
const GETS_PER_CLIENT = Number(process.env.BENCH_GATEWAY_GETS ?? 150);
const PUTS_PER_CLIENT = Number(process.env.BENCH_GATEWAY_PUTS ?? 40);
const ROUNDS = 2;

type Handler = (request: Request) => Promise<Response> | Response;

async function serve(handler: Handler): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const method = req.method ?? "GET";
      const headers = Object.fromEntries(Object.entries(req.headers).filter((e): e is [string, string] => typeof e[1] === "string"));
      const request = new Request(`http://127.0.0.1${req.url ?? "/"}`, { method, headers, body: method === "GET" ? undefined : Buffer.concat(chunks) });
      const response = await handler(request);
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.end(Buffer.from(await response.arrayBuffer()));
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

function p99(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)];
}

/** `CLIENTS` loops of `count` requests each, in parallel; per-request latencies and the wall time. */
async function load(count: number, send: (client: number, i: number) => Promise<Response>): Promise<{ samples: number[]; wallMs: number }> {
  const samples: number[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_unused, client) => {
      for (let i = 0; i < count; i++) {
        const t = performance.now();
        const response = await send(client, i);
        await response.arrayBuffer();
        if (!response.ok) throw new Error(`bench request failed: ${response.status}`);
        samples.push(performance.now() - t);
      }
    }),
  );
  return { samples, wallMs: performance.now() - started };
}

function servers(client: number, i: number): Record<string, unknown> {
  return {
    github: { command: "npx", args: ["-y", "@modelcontextprotocol/server-github"], env: { GITHUB_TOKEN: "$GITHUB_TOKEN" } },
    docs: { url: "https://docs.example.com/mcp", headers: { Authorization: "Bearer ${DOCS_TOKEN}" } },
    [`c${client}`]: { url: `https://example.com/${client}/${i}` },
  };
}

export async function gatewayFigures(rows: Row[]): Promise<void> {
  const dir = await makeTempDir("bench-gateway-");
  const file = await writeConfig(dir, { mcpServers: servers(0, 0), mcpInterceptors: [] });
  const app = createGatewayApp({ configPath: file, env: {}, authorize: () => ({ userId: "bench", admin: true }) });
  const gateway = await serve((request) => app.fetch(request));
  const bare = await serve(async (request) => {
    if (request.method === "GET") {
      const raw = JSON.parse(await readFile(file, "utf8")) as { mcpServers: unknown };
      return Response.json({ mcp_servers: raw.mcpServers });
    }
    const body = (await request.json()) as { mcp_servers: unknown };
    const temp = path.join(dir, `.bare.${randomBytes(6).toString("hex")}.tmp`);
    await writeFile(temp, JSON.stringify({ mcpServers: body.mcp_servers }, null, 2));
    await rename(temp, file);
    return Response.json({ ok: true });
  });

  const get = (url: string) => () => fetch(`${url}/api/mcp/config`);
  const put = (url: string) => (client: number, i: number) =>
    fetch(`${url}/api/mcp/config`, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ mcp_servers: servers(client, i) }) });

  for (const [label, count, ours, base] of [
    ["GET", GETS_PER_CLIENT, get(gateway.url), get(bare.url)],
    ["PUT", PUTS_PER_CLIENT, put(gateway.url), put(bare.url)],
  ] as const) {
    await load(Math.min(10, count), ours);
    await load(Math.min(10, count), base);
    const mine = { samples: [] as number[], wallMs: 0 };
    const theirs = { samples: [] as number[], wallMs: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      for (const [side, target] of [
        [mine, ours],
        [theirs, base],
      ] as const) {
        const run = await load(count, target);
        side.samples.push(...run.samples);
        side.wallMs += run.wallMs;
      }
    }
    const rate = (side: typeof mine) => (side.samples.length / side.wallMs) * 1000;
    const describe = (side: typeof mine) => `median ${fmtMs(median(side.samples))}, p99 ${fmtMs(p99(side.samples))}, ${rate(side).toFixed(0)} req/s`;
    rows.push({
      figure: `config ${label}, ${CLIENTS} concurrent clients over loopback (${mine.samples.length} requests): gateway / bare handler, median`,
      ours: describe(mine),
      baseline: describe(theirs),
      ratio: median(mine.samples) / median(theirs.samples),
      target: label === "GET" ? "<= 2" : "informational (locks + fsync)",
    });
  }
  await gateway.close();
  await bare.close();
}
