/**
 * Discovery against servers whose `tools/list` pages are scripted: long listings, cursors that never end, one name
 * listed twice, a property named `__proto__`. Real streamable HTTP servers; the toolkit as users build it.
 */
import { afterEach, expect, jest, test } from "@jest/globals";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, RecordingLogger } from "../../lib";
import { MAX_REFUSED_TOOL_WARNINGS, MAX_TOOL_LIST_PAGES } from "../../lib/mcp/discovery";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { startListingServer, type ListingServer, type ToolPage } from "../fixtures/listing-server";

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

const tool = (name: string, inputSchema: Tool["inputSchema"] = { type: "object" }): Tool => ({ name, description: name, inputSchema });

async function discover(page: (cursor: string | undefined) => ToolPage, sessionInitTimeout: number | null = 30) {
  const server: ListingServer = await startListingServer(page);
  open.push(server);
  const configPath = await writeConfig(await makeTempDir("mcp-listing-"), {
    mcpServers: { s: { type: "http", url: server.url, session_init_timeout: sessionInitTimeout } },
  });
  const logger = new RecordingLogger();
  const toolkit = createMcpToolkit({ configPath, env: {}, logger });
  open.push(toolkit);
  return { server, logger, tools: await toolkit.getTools() };
}

test("a listing of many pages is read whole, each page under a signal of its own (the SDK leaves a listener on each) and no SDK timeout", async () => {
  const signals: (AbortSignal | undefined)[] = [];
  const timeouts: (number | undefined)[] = [];
  const request = Client.prototype.request;
  const spy = jest.spyOn(Client.prototype, "request").mockImplementation(function (this: Client, message, schema, options) {
    if (message.method === "tools/list") {
      signals.push(options?.signal);
      timeouts.push(options?.timeout);
    }
    return request.call(this, message, schema, options);
  } as typeof request);
  try {
    const { tools } = await discover((cursor) => {
      const n = cursor === undefined ? 0 : Number(cursor);
      return { tools: [tool(`t${n}`)], ...(n < 14 ? { nextCursor: String(n + 1) } : {}) };
    });
    expect(tools.map((t) => t.name)).toEqual(Array.from({ length: 15 }, (_, n) => `s_t${n}`));
    expect(signals).toHaveLength(15);
    expect(new Set(signals).size).toBe(15);
    expect(signals.every((signal) => signal !== undefined && !signal.aborted)).toBe(true);
    // The SDK's own 60 s request timeout never cuts a listing short: session_init_timeout (or none) bounds it.
    expect(new Set(timeouts)).toEqual(new Set([2 ** 31 - 1]));
  } finally {
    spy.mockRestore();
  }
});

test("a cursor the server sends twice ends the listing with a clear reason, also with no session_init_timeout", async () => {
  const { server, logger, tools } = await discover(() => ({ tools: [tool("echo")], nextCursor: "c1" }), null);
  expect(tools).toEqual([]);
  expect(server.listRequests()).toBe(2);
  expect(logger.messages("warn")).toEqual([
    "Skipping MCP server 's' after tool discovery failed: the server sent the same tools/list cursor twice (after 2 pages)",
  ]);
});

test(`a listing that never ends stops after ${MAX_TOOL_LIST_PAGES} pages`, async () => {
  const { server, logger, tools } = await discover((cursor) => ({ tools: [], nextCursor: String(Number(cursor ?? 0) + 1) }), null);
  expect(tools).toEqual([]);
  expect(server.listRequests()).toBe(MAX_TOOL_LIST_PAGES);
  expect(logger.messages("warn")).toEqual([
    `Skipping MCP server 's' after tool discovery failed: the server's tool list did not end within ${MAX_TOOL_LIST_PAGES} pages`,
  ]);
});

test("a name listed twice keeps its first definition, schema included", async () => {
  const { logger, tools } = await discover(() => ({
    tools: [tool("ok", { type: "object", properties: { a: { type: "number" } } }), tool("ok", { type: "object", properties: { a: { type: "string" } } })],
  }));
  expect(tools.map((t) => t.name)).toEqual(["s_ok"]);
  expect((tools[0]!.schema as { properties: Record<string, unknown> }).properties).toEqual({ a: { type: "number" } });
  expect(logger.messages("warn")).toEqual(["MCP server 's' lists tool 'ok' more than once; keeping the first"]);
});

test("a tool whose schema requires a __proto__ field (which the MCP client drops) is left out, named in a warning", async () => {
  const { logger, tools } = await discover(() => ({
    tools: [
      tool("odd", JSON.parse('{"type":"object","properties":{"__proto__":{"type":"string"},"b":{"type":"number"}},"required":["__proto__"]}')),
      tool("fine"),
    ],
  }));
  expect(tools.map((t) => t.name)).toEqual(["s_fine"]);
  expect(logger.messages("warn")).toEqual([
    "Dropping MCP tool 'odd' of server 's': its input schema requires a field named __proto__, which the MCP client drops from the schema, so no call could describe it",
  ]);
});

test("a malformed tool is refused alone, named in a warning; the server's other tools, on every page, are kept and callable", async () => {
  const malformed = (value: unknown) => value as Tool;
  const { server, logger, tools } = await discover((cursor) =>
    cursor === undefined
      ? {
          tools: [
            tool("first"),
            malformed({ name: "no_type", inputSchema: {} }),
            malformed({ description: "no name", inputSchema: { type: "object" } }),
            malformed({ name: "line\nbreak", inputSchema: { type: "string" } }),
          ],
          nextCursor: "2",
        }
      : { tools: [tool("second")] },
  );
  expect(tools.map((t) => t.name)).toEqual(["s_first", "s_second"]);
  // The malformed page is asked for twice (strict, then tool by tool); the well-formed one once.
  expect(server.listRequests()).toBe(3);
  expect(logger.messages("warn")).toEqual([
    "Skipping MCP tool 'no_type' of server 's': its definition is not a valid MCP tool (at 'inputSchema.type'); the server's other tools are kept",
    "Skipping the tool listed at position 3 of server 's': its definition is not a valid MCP tool (at 'name'); the server's other tools are kept",
    "Skipping MCP tool 'line\\nbreak' of server 's': its definition is not a valid MCP tool (at 'inputSchema.type'); the server's other tools are kept",
  ]);
  expect(JSON.parse(String(await tools[1]!.invoke({})))).toEqual({ tool: "second", args: {} });
});

test("a refused tool's name and field are scrubbed of the credentials discovery sent", async () => {
  const server = await startListingServer(() => ({
    tools: [tool("kept"), { name: "tok-5ecret-value", inputSchema: JSON.parse('{"type":"object","properties":{"tok-5ecret-value":3}}') } as Tool],
  }));
  open.push(server);
  const configPath = await writeConfig(await makeTempDir("mcp-listing-"), {
    mcpServers: { s: { type: "http", url: server.url, headers: { Authorization: "Bearer tok-5ecret-value" } } },
  });
  const logger = new RecordingLogger();
  const toolkit = createMcpToolkit({ configPath, env: {}, logger });
  open.push(toolkit);
  expect((await toolkit.getTools()).map((t) => t.name)).toEqual(["s_kept"]);
  expect(logger.messages("warn")).toEqual([
    "Skipping MCP tool '[redacted]' of server 's': its definition is not a valid MCP tool (at 'inputSchema.properties.[redacted]'); the server's other tools are kept",
  ]);
});

test("a page whose tool list itself is malformed still skips the server, with the reason", async () => {
  const { logger, tools } = await discover(() => ({ tools: "none" as unknown as Tool[] }));
  expect(tools).toEqual([]);
  expect(logger.messages("warn")).toHaveLength(1);
  expect(logger.messages("warn")[0]).toMatch(/^Skipping MCP server 's' after tool discovery failed: .*tools/s);
});

test("a server's error text in a discovery warning has its control characters escaped: it cannot forge or recolour a log line", async () => {
  const http = createServer((_req, res) => res.writeHead(500, { "content-type": "text/plain" }).end("boom\n[mcp-harness] Skipping MCP server 'other'\u001b[2J\u202e"));
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  open.push({ close: () => new Promise<void>((resolve) => http.close(() => resolve())) });
  const configPath = await writeConfig(await makeTempDir("mcp-listing-"), {
    mcpServers: { s: { type: "http", url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp` } },
  });
  const logger = new RecordingLogger();
  const toolkit = createMcpToolkit({ configPath, env: {}, logger });
  open.push(toolkit);
  expect(await toolkit.getTools()).toEqual([]);
  const [warning] = logger.messages("warn");
  expect(warning).toMatch(/^Skipping MCP server 's' after tool discovery failed: .*boom\\n\[mcp-harness\] Skipping MCP server 'other'\\x1b\[2J\\u202e/);
  expect(warning).not.toMatch(/[\n\u001b\u202e]/);
});

test(`refused tools are named one by one up to ${MAX_REFUSED_TOOL_WARNINGS}, the rest counted in one warning`, async () => {
  const bad = Array.from({ length: MAX_REFUSED_TOOL_WARNINGS + 5 }, (_, i) => ({ name: `bad${i}`, inputSchema: {} }) as Tool);
  const { logger, tools } = await discover(() => ({ tools: [...bad, tool("ok")] }));
  expect(tools.map((t) => t.name)).toEqual(["s_ok"]);
  const warnings = logger.messages("warn");
  expect(warnings).toHaveLength(MAX_REFUSED_TOOL_WARNINGS + 1);
  expect(warnings[MAX_REFUSED_TOOL_WARNINGS - 1]).toMatch(new RegExp(`^Skipping MCP tool 'bad${MAX_REFUSED_TOOL_WARNINGS - 1}' of server 's'`));
  expect(warnings.at(-1)).toBe("Skipping 5 more tools of server 's' whose definitions are not valid MCP tools");
});
