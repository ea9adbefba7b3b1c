/**
 * Several sessions of one thread workspace leave while one long call runs there, with short calls of other users
 * starting and ending in between: the long call still lists every file the departed children named with their secrets,
 * scrubbed (real stdio children, real files).
 */
import { writeFile } from "node:fs/promises";
import * as path from "node:path";
import { afterEach, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { threadPaths } from "../../lib/sessions/workspace";
import { workspaceSessionCount } from "../../lib/sessions/workspace-secrets";
import { callThroughGraph, runningCall, toolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { waitUntil } from "../fixtures/processes";
import { stdioFixture } from "../fixtures/stdio";
import { echoForms } from "../fixtures/tools";

const toolkits: McpToolkit[] = [];
afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((t) => t.close()));
});

test("sessions leaving one by one during a long call, short calls between: the long call's listing is scrubbed of all", async () => {
  const launch = stdioFixture({ name: "ws", toolNames: ["pid", "fs_ops", "await_file"] });
  const dataDir = await makeTempDir("mcp-ws-epochs-data-");
  const configPath = await writeConfig(await makeTempDir("mcp-ws-epochs-"), { mcpServers: { ws: { type: "stdio", ...launch } } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir });
  toolkits.push(toolkit);
  const graph = toolNodeGraph(await toolkit.getTools());
  const as = (user: string, token: string) => ({ context: { user_id: user, secrets: { token } }, configurable: { thread_id: "epochs-t" } });
  const secrets = { ann: "ann tok+1Qa=Zx9", cat: "cat tok+2Wb=Yv8" };
  const folder = threadPaths(dataDir, "epochs-t").workspace;
  const bob = as("bob", "bob-tok-Lk2");
  const dan = as("dan", "dan-tok-Mn3");
  await callThroughGraph(graph, "ws_pid", {}, bob);
  await callThroughGraph(graph, "ws_pid", {}, dan);

  const bobs = await runningCall(graph, "ws_await_file", { path: "gate" }, bob);
  for (const [user, secret] of Object.entries(secrets)) {
    const run = as(user, secret);
    const pid = Number((await callThroughGraph(graph, "ws_pid", {}, run)).content);
    expect((await callThroughGraph(graph, "ws_fs_ops", { ops: [{ op: "write", path: `${secret}.txt`, content: "x" }] }, run)).status).toBe("success");
    const members = workspaceSessionCount(folder);
    process.kill(pid, "SIGKILL");
    expect(await waitUntil(() => workspaceSessionCount(folder) === members - 1, 30_000)).toBe(true);
    // A call that started after that departure, and ends while Bob's still runs.
    const short = await callThroughGraph(graph, "ws_fs_ops", { ops: [{ op: "write", path: `after-${user}.txt`, content: "y" }] }, dan);
    expect(short.status).toBe("success");
  }
  await writeFile(path.join(folder, "gate"), "");
  const message = await bobs.done;
  expect(message.status).toBe("success");
  expect((message.artifact as { workspace_changes?: string[] }).workspace_changes).toHaveLength(5);
  const seen = `${String(message.content)}\n${JSON.stringify(message.artifact)}`;
  expect(String(message.content).split("\n")).toHaveLength(6);
  for (const secret of Object.values(secrets)) for (const form of echoForms(secret)) expect(seen).not.toContain(form);
}, 60_000);
