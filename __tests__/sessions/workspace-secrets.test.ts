/**
 * Two users on one thread id have a stdio child each, but one thread workspace. What one user's call sends its child
 * (a run's `context.secrets`) may name a file there while the other user's call runs: that call lists the file
 * (`workspace_changes`) and may quote its name, so it is scrubbed of what any session of the workspace was sent.
 */
import { writeFile } from "node:fs/promises";
import * as path from "node:path";
import { afterEach, expect, test } from "@jest/globals";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolkit } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { threadPaths } from "../../lib/sessions/workspace";
import { sharesWorkspaceSecrets, workspaceSessionCount } from "../../lib/sessions/workspace-secrets";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { callThroughGraph, runningCall, toolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { alive, waitUntil } from "../fixtures/processes";
import { stdioFixture } from "../fixtures/stdio";
import { echoForms } from "../fixtures/tools";

const toolkits: McpToolkit[] = [];
const pools: SessionPool[] = [];
afterEach(async () => {
  await Promise.all([...toolkits.splice(0).map((t) => t.close()), ...pools.splice(0).map((p) => p.close())]);
});

function expectNoForm(text: string, secret: string): void {
  for (const form of echoForms(secret)) expect(text).not.toContain(form);
}

test("a file another user's call on the same thread named with that user's secret is listed scrubbed", async () => {
  // Characters URL-encoding and JSON change, all allowed in a file name.
  const SECRET = "ann tok+9Zq=Kx7";
  const launch = stdioFixture({ name: "ws", toolNames: ["pid", "fs_ops", "await_file"] });
  const dataDir = await makeTempDir("mcp-ws-secrets-data-");
  const configPath = await writeConfig(await makeTempDir("mcp-ws-secrets-"), { mcpServers: { ws: { type: "stdio", ...launch } } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  toolkits.push(toolkit);
  const graph = toolNodeGraph(await toolkit.getTools());
  const ann = { context: { user_id: "ann", secrets: { token: SECRET } }, configurable: { thread_id: "shared-t" } };
  const bob = { context: { user_id: "bob", secrets: { token: "bob-tok-Wd3" } }, configurable: { thread_id: "shared-t" } };
  // Two children (so two sessions, each remembering what it was sent), one workspace.
  const pids = [Number((await callThroughGraph(graph, "ws_pid", {}, ann)).content), Number((await callThroughGraph(graph, "ws_pid", {}, bob)).content)];
  expect(pids[0]).not.toBe(pids[1]);

  // Bob's call runs in his child (its progress shows it watching) until Ann's call has written both files.
  const bobs = await runningCall(graph, "ws_await_file", { path: "gate" }, bob);
  const anns = await callThroughGraph(graph, "ws_fs_ops", { ops: [{ op: "write", path: `${SECRET}.txt`, content: "x" }, { op: "write", path: "gate" }] }, ann);
  expect(anns.status).toBe("success");
  const message = await bobs.done;
  expect(message.status).toBe("success");
  const changes = (message.artifact as { workspace_changes?: string[] }).workspace_changes;
  // Both files are listed and named in the answer (so the checks below can fail).
  expect(changes).toHaveLength(2);
  expect(changes).toContain("/mnt/user-data/workspace/gate");
  expect(String(message.content).split("\n")).toHaveLength(3);
  expectNoForm(JSON.stringify(message.artifact), SECRET);
  expectNoForm(JSON.stringify(message.content), SECRET);
  expectNoForm(String(message.content), SECRET);
  expectNoForm(JSON.stringify(anns.artifact), SECRET);
});

test("a session that left the workspace while another user's call ran is still scrubbed from that call's ToolMessage", async () => {
  const SECRET = "gone tok+7Rw=Lm4";
  const launch = stdioFixture({ name: "ws", toolNames: ["pid", "fs_ops", "await_file"] });
  const dataDir = await makeTempDir("mcp-ws-secrets-left-data-");
  const configPath = await writeConfig(await makeTempDir("mcp-ws-secrets-left-"), { mcpServers: { ws: { type: "stdio", ...launch } } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  toolkits.push(toolkit);
  const graph = toolNodeGraph(await toolkit.getTools());
  const ann = { context: { user_id: "ann", secrets: { token: SECRET } }, configurable: { thread_id: "left-t" } };
  const bob = { context: { user_id: "bob", secrets: { token: "bob-tok-Pe8" } }, configurable: { thread_id: "left-t" } };
  const folder = threadPaths(dataDir, "left-t").workspace;
  const annPid = Number((await callThroughGraph(graph, "ws_pid", {}, ann)).content);
  await callThroughGraph(graph, "ws_pid", {}, bob);
  expect(workspaceSessionCount(folder)).toBe(2);

  const bobs = await runningCall(graph, "ws_await_file", { path: "gate" }, bob);
  expect((await callThroughGraph(graph, "ws_fs_ops", { ops: [{ op: "write", path: `${SECRET}.txt`, content: "x" }] }, ann)).status).toBe("success");
  // Ann's child dies, and her session leaves the workspace, while Bob's call still runs; then his call ends.
  process.kill(annPid, "SIGKILL");
  expect(await waitUntil(() => workspaceSessionCount(folder) === 1, 30_000)).toBe(true);
  await writeFile(path.join(folder, "gate"), "");
  const message = await bobs.done;
  expect(message.status).toBe("success");
  expect((message.artifact as { workspace_changes?: string[] }).workspace_changes).toHaveLength(2);
  expect(String(message.content).split("\n")).toHaveLength(3);
  expectNoForm(JSON.stringify(message.artifact), SECRET);
  expectNoForm(String(message.content), SECRET);
});

test("a secret two sessions were sent stays shared after one of them leaves: a third user's call lists the other's file scrubbed", async () => {
  const SECRET = "both tok+3Vx=Nb8";
  const launch = stdioFixture({ name: "ws", toolNames: ["pid", "fs_ops", "await_file"] });
  const dataDir = await makeTempDir("mcp-ws-secrets-held-data-");
  const configPath = await writeConfig(await makeTempDir("mcp-ws-secrets-held-"), { mcpServers: { ws: { type: "stdio", ...launch } } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  toolkits.push(toolkit);
  const graph = toolNodeGraph(await toolkit.getTools());
  const run = (user: string, token: string) => ({ context: { user_id: user, secrets: { token } }, configurable: { thread_id: "held-t" } });
  const [ann, bob, cat] = [run("ann", SECRET), run("bob", SECRET), run("cat", "cat-tok-Hq5")];
  const folder = threadPaths(dataDir, "held-t").workspace;
  const annPid = Number((await callThroughGraph(graph, "ws_pid", {}, ann)).content);
  await callThroughGraph(graph, "ws_pid", {}, bob);
  await callThroughGraph(graph, "ws_pid", {}, cat);
  expect(workspaceSessionCount(folder)).toBe(3);
  // Ann's session leaves while no call runs: what she was sent goes, but Bob's session was sent it too.
  process.kill(annPid, "SIGKILL");
  expect(await waitUntil(() => workspaceSessionCount(folder) === 2, 30_000)).toBe(true);

  const cats = await runningCall(graph, "ws_await_file", { path: "gate" }, cat);
  const written = await callThroughGraph(graph, "ws_fs_ops", { ops: [{ op: "write", path: `${SECRET}.txt`, content: "x" }, { op: "write", path: "gate" }] }, bob);
  expect(written.status).toBe("success");
  const message = await cats.done;
  expect(message.status).toBe("success");
  expect((message.artifact as { workspace_changes?: string[] }).workspace_changes).toHaveLength(2);
  expect(String(message.content).split("\n")).toHaveLength(3);
  expectNoForm(JSON.stringify(message.artifact), SECRET);
  expectNoForm(String(message.content), SECRET);
});

test("a file one server's child named with that server's own secret is listed scrubbed by another server's call in the thread", async () => {
  const SECRET = "srv tok+4Hv=Qp2";
  const launch = (name: string) => stdioFixture({ name, toolNames: ["fs_ops", "await_file"] });
  const dataDir = await makeTempDir("mcp-ws-secrets-servers-data-");
  const configPath = await writeConfig(await makeTempDir("mcp-ws-secrets-servers-"), {
    mcpServers: {
      // The writer's launch holds the secret (a `$VAR` value): a secret of that server alone.
      writer: { type: "stdio", ...launch("writer"), env: { ...launch("writer").env, API_TOKEN: "$WRITER_TOKEN" } },
      reader: { type: "stdio", ...launch("reader") },
    },
  });
  const toolkit = createMcpToolkit({ configPath, env: { WRITER_TOKEN: SECRET }, logger: new RecordingLogger(), dataDir });
  toolkits.push(toolkit);
  const graph = toolNodeGraph(await toolkit.getTools());
  const run = { context: { user_id: "ann" }, configurable: { thread_id: "servers-t" } };

  const reading = await runningCall(graph, "reader_await_file", { path: "gate" }, run);
  const written = await callThroughGraph(graph, "writer_fs_ops", { ops: [{ op: "write", path: `${SECRET}.txt`, content: "x" }, { op: "write", path: "gate" }] }, run);
  expect(written.status).toBe("success");
  const message = await reading.done;
  expect(message.status).toBe("success");
  expect((message.artifact as { workspace_changes?: string[] }).workspace_changes).toHaveLength(2);
  expectNoForm(JSON.stringify(message.artifact), SECRET);
  expectNoForm(JSON.stringify(message.content), SECRET);
});

test("sessions of one workspace share what they were sent, one cached list, until none of them runs any more", async () => {
  const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
  const dataDir = await makeTempDir("mcp-ws-secrets-pool-");
  const pool = new SessionPool(new RecordingLogger(), { dataDir });
  pools.push(pool);
  const scoped = (user: string, thread: string) => ({ headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope(user, thread) });
  const folder = threadPaths(dataDir, "default").workspace;

  // The default user's session is the one `closeServer` closes (discovery's), alone.
  const first = await pool.acquire("local", server, scoped("default", "default"));
  const bob = await pool.acquire("local", server, scoped("bob", "default"));
  const other = await pool.acquire("local", server, scoped("bob", "elsewhere"));
  first.session.rememberSecrets(["first-secret-1"]);
  const list = bob.session.rememberSecrets([]);
  expect(list).toEqual(["first-secret-1"]);
  // Cached until it changes: the call path compares it by identity.
  expect(bob.session.rememberSecrets([])).toBe(list);
  expect(other.session.rememberSecrets([])).toEqual([]);
  bob.session.rememberSecrets(["bob-secret-2"]);
  expect(new Set(first.session.rememberSecrets([]))).toEqual(new Set(["first-secret-1", "bob-secret-2"]));

  // The first session is gone (its child and what it started ended) while Bob's call still runs: a file its child
  // wrote may still be listed by that call, so what it was sent stays until that call is over.
  first.release();
  await pool.closeServer("local");
  expect(alive(first.session.pid!)).toBe(false);
  expect(bob.session.rememberSecrets([])).toContain("first-secret-1");
  bob.release();
  const again = pool.tryAcquire("local", server, scoped("bob", "default"));
  expect(again?.session).toBe(bob.session);
  expect(again?.session.rememberSecrets([])).toEqual(["bob-secret-2"]);
  again?.release();
  expect(sharesWorkspaceSecrets(folder)).toBe(true);
  // No session of the workspace left: nothing of it is kept.
  other.release();
  await pool.close();
  expect(sharesWorkspaceSecrets(folder)).toBe(false);
});

test("a child's own server secrets (its launch env) are shared with its workspace from the start, before any call", async () => {
  const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
  const pool = new SessionPool(new RecordingLogger(), { dataDir: await makeTempDir("mcp-ws-secrets-own-"), secretsFor: (name) => (name === "writer" ? ["writer-own-3"] : []) });
  pools.push(pool);
  const scope = { headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("ann", "own-t") };
  const writer = await pool.acquire("writer", server, scope);
  const reader = await pool.acquire("reader", server, scope);
  expect(reader.session.rememberSecrets([])).toEqual(["writer-own-3"]);
  writer.release();
  reader.release();
});
