/**
 * What the model reads when a session cannot serve a call: one clean line (no line break, no stack, no local path),
 * for every way a session fails. Discovery already shows a server's error body escaped to one line; a call must too.
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { chmod, symlink, unlink, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startHttpFixture, type StreamableHttpFixture } from "../fixtures/http-server";
import { startProxy, type Proxy } from "../fixtures/proxy";

const SH_SERVER = path.join(__dirname, "..", "fixtures", "sh-server.sh");
const HTML_502 = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n";

let dir: string;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;
let http: StreamableHttpFixture;
let proxy: Proxy;

beforeAll(async () => {
  dir = await makeTempDir("mcp-failure-lines-");
  // A stdio server that starts normally in the default thread (discovery) and fails as the thread id says elsewhere.
  const script = path.join(dir, "server.sh");
  await writeFile(
    script,
    [
      "#!/bin/bash",
      `case "$PWD" in */threads/default/*) exec bash ${JSON.stringify(SH_SERVER)};; esac`,
      `case "$PWD" in`,
      "  */threads/exits/*) exit 3;;",
      "  */threads/garbage/*) read -r line; echo 'this is not JSON-RPC'; echo 'neither is this'; exit 0;;",
      "  */threads/silent/*) exec sleep 60;;",
      "esac",
      "",
    ].join("\n"),
  );
  await chmod(script, 0o755);
  const command = path.join(dir, "mcp-launcher");
  await symlink("/bin/bash", command);
  http = await startHttpFixture({ name: "remote", toolNames: ["echo", "rpc_error"] });
  proxy = await startProxy(http.url);
  const users = { alice: "alice-key-0001", bob: "bob-key-0002", carol: "carol-key-0003", dan: "dan-key-0004" };
  const configPath = await writeConfig(dir, {
    mcpServers: {
      local: { type: "stdio", command: "bash", args: [script], session_init_timeout: 1 },
      gone: { type: "stdio", command, args: [SH_SERVER] },
      remote: { type: "http", url: proxy.url("/mcp"), user_auth: { header: "X-User-Key", users } },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: path.join(dir, "data") });
  graph = toolNodeGraph(await toolkit.getTools());
  await unlink(command);
});
afterAll(async () => {
  await toolkit.close();
  await proxy.close();
  await http.close();
});

function expectOneCleanLine(text: unknown): void {
  expect(typeof text).toBe("string");
  expect(text).not.toMatch(/[\r\n\u2028\u2029]/);
  expect(text).not.toMatch(/\bat .*:\d+:\d+/);
  expect(text).not.toContain(dir);
}

describe("a session that cannot serve the call: the error ToolMessage is one clean line", () => {
  test("stdio: the command cannot be spawned", async () => {
    const message = await callThroughGraph(graph, "gone_pid", {}, { configurable: { thread_id: "spawn" } });
    expect(message.status).toBe("error");
    expectOneCleanLine(message.content);
  });

  test.each(["exits", "garbage", "silent"])("stdio: the child %s during initialize", async (thread) => {
    const message = await callThroughGraph(graph, "local_pid", {}, { configurable: { thread_id: thread } });
    expect(message.status).toBe("error");
    expectOneCleanLine(message.content);
  });

  test("HTTP: the server (a proxy in front of it) refuses a new session's initialize with an HTML error page", async () => {
    proxy.rule = (r) => (r.headers["x-user-key"] === "bob-key-0002" ? { status: 502, body: HTML_502, contentType: "text/html" } : undefined);
    const message = await callThroughGraph(graph, "remote_echo", { text: "x" }, { context: { user_id: "bob" } });
    proxy.rule = () => undefined;
    expect(message.status).toBe("error");
    expect(String(message.content)).toContain("502 Bad Gateway");
    expectOneCleanLine(message.content);
  });

  test("HTTP: the server answers the call on a live session with an HTML error page", async () => {
    expect((await callThroughGraph(graph, "remote_echo", { text: "warm" }, { context: { user_id: "carol" } })).status).toBe("success");
    proxy.rule = (r) => (r.rpcMethod === "tools/call" && r.headers["x-user-key"] === "carol-key-0003" ? { status: 502, body: HTML_502, contentType: "text/html" } : undefined);
    const message = await callThroughGraph(graph, "remote_echo", { text: "x" }, { context: { user_id: "carol" } });
    proxy.rule = () => undefined;
    expect(message.status).toBe("error");
    expectOneCleanLine(message.content);
  });

  test("HTTP: the server answers the call with a JSON-RPC error: its code and message once", async () => {
    const message = await callThroughGraph(graph, "remote_rpc_error", {}, { context: { user_id: "alice" } });
    expect([message.status, message.content]).toEqual(["error", "MCP tool 'rpc_error' on server 'remote' failed: MCP error -32042: sign in at the server first"]);
  });

  test("HTTP: the session expired", async () => {
    expect((await callThroughGraph(graph, "remote_echo", { text: "warm" }, { context: { user_id: "alice" } })).status).toBe("success");
    await http.forgetSessions();
    const message = await callThroughGraph(graph, "remote_echo", { text: "x" }, { context: { user_id: "alice" } });
    expect(message.status).toBe("error");
    expectOneCleanLine(message.content);
  });

  test("HTTP: nothing listens any more", async () => {
    await proxy.close();
    const message = await callThroughGraph(graph, "remote_echo", { text: "x" }, { context: { user_id: "dan" } });
    expect(message.status).toBe("error");
    // fetch's own message says only "fetch failed": its cause says why (refused, or a kept-alive connection found closed).
    expect(message.content).toMatch(/failed: fetch failed \((connect ECONNREFUSED 127\.0\.0\.1:\d+|other side closed)\)$/);
    expectOneCleanLine(message.content);
  });
});
