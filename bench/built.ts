/**
 * The library as users run it: its CommonJS build in dist/ (`npm run bench` builds it first). Figures measure this,
 * not lib/ through tsx: tsx's esbuild transform wraps every function and class our code creates in a `__name` call
 * (keepNames), a cost that the built package, and the SDK and adapters it is compared with, never pay.
 * Subpaths (tasks, worker, agent, sessions) are imported from dist/cjs the same way; importing this module first
 * refuses a build older than the sources.
 */
import { readdirSync, statSync } from "node:fs";
import * as path from "node:path";

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(full) : statSync(full).mtimeMs);
  }
  return newest;
}

const root = path.resolve(__dirname, "..");
const built = statSync(path.join(root, "dist", "cjs", "index.cjs"), { throwIfNoEntry: false })?.mtimeMs ?? 0;
if (built < newestSource(path.join(root, "lib"))) {
  throw new Error("dist/ is older than lib/: run `npm run build` (npm run bench does) before measuring");
}

export * from "../dist/cjs/index.cjs";
