import { performance } from "node:perf_hooks";

export function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Times `a` and `b` interleaved (a, b, a, b, …) after a warm-up, so drift on a shared machine hits both
 * sides alike. Returns per-call samples in milliseconds.
 */
export async function interleaved(
  a: () => Promise<unknown>,
  b: () => Promise<unknown>,
  iterations: number,
  warmup = Math.min(50, iterations),
): Promise<{ a: number[]; b: number[] }> {
  for (let i = 0; i < warmup; i += 1) {
    await a();
    await b();
  }
  const result = { a: [] as number[], b: [] as number[] };
  for (let i = 0; i < iterations; i += 1) {
    let t = performance.now();
    await a();
    result.a.push(performance.now() - t);
    t = performance.now();
    await b();
    result.b.push(performance.now() - t);
  }
  return result;
}

export interface Row {
  figure: string;
  ours: string;
  baseline: string;
  ratio: number;
  target: string;
}

export function printTable(rows: Row[]): void {
  const header = ["figure", "ours", "baseline", "ratio", "target", "ok"];
  const body = rows.map((r) => {
    const limit = Number(r.target.replace(/[^0-9.]/g, ""));
    return [r.figure, r.ours, r.baseline, `${r.ratio.toFixed(3)}x`, r.target, r.ratio <= limit ? "yes" : "NO"];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
  for (const row of body) console.log(line(row));
}

export const fmtMs = (ms: number) => (ms < 1 ? `${(ms * 1000).toFixed(1)} µs` : `${ms.toFixed(2)} ms`);
