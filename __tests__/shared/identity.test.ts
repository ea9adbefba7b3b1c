import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { rawHeaderValues, type HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";

let http: HttpFixture;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["whoami"] });
  const dir = await makeTempDir("mcp-identity-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      remote: {
        type: "http",
        url: http.url,
        user_auth: { header: "X-User-Token", users: { "server-user": "tok-server", "auth-user": "tok-auth", "ctx-user": "tok-ctx" } },
      },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit.close();
  await http.close();
});

/** The X-User-Token the server received for one whoami call made with these run options (its echo is scrubbed). */
async function tokenSent(options: Record<string, unknown>): Promise<string | undefined> {
  const message = await callThroughGraph(graph, "remote_whoami", {}, options);
  expect(message.status).toBe("success");
  const calls = http.requests.filter((r) => r.rpcMethods?.includes("tools/call"));
  return rawHeaderValues(calls[calls.length - 1], "x-user-token")[0];
}

// LangGraph builds `runtime.serverInfo.user` from `configurable.langgraph_auth_user` (the object its API server
// stamps for an authenticated request, with `identity`); `langgraph_auth_user_id` is stamped next to it.
const serverUser = { langgraph_auth_user: { identity: "server-user", is_authenticated: true, permissions: [] } };

describe("the run's user id: server auth user → configurable.langgraph_auth_user_id → context.user_id", () => {
  test("context.user_id alone picks the user", async () => {
    expect(await tokenSent({ context: { user_id: "ctx-user" } })).toBe("tok-ctx");
  });

  test("configurable.langgraph_auth_user_id beats a caller-supplied context.user_id", async () => {
    expect(await tokenSent({ context: { user_id: "ctx-user" }, configurable: { langgraph_auth_user_id: "auth-user" } })).toBe("tok-auth");
  });

  test("the server's authenticated user (runtime.serverInfo.user.identity) beats both", async () => {
    const options = { context: { user_id: "ctx-user" }, configurable: { langgraph_auth_user_id: "auth-user", ...serverUser } };
    expect(await tokenSent(options)).toBe("tok-server");
    expect(await tokenSent({ context: { user_id: "ctx-user" }, configurable: serverUser })).toBe("tok-server");
  });
});

describe("the first user field that is set decides", () => {
  test("a configurable.langgraph_auth_user_id set to something no id is made of is not stood in for by context.user_id", async () => {
    const message = await callThroughGraph(graph, "remote_whoami", {}, {
      context: { user_id: "ctx-user" },
      configurable: { langgraph_auth_user_id: { id: "auth-user" } },
    });
    expect(message.status).toBe("error");
    expect(message.content).toBe(
      "MCP server 'remote' needs a per-user credential (user_auth, header 'X-User-Token'), but the run's " +
        "configurable.langgraph_auth_user_id is neither a string nor a number, so it names no user or thread",
    );
  });
});

describe("an authenticated request whose server user has an empty identity (an auth handler admitting anonymous callers)", () => {
  // LangGraph's API server stamps `langgraph_auth_user` and `langgraph_auth_user_id` from whatever identity its auth
  // handler returned, "" included (`authenticate()` accepts any string): the server has named the user, so a
  // caller-supplied context.user_id must not pick another user's credential.
  const anonymous = { langgraph_auth_user: { identity: "", is_authenticated: false, permissions: [] }, langgraph_auth_user_id: "" };

  test("context.user_id does not stand in for it: user_auth denies instead of sending another user's credential", async () => {
    const before = http.requests.length;
    const message = await callThroughGraph(graph, "remote_whoami", {}, { context: { user_id: "server-user" }, configurable: anonymous });
    expect(message.status).toBe("error");
    expect(String(message.content)).toMatch(/^MCP server 'remote' needs a per-user credential \(user_auth, header 'X-User-Token'\)/);
    const calls = http.requests.slice(before).filter((r) => r.rpcMethods?.includes("tools/call"));
    expect(calls.flatMap((c) => rawHeaderValues(c, "x-user-token"))).not.toContain("tok-server");
  });

  test("without auth (LangGraph's Python server stamps no user and langgraph_auth_user_id \"\"), context.user_id still picks the user", async () => {
    const noAuth = { langgraph_auth_user: null, langgraph_auth_user_id: "" };
    expect(await tokenSent({ context: { user_id: "ctx-user" }, configurable: noAuth })).toBe("tok-ctx");
  });
});
