/**
 * README "A minimal agent": a standalone script that used the shared toolkit (`getCachedMcpTools`) calls
 * `resetMcpToolsCache()` before it ends, which "also closes its sessions", so the process ends on its own.
 */
import { afterAll, expect, test } from "@jest/globals";
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import * as path from "node:path";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { startHttpFixture, type StreamableHttpFixture } from "../fixtures/http-server";
import { stdioFixture, TSX_CJS_REGISTER } from "../fixtures/stdio";

let http: StreamableHttpFixture | undefined;
afterAll(async () => {
  await http?.close();
});

test("a script using getCachedMcpTools ends once it called resetMcpToolsCache", async () => {
  http = await startHttpFixture();
  const dir = await makeTempDir("mcp-review-shared-");
  const configPath = await writeConfig(dir, {
    mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo"] }) }, remote: { type: "http", url: http.url } },
  });
  const script = path.join(dir, "script.ts");
  const lib = path.join(__dirname, "..", "..", "lib");
  await writeFile(
    script,
    `import { getCachedMcpTools, resetMcpToolsCache } from ${JSON.stringify(lib)};
async function main() {
  const tools = await getCachedMcpTools();
  const echo = tools.find((t) => t.name === "local_echo")!;
  const remote = tools.find((t) => t.name === "remote_echo")!;
  console.log("A", await echo.invoke({ text: "one" }, { configurable: { thread_id: "t-1" } }));
  console.log("B", await remote.invoke({ text: "two" }));
  await resetMcpToolsCache();
  console.log("reset");
}
main().catch((e) => { console.error(e); process.exit(2); });
`,
  );
  const result = await new Promise<{ code: number | null; stdout: string; stderr: string; killed: boolean }>((resolve) => {
    const child = execFile(
      process.execPath,
      ["--require", TSX_CJS_REGISTER, script],
      { cwd: dir, env: { ...process.env, MCP_HARNESS_CONFIG: configPath, MCP_HARNESS_DATA_DIR: path.join(dir, "data") }, timeout: 30_000 },
      (error, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr, killed: error?.killed ?? false }),
    );
  });
  expect(result.stdout).toContain("A one");
  expect(result.stdout).toContain("B two");
  expect(result.stdout).toContain("reset");
  expect(result.killed).toBe(false);
  expect(result.code).toBe(0);
});
