/**
 * Diagnostic (not part of `npm run bench`): what a progress token in `_meta` costs a call, with no code of ours
 * involved. Our calls carry one (`tool_call_timeout` restarts on each progress notification, which a server only
 * sends for a token), the bare clients of the session figures do not. Three sets of bare SDK clients on their own
 * fixture children (stdio) or sessions (HTTP), round-robin: no `_meta`, our string token, and a numeric token as
 * the SDK's own `onprogress` sends. `node --expose-gc --import tsx bench/progress-token.ts`
 *
 * 2026-12-05, 2 cores, rounds in balanced order: stdio string token 1.050x and 1.033x, numeric 1.122x and 1.068x;
 * HTTP 1.002x to 1.005x. Sets of identical stdio clients differ by several percent in one run (0.91x to 1.04x, the
 * session figures' row "a second, identical set"), so the stdio token costs a few percent, not a precise figure.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { startHttpFixture } from "../__tests__/fixtures/http-server";
import { stdioFixture } from "../__tests__/fixtures/stdio";
import { fmtMs, median, printTable, roundRobin, type Row } from "./stats";

const CLIENTS = 20;
const CALLS = Number(process.env.BENCH_CALLS ?? 2000);
const WARMUP = 1000;

type Meta = (n: number) => Record<string, unknown> | undefined;
const SIDES: ReadonlyArray<readonly [string, Meta]> = [
  ["no _meta", () => undefined],
  ["string token (ours)", (n) => ({ progressToken: `harness-${n}` })],
  ["numeric token (SDK onprogress)", (n) => ({ progressToken: n })],
];

async function clients(transport: (i: number) => Transport): Promise<Client[]> {
  return Promise.all(
    Array.from({ length: CLIENTS }, async (_, i) => {
      const client = new Client({ name: "bench", version: "0" });
      await client.connect(transport(i));
      return client;
    }),
  );
}

async function measure(kind: string, transport: (i: number) => Transport, rows: Row[]): Promise<void> {
  const sets = await Promise.all(SIDES.map(() => clients(transport)));
  const calls = SIDES.map(([, meta], side) => {
    let n = 0;
    return () => {
      n += 1;
      const _meta = meta(n);
      return sets[side][n % CLIENTS].callTool({ name: "echo", arguments: { text: "x" }, ...(_meta ? { _meta } : {}) });
    };
  });
  const medians = (await roundRobin(calls, CALLS, WARMUP)).map(median);
  for (let side = 1; side < SIDES.length; side += 1) {
    rows.push({
      figure: `${kind}, ${CLIENTS} bare clients round-robin: ${SIDES[side][0]} / ${SIDES[0][0]} (median of ${CALLS})`,
      ours: fmtMs(medians[side]),
      baseline: fmtMs(medians[0]),
      ratio: medians[side] / medians[0],
      target: "(context)",
    });
  }
  await Promise.all(sets.flat().map((c) => c.close()));
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  const launch = stdioFixture({ name: "local", toolNames: ["echo"] });
  await measure("stdio", () => new StdioClientTransport({ ...launch, env: { ...getDefaultEnvironment(), ...launch.env }, stderr: "pipe" }), rows);
  const http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
  await measure("HTTP", () => new StreamableHTTPClientTransport(new URL(http.url)), rows);
  await http.close();
  printTable(rows);
}

void main();
