import { performance } from "node:perf_hooks";
import { AIMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod";
import { createMcpToolkit, silentLogger } from "../lib";
import { makeTempDir, writeConfig } from "../__tests__/fixtures/config";
import { stdioFixture } from "../__tests__/fixtures/stdio";
import { median } from "./stats";

async function time(label: string, fn: () => Promise<unknown>, n = 400) {
  for (let i = 0; i < 50; i++) await fn();
  const s: number[] = [];
  for (let i = 0; i < n; i++) { const t = performance.now(); await fn(); s.push(performance.now() - t); }
  console.log(label.padEnd(50), (median(s) * 1000).toFixed(1), "µs");
}
(async () => {
  const launch = stdioFixture({ name: "local", toolNames: ["echo"] });
  const dir = await makeTempDir("prof-");
  const configPath = await writeConfig(dir, { mcpServers: { local: { type: "stdio", ...launch } } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: silentLogger });
  const tools = await toolkit.getTools();
  const t = tools[0];
  const trivial = tool(async ({ text }) => text, { name: "triv", description: "", schema: z.object({ text: z.string() }) });
  const trivJson = tool(async ({ text }: { text: string }) => text, { name: "trivj", description: "", schema: t.schema as never });
  const node = new ToolNode([t, trivial, trivJson]);
  let n = 0;
  const msg = (name: string) => ({ messages: [new AIMessage({ content: "", tool_calls: [{ name, args: { text: "x" }, id: `c${n++}`, type: "tool_call" as const }] })] });
  await time("ToolNode trivial zod tool", () => node.invoke(msg("triv")));
  await time("ToolNode trivial json-schema tool", () => node.invoke(msg("trivj")));
  await time("ToolNode mcp tool", () => node.invoke(msg(t.name)));
  await time("tool.invoke(toolCall) mcp", () => t.invoke({ type: "tool_call", id: `d${n++}`, name: t.name, args: { text: "x" } }));
  await time("tool.func direct", () => (t as any).func({ text: "x" }, undefined, { toolCallId: "z" }));
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StdioClientTransport, getDefaultEnvironment } = await import("@modelcontextprotocol/sdk/client/stdio.js");
  const bare = new Client({ name: "b", version: "0" });
  await bare.connect(new StdioClientTransport({ ...launch, env: { ...getDefaultEnvironment(), ...launch.env }, stderr: "pipe" }));
  await time("bare callTool", () => bare.callTool({ name: "echo", arguments: { text: "x" } }));
  await time("tool.func direct", () => (t as any).func({ text: "x" }, undefined, { toolCallId: "z" }));
  await time("ToolNode mcp tool", () => node.invoke(msg(t.name)));
  await time("bare callTool", () => bare.callTool({ name: "echo", arguments: { text: "x" } }));
  await toolkit.close();
  process.exit(0);
})();
