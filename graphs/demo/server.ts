/**
 * The demo MCP server behind `npm start` (stdio). Tools: echo, add (with structuredContent), time,
 * slow_count (progress notifications). Nothing here touches the network.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { serveStdio } from "./serve-stdio";
import { z } from "zod";

const SLOW_COUNT_MAX = 100;
const SLOW_COUNT_STEP_MS = 200;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });

export function createDemoServer(): McpServer {
  const server = new McpServer({ name: "demo", version: "0.1.0" });

  server.registerTool(
    "echo",
    { description: "Echo the given text back.", inputSchema: { text: z.string().describe("Text to echo") } },
    async ({ text }) => ({ content: [{ type: "text", text }] }),
  );

  server.registerTool(
    "add",
    {
      description: "Add two numbers.",
      inputSchema: { a: z.number(), b: z.number() },
      outputSchema: { sum: z.number() },
    },
    async ({ a, b }) => {
      const sum = a + b;
      return { content: [{ type: "text", text: String(sum) }], structuredContent: { sum } };
    },
  );

  server.registerTool("time", { description: "The server's current time (ISO 8601, UTC)." }, async () => ({
    content: [{ type: "text", text: new Date().toISOString() }],
  }));

  server.registerTool(
    "slow_count",
    {
      description: `Count to n (at most ${SLOW_COUNT_MAX}) slowly, reporting progress after each step.`,
      inputSchema: { n: z.number().int().min(0).max(SLOW_COUNT_MAX) },
    },
    async ({ n }, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (let i = 1; i <= n; i += 1) {
        await sleep(SLOW_COUNT_STEP_MS, extra.signal);
        if (progressToken !== undefined) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken, progress: i, total: n, message: `counted ${i} of ${n}` },
          });
        }
      }
      return { content: [{ type: "text", text: `counted to ${n}` }] };
    },
  );

  return server;
}

if (require.main === module) serveStdio(createDemoServer(), "demo MCP server");
