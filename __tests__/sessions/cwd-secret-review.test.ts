/**
 * Review of 39c333a (a `cwd` made of a `$VAR` secret is a secret of its server as a whole path once resolving normalized
 * the value): the same holds for an absolute value the loader does not resolve, which the child's working folder shows
 * normalized all the same (`process.cwd()` has no trailing or doubled slash).
 */
import { afterAll, describe, expect, test } from "@jest/globals";
import { mkdir, realpath, symlink } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, seenByModel, toolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

const toolkits: McpToolkit[] = [];
afterAll(async () => {
  await Promise.all(toolkits.map((t) => t.close()));
});

const SECRET = "tenant-s3cr3t-7c1e";

/** A config whose one server answers its cwd (`where`), launched in `cwd`. */
function whereConfig(dir: string, cwd: string): Promise<string> {
  return writeConfig(dir, { mcpServers: { hidden: { type: "stdio", ...stdioFixture({ name: "hidden", toolNames: ["where"] }), cwd } } });
}

/** What the model and the log are shown of the server's `where` call, with `TENANT_DIR` set to `value`. */
async function whereShown(configPath: string, value: string): Promise<{ seen: string; logged: string[] }> {
  const logger = new RecordingLogger();
  const toolkit = createMcpToolkit({ configPath, env: { TENANT_DIR: value }, logger, dataDir: await makeTempDir("mcp-cwd-secret-review-data-") });
  toolkits.push(toolkit);
  const message = await callThroughGraph(toolNodeGraph(await toolkit.getTools()), "hidden_where", {}, { configurable: { thread_id: "t-where" } });
  expect(message.status).toBe("success");
  return { seen: seenByModel(message), logged: logger.messages() };
}

/** The answer names the cwd, and neither it nor the log holds the secret. */
function expectHidden({ seen, logged }: { seen: string; logged: string[] }): void {
  expect(seen).toContain("cwd");
  expect(seen).not.toContain(SECRET);
  for (const line of logged) expect(line).not.toContain(SECRET);
}

/** `viaLink`: the config's folder is reached through a symbolic link, as the child's `process.cwd()` is not. */
async function whereSeen(cwd: string, value: (dir: string) => string, viaLink = false): Promise<{ seen: string; logged: string[] }> {
  const real = await realpath(await makeTempDir("mcp-cwd-secret-review-"));
  await mkdir(path.join(real, SECRET, "work"), { recursive: true });
  const dir = viaLink ? path.join(await realpath(await makeTempDir("mcp-cwd-secret-review-link-")), "cfg") : real;
  if (viaLink) await symlink(real, dir);
  return whereShown(await whereConfig(dir, cwd), value(dir));
}

describe("an existing absolute cwd from a $VAR holding a secret, in a form the child's cwd normalizes", () => {
  test.each([
    ["with a trailing slash", "${TENANT_DIR}", (dir: string) => `${dir}/${SECRET}/`],
    ["with a doubled slash", "${TENANT_DIR}", (dir: string) => `${dir}//${SECRET}`],
    ["with a '.' segment", "${TENANT_DIR}", (dir: string) => `${dir}/./${SECRET}`],
    ["with a trailing slash, inside a longer cwd", "${TENANT_DIR}/work", (dir: string) => `${dir}/${SECRET}/`],
  ])("%s: a server answering its cwd shows the model no part of the secret", async (_label, cwd, value) => {
    expectHidden(await whereSeen(cwd, value));
  });

  test("an absolute value already normalized stays redacted as it is (no whole-path secret needed)", async () => {
    const { seen } = await whereSeen("${TENANT_DIR}", (dir) => `${dir}/${SECRET}`);
    expect(seen).not.toContain(SECRET);
  });

  test.each([
    ["relative, with a leading ./ and a trailing slash", "${TENANT_DIR}", () => `./${SECRET}/`],
    ["absolute, with a trailing slash", "${TENANT_DIR}", (dir: string) => `${dir}/${SECRET}/`],
  ])("%s, the config's folder reached through a link: the child's real cwd shows no part of the secret", async (_label, cwd, value) => {
    expectHidden(await whereSeen(cwd, value, true));
  });
});

test("an absolute cwd from a $VAR with '..' after a link: the child's working folder (the kernel reads '..' after the link) shows no part of the secret", async () => {
  const config = await realpath(await makeTempDir("mcp-cwd-secret-review-"));
  const elsewhere = await realpath(await makeTempDir("mcp-cwd-secret-review-target-"));
  await mkdir(path.join(elsewhere, "sub"));
  await mkdir(path.join(elsewhere, SECRET));
  await symlink(path.join(elsewhere, "sub"), path.join(config, "link"));
  const configPath = await whereConfig(config, "${TENANT_DIR}");
  expectHidden(await whereShown(configPath, `${config}/link/../${SECRET}`));
});

test("an absolute cwd from a $VAR already normalized, through a link: the child's real working folder shows no part of the secret", async () => {
  const real = await realpath(await makeTempDir("mcp-cwd-secret-review-"));
  await mkdir(path.join(real, SECRET));
  const link = path.join(await realpath(await makeTempDir("mcp-cwd-secret-review-link-")), "tenants");
  await symlink(real, link);
  const configPath = await whereConfig(real, "${TENANT_DIR}");
  expectHidden(await whereShown(configPath, `${link}/${SECRET}`));
});
