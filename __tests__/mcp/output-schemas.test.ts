/**
 * A tool's declared output schema is checked against its results on every session alike. The SDK checks only on the
 * client that listed the tools (discovery's session), and only the last page's tools: the same result failed for a
 * server without per-user headers and passed for one with them. Real low-level MCP server (listing-server).
 */
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import type { ToolMessage } from "@langchain/core/messages";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { startListingServer, type ListingServer } from "../fixtures/listing-server";

const counted = { type: "object", properties: { n: { type: "number" } }, required: ["n"] };
const tool = (name: string, outputSchema?: Record<string, unknown>): Tool =>
  ({ name, inputSchema: { type: "object", properties: { n: {} } }, ...(outputSchema ? { outputSchema } : {}) }) as Tool;

let server: ListingServer;
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

beforeAll(async () => {
  // Two pages: the SDK kept the output schemas of the last page only.
  server = await startListingServer(
    (cursor) =>
      cursor === undefined
        ? { tools: [tool("counted", counted), tool("failing", counted)], nextCursor: "2" }
        : { tools: [tool("free"), tool("unreadable", { type: "object", properties: { n: { type: "no-such-type" } } })] },
    (name, args) => {
      if (name === "failing") return { isError: true, content: [{ type: "text", text: "the job failed" }] };
      const text = { type: "text" as const, text: `n=${JSON.stringify(args.n)}` };
      return args.n === undefined ? { content: [text] } : { content: [text], structuredContent: { n: args.n } };
    },
  );
  const configPath = await writeConfig(await makeTempDir("mcp-output-schemas-"), {
    mcpServers: {
      // Its calls share discovery's session; the other's each run on a session of their own header set.
      shared: { type: "http", url: server.url },
      keyed: { type: "http", url: server.url, headers_from_context: { headers: { "X-Key": "key" } } },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit?.close();
  await server?.close();
});

const call = (server: "shared" | "keyed", name: string, args: Record<string, unknown>) =>
  callThroughGraph(graph, `${server}_${name}`, args, { context: { secrets: { key: "k-1" } } });

describe("output schemas", () => {
  test.each(["shared", "keyed"] as const)("%s: every tool of every page is listed, the one whose schema does not compile too", async (name) => {
    const names = (await toolkit.getTools()).map((t) => t.name).filter((n) => n.startsWith(`${name}_`));
    expect(names.sort()).toEqual([`${name}_counted`, `${name}_failing`, `${name}_free`, `${name}_unreadable`]);
  });

  test.each(["shared", "keyed"] as const)("%s: a result the schema accepts passes, with its structuredContent as the artifact", async (name) => {
    const message = await call(name, "counted", { n: 3 });
    expect(message.status).toBe("success");
    expect(message.content).toBe("n=3");
    expect(message.artifact).toMatchObject({ structuredContent: { n: 3 } });
  });

  test.each(["shared", "keyed"] as const)("%s: a result without structuredContent fails with a clear line", async (name) => {
    const message = await call(name, "counted", {});
    expect(message.status).toBe("error");
    expect(message.content).toBe(
      `MCP tool 'counted' on server '${name}' failed: its result has no structuredContent, which its output schema requires`,
    );
  });

  test.each(["shared", "keyed"] as const)("%s: structuredContent that breaks the schema fails, naming where", async (name) => {
    const message = await call(name, "counted", { n: "three" });
    expect(message.status).toBe("error");
    expect(message.content).toBe(`MCP tool 'counted' on server '${name}' failed: its structuredContent does not match its output schema (data/n must be number)`);
  });

  test.each(["shared", "keyed"] as const)("%s: an error result is the server's text; no schema, or one that does not compile: not checked", async (name) => {
    const failing = await call(name, "failing", {});
    expect([failing.status, failing.content]).toEqual(["error", "the job failed"]);
    for (const free of ["free", "unreadable"]) {
      const message = await call(name, free, { n: "three" });
      expect([message.status, message.content]).toEqual(["success", 'n="three"']);
    }
  });
});

describe("whose schema a result is checked against", () => {
  const numbered = { type: "object", properties: { n: { type: "number" } }, required: ["n"] };
  const named = { type: "object", properties: { s: { type: "string" } }, required: ["s"] };
  const answering = (structuredContent: Record<string, unknown>) => ({
    content: [{ type: "text" as const, text: JSON.stringify(structuredContent) }],
    structuredContent,
  });
  const opened: { close(): Promise<void> }[] = [];
  afterAll(async () => {
    for (const o of opened.splice(0).reverse()) await o.close();
  });
  async function kitFor(mcpServers: Record<string, unknown>, interceptors: McpToolInterceptor[] = []): Promise<McpToolkit> {
    const kit = createMcpToolkit({ configPath: await writeConfig(await makeTempDir("mcp-output-"), { mcpServers }), env: {}, logger: new RecordingLogger(), interceptors });
    opened.push(kit);
    return kit;
  }
  async function serving(tools: () => Tool[], answer: (name: string) => ReturnType<typeof answering>): Promise<ListingServer> {
    const listing = await startListingServer(() => ({ tools: tools() }), (name) => answer(name));
    opened.push(listing);
    return listing;
  }

  test("its own: two servers' schemas under one $id, and a schema a reload changed under the same $id", async () => {
    const id = "https://example.test/schemas/result.json";
    const a = await serving(() => [tool("count", { $id: id, ...numbered })], () => answering({ n: 1 }));
    let schema: Record<string, unknown> = { $id: id, ...numbered };
    let result = answering({ n: 2 });
    const b = await serving(() => [tool("count", schema)], () => result);
    const kit = await kitFor({ a: { type: "http", url: a.url }, b: { type: "http", url: b.url } });
    const graph = toolNodeGraph(await kit.getTools());
    expect((await callThroughGraph(graph, "a_count", {})).status).toBe("success");
    expect((await callThroughGraph(graph, "b_count", {})).status).toBe("success");
    // b's tool now declares (and answers) a string field under the same $id.
    schema = { $id: id, ...named };
    result = answering({ s: "x" });
    await kit.reset();
    const message = await callThroughGraph(toolNodeGraph(await kit.getTools()), "b_count", {});
    expect([message.status, message.content]).toEqual(["success", '{"s":"x"}']);
  });

  test("its own: two tools of one server whose schemas share an $id", async () => {
    const id = "https://example.test/schemas/shared.json";
    const both = await serving(
      () => [tool("first", { $id: id, ...numbered }), tool("second", { $id: id, ...named })],
      (name) => (name === "first" ? answering({ n: 1 }) : answering({ s: "x" })),
    );
    const kit = await kitFor({ s: { type: "http", url: both.url } });
    const graph = toolNodeGraph(await kit.getTools());
    expect((await callThroughGraph(graph, "s_first", {})).status).toBe("success");
    expect((await callThroughGraph(graph, "s_second", {})).status).toBe("success");
  });

  test("the one the server declared, not the definition shown (scrubbed of a header value that is a word of it)", async () => {
    const job = await serving(() => [tool("job", { type: "object", properties: { status: { type: "string" } }, required: ["status"] })], () =>
      answering({ status: "done" }),
    );
    const kit = await kitFor({ s: { type: "http", url: job.url, headers: { "X-Region": "us" } } });
    const message = await callThroughGraph(toolNodeGraph(await kit.getTools()), "s_job", {});
    // The text shown is scrubbed as ever ("us" is a credential here); the check read the schema as declared.
    expect([message.status, message.content]).toEqual(["success", '{"stat[redacted]":"done"}']);
  });

  test("the first definition's, for a name listed twice (the first has none)", async () => {
    const twice = await serving(() => [tool("twice"), tool("twice", numbered)], () => ({ content: [{ type: "text", text: "plain" }] }) as never);
    const kit = await kitFor({ s: { type: "http", url: twice.url } });
    const tools = await kit.getTools();
    expect(tools.map((t) => t.name)).toEqual(["s_twice"]);
    const message = await callThroughGraph(toolNodeGraph(tools), "s_twice", {});
    expect([message.status, message.content]).toEqual(["success", "plain"]);
  });

  test("the new generation's, for a call the reload caught in its interceptors", async () => {
    let schema: Record<string, unknown> = numbered;
    let result = answering({ n: 1 });
    const changing = await serving(() => [tool("count", schema)], () => result);
    let entered!: () => void;
    let release!: () => void;
    const inInterceptor = new Promise<void>((resolve) => (entered = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    const kit = await kitFor({ s: { type: "http", url: changing.url } }, [
      async (request, next) => {
        entered();
        await gate;
        return next(request);
      },
    ]);
    const [count] = await kit.getTools();
    const call = count!.invoke({ type: "tool_call", id: "c1", name: count!.name, args: {} }) as Promise<ToolMessage>;
    await inInterceptor;
    schema = named;
    result = answering({ s: "x" });
    await kit.reset();
    await kit.getTools();
    release();
    const message = await call;
    expect([message.status, message.content]).toEqual(["success", '{"s":"x"}']);
  });
});

describe("a violation's text", () => {
  const anyNumbers = { type: "object", additionalProperties: { type: "number" } };

  test.each([
    ["a key quoting the server's header value across the text's bound", "sk-live-0123456789abcdefXYZ", (secret: string) => `${"k".repeat(228)}${secret}`],
    ["a key quoting a header value that holds '/' (a JSON pointer shows it as '~1')", "tok/abc+def/ghi0123456789", (secret: string) => secret],
  ])("shows no credential: %s", async (_label, secret, keyOf) => {
    const listing = await startListingServer(
      () => ({ tools: [tool("keyed", anyNumbers)] }),
      () => ({ content: [{ type: "text", text: "?" }], structuredContent: { [keyOf(secret)]: "not a number" } }),
    );
    const kit = createMcpToolkit({
      configPath: await writeConfig(await makeTempDir("mcp-output-secret-"), { mcpServers: { s: { type: "http", url: listing.url, headers: { "X-Api-Key": secret } } } }),
      env: {},
      logger: new RecordingLogger(),
    });
    try {
      const message = await callThroughGraph(toolNodeGraph(await kit.getTools()), "s_keyed", {});
      expect(message.status).toBe("error");
      const text = String(message.content);
      expect(text).toMatch(/^MCP tool 'keyed' on server 's' failed: its structuredContent does not match its output schema \(data\//);
      for (const part of [secret.slice(0, 8), secret.slice(-8), secret.replace(/\//g, "~1").slice(4, 14)]) expect(text).not.toContain(part);
    } finally {
      await kit.close();
      await listing.close();
    }
  });
});
