/**
 * Interceptors on the stdio call path, with real children and real graphs: what a request an interceptor passes on
 * may change, and what stays the call's own (its server's session in its scope).
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { createMcpToolkit, McpToolCallRequest, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { stdioFixture } from "../fixtures/stdio";

describe("an interceptor passing on a request that names another server", () => {
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  let rerouting = false;
  /** Set: the interceptor also adds a credential header, and answers itself when the call is refused. */
  let vault = false;
  const VAULT_TOKEN = "vlt-7Qz9-Kp2w";
  // Builds the request anew (the constructor is public), naming server "b" for a call of "a".
  const reroute: McpToolInterceptor = (request, next) => {
    if (request.serverName !== "a" || !rerouting) return next(request);
    const passed = next(
      new McpToolCallRequest({
        serverName: "b",
        toolName: request.toolName,
        args: {},
        headers: vault ? { ...request.headers, "X-Vault-Token": VAULT_TOKEN } : request.headers,
        runtime: request.runtime,
        meta: request.meta,
      }),
    );
    if (!vault) return passed;
    return Promise.resolve(passed).catch((error: Error) => ({ content: [{ type: "text" as const, text: `sent ${VAULT_TOKEN}: ${error.message}` }] }));
  };
  beforeAll(async () => {
    const configPath = await writeConfig(await makeTempDir("mcp-icpt-reroute-"), {
      mcpServers: {
        a: { type: "stdio", ...stdioFixture({ name: "a", toolNames: ["pid"], extraTools: ["hello"] }) },
        b: { type: "stdio", ...stdioFixture({ name: "b", toolNames: ["pid"], extraTools: ["hello"] }) },
      },
    });
    const dataDir = await makeTempDir("mcp-icpt-reroute-data-");
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, interceptors: [reroute] });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit.close();
  });

  test("the call is refused, and the other server's later calls in the thread still reach its own child", async () => {
    const run = { context: { user_id: "u" }, configurable: { thread_id: "reroute" } };
    rerouting = true;
    const rerouted = await callThroughGraph(graph, "a_hello", {}, run);
    rerouting = false;
    const later = await callThroughGraph(graph, "b_hello", {}, run);
    expect(later.content).toBe("hello from b");
    expect(rerouted.status).toBe("error");
    expect(rerouted.content).toBe("MCP tool 'hello' on server 'a' was not called: an interceptor passed on a request for another server");
    // a's own calls are unaffected.
    expect((await callThroughGraph(graph, "a_hello", {}, run)).content).toBe("hello from a");
  });

  test("an interceptor's own answer naming a header it passed on is scrubbed, though the request was refused before it was sent", async () => {
    const run = { context: { user_id: "u" }, configurable: { thread_id: "reroute-vault" } };
    rerouting = true;
    vault = true;
    const answered = await callThroughGraph(graph, "a_hello", {}, run).finally(() => {
      rerouting = false;
      vault = false;
    });
    expect(String(answered.content)).toMatch(/^sent \[redacted\]: /);
    expect(JSON.stringify(answered)).not.toContain(VAULT_TOKEN);
  });
});

describe("an interceptor setting a header whose value is not a string (a JavaScript interceptor's numeric user id)", () => {
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  const numericHeader: McpToolInterceptor = (request, next) =>
    next(request.override({ headers: { ...request.headers, "X-User-Id": 4711 as unknown as string } }));
  beforeAll(async () => {
    const configPath = await writeConfig(await makeTempDir("mcp-icpt-numeric-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo"] }) } },
    });
    const dataDir = await makeTempDir("mcp-icpt-numeric-data-");
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, interceptors: [numericHeader] });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit.close();
  });

  test("the call is refused with the validation error naming the header and the layer, not a TypeError", async () => {
    const message = await callThroughGraph(graph, "local_echo", { text: "hi" }, { context: { user_id: "u" }, configurable: { thread_id: "numeric" } });
    expect({ status: message.status, content: message.content }).toEqual({
      status: "error",
      content: "MCP server 'local': header 'X-User-Id' from an interceptor is not a string; the value is not shown",
    });
  });
});

describe("an interceptor that annotates the error of its call before rethrowing it", () => {
  const SECRET = "k3y/Sec+ret";
  let toolkit: McpToolkit;
  let graph: ToolNodeGraph;
  // Sends a key (as `_meta.headers` on stdio); on failure, adds to the error what it sent, as `err.message += …` does.
  const annotate: McpToolInterceptor = async (request, next) => {
    const sent = request.override({ headers: { ...request.headers, "X-Api-Key": SECRET } });
    try {
      return await next(sent);
    } catch (err) {
      (err as Error).message = `${(err as Error).message} (sent with ${JSON.stringify(sent.headers)})`;
      throw err;
    }
  };
  beforeAll(async () => {
    const configPath = await writeConfig(await makeTempDir("mcp-icpt-annotate-"), {
      mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["slow"] }), tool_call_timeout: 0.2 } },
    });
    const dataDir = await makeTempDir("mcp-icpt-annotate-data-");
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, interceptors: [annotate] });
    graph = toolNodeGraph(await toolkit.getTools());
  });
  afterAll(async () => {
    await toolkit.close();
  });

  test("the harness's own error text, changed by the interceptor, is scrubbed like any other", async () => {
    const message = await callThroughGraph(graph, "local_slow", { ms: 60_000 }, { context: { user_id: "u" }, configurable: { thread_id: "annotate" } });
    expect(message.status).toBe("error");
    const content = String(message.content);
    expect(content).toContain("timed out after 0.2s without a result or progress (tool_call_timeout) (sent with");
    for (const form of [SECRET, JSON.stringify(SECRET).slice(1, -1), encodeURIComponent(SECRET), Buffer.from(SECRET).toString("base64")]) {
      expect(content).not.toContain(form);
    }
    expect(content).toContain("[redacted]");
  });
});
