import { performance } from "node:perf_hooks";

export function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The `p` quantile (0 < p <= 1) by the nearest-rank method. */
export function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * p) - 1))];
}

/**
 * Orders for a round-robin of `n` functions (a Williams design): over all the orders, each function runs at each
 * position equally often, and right after each other function equally often.
 */
export function balancedOrders(n: number): number[][] {
  const first: number[] = [];
  for (let low = 0, high = n - 1, j = 0; j < n; j += 1) first.push(j % 2 === 0 ? low++ : high--);
  const orders = Array.from({ length: n }, (_, shift) => first.map((f) => (f + shift) % n));
  return n % 2 === 0 ? orders : [...orders, ...orders.map((order) => [...order].reverse())];
}

/**
 * Times the functions round-robin after a warm-up, so drift on a shared machine hits every side alike. The rounds
 * follow `balancedOrders`: the first call of a round is measurably slower (two identical bare HTTP clients came
 * out 1.048x when one always went first, 0.973x when it always went second), and a call pays for what the call
 * before it left behind (a child still finishing its answer, garbage to collect): with the start merely rotated,
 * f1 always ran right after f0, and an identical copy of f1 placed after f2 came out 2-4 % faster. Returns
 * per-call samples in milliseconds, one array per function.
 */
export async function roundRobin(fns: readonly (() => Promise<unknown>)[], iterations: number, warmup = Math.min(50, iterations)): Promise<number[][]> {
  for (let i = 0; i < warmup; i += 1) for (const fn of fns) await fn();
  const orders = balancedOrders(fns.length);
  const samples = fns.map(() => [] as number[]);
  for (let i = 0; i < iterations; i += 1) {
    for (const j of orders[i % orders.length]) {
      const t = performance.now();
      await fns[j]();
      samples[j].push(performance.now() - t);
    }
  }
  return samples;
}

export async function interleaved(
  a: () => Promise<unknown>,
  b: () => Promise<unknown>,
  iterations: number,
  warmup?: number,
): Promise<{ a: number[]; b: number[] }> {
  const [sa, sb] = await roundRobin([a, b], iterations, warmup);
  return { a: sa, b: sb };
}

export interface Row {
  figure: string;
  ours: string;
  baseline: string;
  ratio: number;
  target: string;
  /** Overrides the check derived from `target` (for targets that are not a bound on the ratio). */
  ok?: boolean;
}

export function printTable(rows: Row[]): void {
  const header = ["figure", "ours", "baseline", "ratio", "target", "ok"];
  const body = rows.map((r) => {
    const digits = r.target.replace(/[^0-9.]/g, "");
    const atLeast = r.target.trim().startsWith(">=");
    const pass = r.ok ?? (digits === "" ? undefined : atLeast ? r.ratio >= Number(digits) : r.ratio <= Number(digits));
    const ok = pass === undefined ? "-" : pass ? "yes" : "NO";
    return [r.figure, r.ours, r.baseline, `${r.ratio.toFixed(3)}x`, r.target, ok];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
  for (const row of body) console.log(line(row));
}

export const fmtMs = (ms: number) => (ms < 1 ? `${(ms * 1000).toFixed(1)} µs` : `${ms.toFixed(2)} ms`);
