/**
 * `npm run bench`: the performance figures, each as a ratio against a baseline measured in the same run.
 * Real fixture servers (stdio child process, streamable HTTP on 127.0.0.1:0), real ToolNode.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import * as path from "node:path";
import { createInterface } from "node:readline";
import { open, readFile, stat } from "node:fs/promises";
import { performance } from "node:perf_hooks";
import { AIMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createMcpToolkit, silentLogger } from "./built";
import { makeTempDir, writeConfig } from "../__tests__/fixtures/config";
import { startHttpFixture } from "../__tests__/fixtures/http-server";
import { stdioFixture, TSX_CJS_REGISTER } from "../__tests__/fixtures/stdio";
import { startTokenFixture } from "../__tests__/fixtures/token-server";
import { taskStoreFigures } from "./tasks";
import { redactionFigures } from "./redaction";
import { sessionFigures } from "./sessions";
import { gatewayFigures } from "./gateway";
import { taskRuntimeFigures } from "./task-runtime";
import { taskWorkerFigures } from "./task-worker";
import { fmtMs, interleaved, median, printTable, roundRobin, type Row } from "./stats";

const CALLS = Number(process.env.BENCH_CALLS ?? 400);

async function toolCallOverhead(rows: Row[]): Promise<void> {
  const http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
  const launch = stdioFixture({ name: "local", toolNames: ["echo"] });
  const dir = await makeTempDir("bench-call-");
  const configPath = await writeConfig(dir, {
    mcpServers: { local: { type: "stdio", ...launch }, remote: { type: "http", url: http.url } },
  });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: silentLogger });
  const tools = await toolkit.getTools();
  const node = new ToolNode(tools);

  const bare = new Client({ name: "bench", version: "0" });
  const bareHttp = new Client({ name: "bench", version: "0" });
  await bare.connect(new StdioClientTransport({ ...launch, env: { ...getDefaultEnvironment(), ...launch.env }, stderr: "pipe" }));
  await bareHttp.connect(new StreamableHTTPClientTransport(new URL(http.url)));

  let n = 0;
  const viaToolNode = (name: string) => () =>
    node.invoke({
      messages: [new AIMessage({ content: "", tool_calls: [{ name, args: { text: "x" }, id: `c${n++}`, type: "tool_call" }] })],
    });
  const runtime = { toolCallId: "bench", context: {}, state: {}, store: null, writer: null };
  for (const [label, toolName, client] of [
    ["stdio", "local_echo", bare],
    ["streamable HTTP", "remote_echo", bareHttp],
  ] as const) {
    const bareCall = () => client.callTool({ name: "echo", arguments: { text: "x" } });
    const harnessTool = tools.find((t) => t.name === toolName)!;
    // The best any LangChain tool can do: a plain tool() whose body is the bare call, in the same ToolNode.
    const plain = tool(
      async () => {
        const result = await bareCall();
        return (result.content as { text: string }[])[0].text;
      },
      { name: `plain_${toolName}`, description: "bare client.callTool in a plain tool", schema: harnessTool.schema as never },
    );
    const plainNode = new ToolNode([plain]);
    const viaPlainNode = () =>
      plainNode.invoke({
        messages: [new AIMessage({ content: "", tool_calls: [{ name: plain.name, args: { text: "x" }, id: `p${n++}`, type: "tool_call" }] })],
      });
    const viaHarness = () => harnessTool.func({ text: "x" }, undefined, runtime as never) as Promise<unknown>;
    const [ours, base, floor, pathOnly] = (await roundRobin([viaToolNode(toolName), bareCall, viaPlainNode, viaHarness], CALLS)).map(median);
    rows.push(
      {
        figure: `tool call via ToolNode / bare client.callTool (${label}, median of ${CALLS})`,
        ours: fmtMs(ours),
        baseline: fmtMs(base),
        ratio: ours / base,
        target: "<= 1.15",
      },
      {
        figure: `  framework floor: plain tool() around bare callTool via ToolNode / bare (${label})`,
        ours: fmtMs(floor),
        baseline: fmtMs(base),
        ratio: floor / base,
        target: "(context)",
      },
      {
        figure: `  our tool via ToolNode / plain tool() around bare callTool via ToolNode (${label})`,
        ours: fmtMs(ours),
        baseline: fmtMs(floor),
        ratio: ours / floor,
        target: "<= 1.15",
      },
      {
        figure: `  harness call path alone (tool func) / bare client.callTool (${label})`,
        ours: fmtMs(pathOnly),
        baseline: fmtMs(base),
        ratio: pathOnly / base,
        target: "<= 1.15",
      },
    );
  }
  await Promise.all([bare.close(), bareHttp.close(), toolkit.close()]);
  await http.close();
}

/**
 * The four credential layers on the call path (static, cached OAuth token, user map, context secret) against
 * a bare SDK client whose transport was built with the same final headers.
 */
async function credentialOverhead(rows: Row[]): Promise<void> {
  const [http, tokens] = await Promise.all([startHttpFixture({ name: "remote", toolNames: ["echo"] }), startTokenFixture()]);
  const dir = await makeTempDir("bench-credentials-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      layered: {
        type: "http",
        url: http.url,
        headers: { "X-Static": "static-1" },
        oauth: { token_url: tokens.url, client_id: "bench", client_secret: "bench-secret" },
        user_auth: { header: "X-User-Token", users: { alice: "alice-token-1" } },
        headers_from_context: { headers: { "X-Api-Key": "api_key" } },
      },
      plain: { type: "http", url: http.url, headers: { "X-Static": "static-1" } },
    },
  });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: silentLogger });
  const tools = await toolkit.getTools();
  const context = { user_id: "alice", secrets: { api_key: "api-key-1" } };
  const runtime = { toolCallId: "bench", context, state: {}, store: null, writer: null };
  const call = (name: string) => {
    const harnessTool = tools.find((t) => t.name === name)!;
    return () => harnessTool.func({ text: "x" }, undefined, runtime as never) as Promise<unknown>;
  };
  const headers = {
    "X-Static": "static-1",
    Authorization: "Bearer access-1",
    "X-User-Token": "alice-token-1",
    "X-Api-Key": "api-key-1",
  };
  const bare = new Client({ name: "bench", version: "0" });
  await bare.connect(new StreamableHTTPClientTransport(new URL(http.url), { requestInit: { headers } }));
  const bareCall = () => bare.callTool({ name: "echo", arguments: { text: "x" } });
  const [layered, plain, base] = (await roundRobin([call("layered_echo"), call("plain_echo"), bareCall], CALLS)).map(median);
  if (tokens.requests.length !== 1) throw new Error(`expected one token request, saw ${tokens.requests.length}`);
  rows.push(
    {
      figure: `call path with all four credential layers / bare callTool with the same headers (HTTP, median of ${CALLS})`,
      ours: fmtMs(layered),
      baseline: fmtMs(base),
      ratio: layered / base,
      target: "<= 1.15",
    },
    {
      figure: "  call path with all four credential layers / call path with static headers only (HTTP)",
      ours: fmtMs(layered),
      baseline: fmtMs(plain),
      ratio: layered / plain,
      target: "(context)",
    },
  );
  await Promise.all([bare.close(), toolkit.close()]);
  await Promise.all([http.close(), tokens.close()]);
}

/** The fixture servers run in a child process of their own, so they do not share the client's event loop. */
async function startFleet(count: number, initDelayMs: number): Promise<{ urls: string[]; stop(): void }> {
  const child = spawn(process.execPath, ["--require", TSX_CJS_REGISTER, path.join(__dirname, "fleet.ts"), String(count), String(initDelayMs)], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const [line] = (await once(createInterface({ input: child.stdout! }), "line")) as [string];
  return { urls: JSON.parse(line) as string[], stop: () => child.stdin!.end() };
}

async function parallelDiscovery(rows: Row[]): Promise<void> {
  const fleet = await startFleet(20, 200);
  const dir = await makeTempDir("bench-discovery-");
  const one = await writeConfig(dir, { mcpServers: { s0: { url: fleet.urls[0] } } }, "one.json");
  const all = await writeConfig(
    dir,
    { mcpServers: Object.fromEntries(fleet.urls.map((url, i) => [`s${i}`, { url }])) },
    "all.json",
  );
  const time = async (configPath: string) => {
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: silentLogger });
    const t = performance.now();
    const tools = await toolkit.getTools();
    const elapsed = performance.now() - t;
    await toolkit.close();
    return { elapsed, count: tools.length };
  };
  const singles: number[] = [];
  const wholes: number[] = [];
  let count = 0;
  await time(all);
  for (let i = 0; i < 7; i += 1) {
    singles.push((await time(one)).elapsed);
    const whole = await time(all);
    wholes.push(whole.elapsed);
    count = whole.count;
  }
  // Context: the same handshakes with bare SDK clients (connect + tools/list), no harness at all.
  const bareDiscovery = async (urls: string[]) => {
    const t = performance.now();
    const clients = await Promise.all(
      urls.map(async (url) => {
        const client = new Client({ name: "bench", version: "0" });
        await client.connect(new StreamableHTTPClientTransport(new URL(url)));
        await client.listTools();
        return client;
      }),
    );
    const elapsed = performance.now() - t;
    await Promise.all(clients.map((c) => c.close()));
    return elapsed;
  };
  const bareOne: number[] = [];
  const bareAll: number[] = [];
  for (let i = 0; i < 7; i += 1) {
    bareOne.push(await bareDiscovery(fleet.urls.slice(0, 1)));
    bareAll.push(await bareDiscovery(fleet.urls));
  }
  console.log(
    `bare SDK clients on the same servers: 20 in ${fmtMs(median(bareAll))}, one in ${fmtMs(median(bareOne))} ` +
      `(${(median(bareAll) / median(bareOne)).toFixed(3)}x)`,
  );
  fleet.stop();
  if (count !== 20) throw new Error(`expected 20 tools from 20 servers, got ${count}`);
  const ours = median(wholes);
  const base = median(singles);
  rows.push({
    figure: "discovery of 20 servers (200 ms init each) / one server (median of 7)",
    ours: fmtMs(ours),
    baseline: fmtMs(base),
    ratio: ours / base,
    target: "<= 1.5",
  });
}

async function hotPath(rows: Row[]): Promise<void> {
  const http = await startHttpFixture({ name: "hot", toolNames: ["echo"] });
  const dir = await makeTempDir("bench-hot-");
  const padding: Record<string, object> = {};
  const config = { mcpServers: { hot: { url: http.url } as object } };
  let i = 0;
  while (JSON.stringify({ ...config, mcpServers: { ...config.mcpServers, ...padding } }, null, 2).length < 64 * 1024) {
    padding[`disabled_${i}`] = { enabled: false, command: "npx", args: ["-y", `@example/server-${i}`], description: "padding ".repeat(8) };
    i += 1;
  }
  const configPath = await writeConfig(dir, { mcpServers: { ...config.mcpServers, ...padding } });
  const size = (await stat(configPath)).size;
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: silentLogger });
  await toolkit.getTools();
  const baseline = async () => {
    await stat(configPath);
    const bytes = await readFile(configPath);
    createHash("sha256").update(bytes).digest("hex");
  };
  // The same three operations on one file handle, as the signature helper does them.
  const baselineHandle = async () => {
    const fh = await open(configPath, "r");
    try {
      await fh.stat();
      createHash("sha256").update(await fh.readFile()).digest("hex");
    } finally {
      await fh.close();
    }
  };
  const samples = await interleaved(() => toolkit.getTools(), baseline, 2000, 200);
  const ours = median(samples.a);
  const base = median(samples.b);
  rows.push({
    figure: `getTools() hot path, unchanged ${(size / 1024).toFixed(0)} KiB config / stat+read+sha256 (median of 2000)`,
    ours: fmtMs(ours),
    baseline: fmtMs(base),
    ratio: ours / base,
    target: "<= 1.5",
  });
  const handle = await interleaved(() => toolkit.getTools(), baselineHandle, 2000, 200);
  rows.push({
    figure: "getTools() hot path / open+fstat+read+sha256 on one handle (median of 2000)",
    ours: fmtMs(median(handle.a)),
    baseline: fmtMs(median(handle.b)),
    ratio: median(handle.a) / median(handle.b),
    target: "<= 1.5",
  });
  await toolkit.close();
  await http.close();
}

async function main(): Promise<void> {
  const only = process.argv.slice(2);
  const rows: Row[] = [];
  const figures: Record<string, (rows: Row[]) => Promise<void>> = {
    call: toolCallOverhead,
    credentials: credentialOverhead,
    discovery: parallelDiscovery,
    hot: hotPath,
    tasks: taskStoreFigures,
    sessions: sessionFigures,
    gateway: gatewayFigures,
    "task-runtime": taskRuntimeFigures,
    "task-worker": taskWorkerFigures,
    redaction: redactionFigures,
  };
  for (const [name, run] of Object.entries(figures)) {
    if (only.length === 0 || only.includes(name)) await run(rows);
  }
  printTable(rows);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
