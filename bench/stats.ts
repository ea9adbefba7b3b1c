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
 * Times the functions round-robin after a warm-up, so drift on a shared machine hits every side alike. Each round
 * starts one function later (f0 f1 f2, f1 f2 f0, f2 f0 f1, …): the first call of a round is measurably slower
 * (two identical bare HTTP clients came out 1.048× when one always went first, 0.973× when it always went second),
 * so a fixed order would charge that to f0. Returns per-call samples in milliseconds, one array per function.
 */
export async function roundRobin(fns: readonly (() => Promise<unknown>)[], iterations: number, warmup = Math.min(50, iterations)): Promise<number[][]> {
  for (let i = 0; i < warmup; i += 1) for (const fn of fns) await fn();
  const samples = fns.map(() => [] as number[]);
  for (let i = 0; i < iterations; i += 1) {
    for (let k = 0; k < fns.length; k += 1) {
      const j = (i + k) % fns.length;
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
