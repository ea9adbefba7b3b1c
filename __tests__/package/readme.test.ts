/**
 * What the README tells a new user stays true: no pointers into a document that is not in the
 * repository, the install command and peer ranges match package.json, and every MCP_HARNESS_* variable
 * it describes is read somewhere (or is marked as not used yet). Its code examples are compiled and run
 * by pack.test.ts.
 */
import { describe, expect, it } from "@jest/globals";
import { readdirSync, readFileSync, statSync } from "node:fs";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");
const README = readFileSync(path.join(ROOT, "README.md"), "utf8");
const MANIFEST = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
  name: string;
  peerDependencies: Record<string, string>;
};

function sourceFiles(dir: string, skip: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) return sourceFiles(full, skip);
    return /\.(ts|js)$/.test(entry) && full !== skip ? [full] : [];
  });
}

describe("README.md", () => {
  it("points into no document that is not in the repository", () => {
    expect(README).not.toMatch(/§/);
    expect(README).not.toMatch(/\bSPEC\b/);
  });

  it("installs the package with its peer dependencies, at the ranges package.json declares", () => {
    const install = /^npm install (langgraph-mcp-harness .*)$/m.exec(README);
    expect(install).not.toBeNull();
    const named = install![1].split(/\s+/);
    for (const [peer, range] of Object.entries(MANIFEST.peerDependencies)) {
      expect(named).toContain(peer);
      expect(README).toContain(`\`${peer}\` (${range})`);
    }
  });

  it("describes only MCP_HARNESS_* variables that the code or the tests read, or marks them as not used yet", () => {
    const code = ["lib", "graphs", "__tests__"]
      .flatMap((dir) => sourceFiles(path.join(ROOT, dir), __filename))
      .map((file) => readFileSync(file, "utf8"))
      .join("\n");
    const rows = new Map<string, string>();
    for (const line of README.split("\n")) {
      const row = /^\| `(MCP_HARNESS_[A-Z_]+)` \| (.*) \|$/.exec(line);
      if (row) rows.set(row[1], row[2]);
    }
    expect(rows.size).toBeGreaterThan(0);
    const unread = [...new Set(README.match(/MCP_HARNESS_[A-Z_]+/g) ?? [])].filter(
      (name) => !code.includes(name) && !rows.get(name)?.startsWith("not used yet"),
    );
    expect(unread).toEqual([]);
  });
});
