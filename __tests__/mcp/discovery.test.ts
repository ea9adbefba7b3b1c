import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import type { ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { createMcpToolkit, getMcpToolRecord, RecordingLogger, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { startHttpFixture, type HttpFixture } from "../fixtures/http-server";
import { startSseFixture } from "../fixtures/sse-server";
import { stdioFixture } from "../fixtures/stdio";

let http: HttpFixture;
let sse: HttpFixture;
const toolkits: McpToolkit[] = [];

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote" });
  sse = await startSseFixture({ name: "legacy" });
});
afterAll(async () => {
  await Promise.all([http.close(), sse.close()]);
});
afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((t) => t.close()));
});

async function toolkitFor(mcpServers: Record<string, object>, logger = new RecordingLogger()) {
  const dir = await makeTempDir("mcp-discovery-");
  const configPath = await writeConfig(dir, { mcpServers });
  const toolkit = createMcpToolkit({ configPath, logger, env: {} });
  toolkits.push(toolkit);
  return { toolkit, logger, dir };
}

function byName(tools: DynamicStructuredTool[], name: string): DynamicStructuredTool {
  const tool = tools.find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name} in ${tools.map((t) => t.name).join(", ")}`);
  return tool;
}

async function callText(tool: DynamicStructuredTool, args: Record<string, unknown>, id = "call-1"): Promise<ToolMessage> {
  return (await tool.invoke({ type: "tool_call", id, name: tool.name, args })) as ToolMessage;
}

describe("discovery over every transport", () => {
  test("stdio, streamable HTTP and SSE tools come out as <server>_<tool> and call their own server", async () => {
    const { toolkit } = await toolkitFor({
      local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo", "pid"] }) },
      remote: { type: "http", url: http.url },
      legacy: { transport: "sse", url: sse.url },
    });
    const tools = await toolkit.getTools();
    const names = tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(["local_echo", "local_pid", "remote_echo", "remote_add", "legacy_echo"]));
    expect(names).not.toContain("local_add");

    expect(getMcpToolRecord(byName(tools, "local_echo"))).toEqual({ server: "local", rawName: "echo", transport: "stdio" });
    expect(getMcpToolRecord(byName(tools, "remote_echo"))).toEqual({ server: "remote", rawName: "echo", transport: "http" });
    expect(getMcpToolRecord(byName(tools, "legacy_echo"))).toEqual({ server: "legacy", rawName: "echo", transport: "sse" });

    for (const name of ["local_echo", "remote_echo", "legacy_echo"]) {
      const message = await callText(byName(tools, name), { text: `hello via ${name}` });
      expect(message.content).toBe(`hello via ${name}`);
      expect(message.status).toBe("success");
      expect(message.tool_call_id).toBe("call-1");
      expect(message.name).toBe(name);
    }
  });

  test("tool_name_prefix: false exposes the raw names", async () => {
    const { toolkit } = await toolkitFor({
      remote: { type: "http", url: http.url, tool_name_prefix: false },
    });
    const names = (await toolkit.getTools()).map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(["echo", "add", "fail"]));
    expect(names.some((n) => n.startsWith("remote_"))).toBe(false);
  });

  test("servers `web` and `web_scraper` route by recorded source, not by name prefix", async () => {
    const web = await startHttpFixture({ name: "web", toolNames: [], extraTools: [{ name: "search" }, { name: "scraper_fetch" }] });
    const webScraper = await startHttpFixture({ name: "web_scraper", toolNames: [], extraTools: [{ name: "search" }, { name: "fetch" }] });
    try {
      const { toolkit, logger } = await toolkitFor({
        web: { type: "http", url: web.url },
        web_scraper: { type: "http", url: webScraper.url },
      });
      const tools = await toolkit.getTools();
      const names = tools.map((t) => t.name).sort();
      // `web_scraper_fetch` is produced by both servers and cannot be told apart: the later one is dropped.
      expect(names).toEqual(["web_scraper_fetch", "web_scraper_search", "web_search"]);
      expect(getMcpToolRecord(byName(tools, "web_scraper_search"))).toMatchObject({ server: "web_scraper", rawName: "search" });
      expect(getMcpToolRecord(byName(tools, "web_scraper_fetch"))).toMatchObject({ server: "web", rawName: "scraper_fetch" });
      expect((await callText(byName(tools, "web_scraper_search"), {})).content).toBe("search from web_scraper");
      expect((await callText(byName(tools, "web_search"), {})).content).toBe("search from web");
      expect((await callText(byName(tools, "web_scraper_fetch"), {})).content).toBe("scraper_fetch from web");
      const collision = logger.messages("warn").find((m) => m.includes("collides"));
      expect(collision).toContain("web_scraper");
      expect(collision).toContain("'web'");
    } finally {
      await Promise.all([web.close(), webScraper.close()]);
    }
  });

  test("two unprefixed servers with the same tool name both stay, told apart by their server prefix", async () => {
    const a = await startHttpFixture({ name: "alpha", toolNames: [], extraTools: [{ name: "ping" }] });
    const b = await startHttpFixture({ name: "beta", toolNames: [], extraTools: [{ name: "ping" }] });
    try {
      const { toolkit, logger } = await toolkitFor({
        alpha: { url: a.url, tool_name_prefix: false },
        beta: { url: b.url, tool_name_prefix: false },
      });
      const tools = await toolkit.getTools();
      expect(tools.map((t) => t.name).sort()).toEqual(["alpha_ping", "beta_ping"]);
      expect((await callText(byName(tools, "beta_ping"), {})).content).toBe("ping from beta");
      expect(logger.messages("warn").join("\n")).toContain("alpha, beta");
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("an invalid visible name is dropped with a warning and its siblings are kept", async () => {
    const odd = await startHttpFixture({
      name: "odd",
      toolNames: ["echo"],
      extraTools: [{ name: "bad name!" }, { name: "x".repeat(70) }],
    });
    try {
      const { toolkit, logger } = await toolkitFor({ odd: { type: "http", url: odd.url } });
      const names = (await toolkit.getTools()).map((t) => t.name);
      expect(names).toEqual(["odd_echo"]);
      const warnings = logger.messages("warn");
      expect(warnings.some((m) => m.includes("invalid name 'odd_bad name!'"))).toBe(true);
      expect(warnings.some((m) => m.includes("longer than 64"))).toBe(true);
    } finally {
      await odd.close();
    }
  });
});

describe("parallel discovery", () => {
  test("every server's initialize is sent before any server has answered one", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const servers = await Promise.all(
      ["first", "second", "third"].map((name) => startHttpFixture({ name, toolNames: ["echo"], initGate: gate })),
    );
    try {
      const { toolkit } = await toolkitFor(Object.fromEntries(servers.map((fx, i) => [["first", "second", "third"][i], { url: fx.url }])));
      const loading = toolkit.getTools();
      loading.catch(() => undefined); // observed below; a failed wait must not leave it unhandled
      // Each initialize is held unanswered until the gate opens, so a server-by-server loop never sends the second one.
      const initialize = (r: { rpcMethods?: string[] }) => r.rpcMethods?.includes("initialize") ?? false;
      await Promise.all(servers.map((fx) => fx.waitForRequest(initialize)));
      open();
      expect((await loading).map((t) => t.name).sort()).toEqual(["first_echo", "second_echo", "third_echo"]);
    } finally {
      open();
      await Promise.all(servers.map((fx) => fx.close()));
    }
  });
});

describe("session_init_timeout", () => {
  test("null applies no deadline: its server is answered after a 0.1 s bound on the same server has fired", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const slow = await startHttpFixture({ name: "slow", toolNames: ["echo"], initGate: gate });
    try {
      const logger = new RecordingLogger();
      // The initialize requests are held until the bounded server has been skipped for timing out.
      const warn = logger.warn.bind(logger);
      logger.warn = (message: string) => {
        warn(message);
        if (message.startsWith("Skipping MCP server 'bounded'")) open();
      };
      const { toolkit } = await toolkitFor(
        {
          bounded: { url: slow.url, session_init_timeout: 0.1 },
          unbounded: { url: slow.url, session_init_timeout: null },
        },
        logger,
      );
      expect((await toolkit.getTools()).map((t) => t.name)).toEqual(["unbounded_echo"]);
      expect(logger.messages("warn")).toEqual(["Skipping MCP server 'bounded' after tool discovery timed out (0.1s)"]);
      expect(slow.initializeCount()).toBe(2);
    } finally {
      open();
      await slow.close();
    }
  });
});

describe("failing servers drop only themselves", () => {
  test("a hanging and a crashing server: the others' tools arrive within the timeout, each failure is named", async () => {
    const hangingHttp = await startHttpFixture({ name: "stuck", hangOnInitialize: true });
    try {
      const timeout = 1.5;
      const { toolkit, logger } = await toolkitFor({
        good: { type: "http", url: http.url },
        local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["echo"] }) },
        hangs: { type: "stdio", ...stdioFixture({ mode: "hang" }), session_init_timeout: timeout },
        // A long bound: a crash must be reported as a failure even when a loaded machine starts node slowly.
        crashes: { type: "stdio", ...stdioFixture({ mode: "crash" }), session_init_timeout: 60 },
        stuck: { type: "http", url: hangingHttp.url, session_init_timeout: timeout },
        off: { enabled: false, command: "definitely-not-a-command" },
      });
      const tools = await toolkit.getTools();
      const servers = new Set(tools.map((t) => getMcpToolRecord(t)?.server));
      expect([...servers].sort()).toEqual(["good", "local"]);
      const warnings = logger.messages("warn");
      expect(warnings).toEqual(
        expect.arrayContaining([
          "Skipping MCP server 'hangs' after tool discovery timed out (1.5s)",
          "Skipping MCP server 'stuck' after tool discovery timed out (1.5s)",
          expect.stringMatching(/^Skipping MCP server 'crashes' after tool discovery failed: /),
        ]),
      );
      expect(warnings.some((w) => w.includes("'off'"))).toBe(false);
      expect([...toolkit.discoveryFailures.keys()].sort()).toEqual(["crashes", "hangs", "stuck"]);
    } finally {
      await hangingHttp.close();
    }
  });
});
