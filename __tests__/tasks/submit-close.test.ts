/**
 * toolkit.close() while a durable task's submit call runs on the server: the submit tool ends as any tool of a closed
 * toolkit does (ToolkitClosedError), never with a text saying that nothing runs on the server. Real job server
 * (streamable HTTP in process) behind a pass-through proxy, real SQLite store, createAgent with the scripted model.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { z } from "zod";
import { createMcpToolkit, RecordingLogger } from "../../lib";
import { ScriptedChatModel } from "../../lib/agent";
import { createTaskRuntime } from "../../lib/tasks";
import { JOB_TOOLSET, makeTempDir, startHttpFixture, TaskBoard, writeConfig } from "../fixtures";
import type { StreamableHttpFixture } from "../fixtures/http-server";

let board: TaskBoard;
let http: StreamableHttpFixture;

/**
 * A pass-through HTTP proxy in front of the real job server: the answer to a `start_job` call is held back (the
 * network is slow) and `onHeld` runs once the server has answered it. Every other request passes as it is.
 */
async function slowSubmitProxy(upstream: string, onHeld: () => void): Promise<{ url: string; close(): Promise<void> }> {
  const target = new URL(upstream);
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const up = httpRequest(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, host: target.host } },
        (upRes) => {
          const held = body.toString().includes('"start_job"');
          if (!held) {
            res.writeHead(upRes.statusCode ?? 502, upRes.headers);
            upRes.pipe(res);
            return;
          }
          const answer: Buffer[] = [];
          upRes.on("data", (c: Buffer) => answer.push(c));
          upRes.on("end", () => onHeld()); // the answer never reaches the client
        },
      );
      up.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${target.pathname}`,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

beforeAll(async () => {
  board = new TaskBoard();
  http = await startHttpFixture({ name: "jobs", toolNames: ["echo"], taskBoard: board });
});
afterAll(async () => {
  await http.close();
});

test("close() while the submit runs on the server: the call ends with ToolkitClosedError, not 'nothing is running on the server'", async () => {
  const dir = await makeTempDir("review-submit-close-");
  let closeToolkit = () => undefined as void;
  const proxy = await slowSubmitProxy(http.url, () => closeToolkit());
  const configPath = await writeConfig(dir, {
    mcpTasks: { enabled: true, poll_interval_seconds: 5 },
    mcpServers: { jobs: { type: "http", url: proxy.url, task_toolsets: [{ name: "build", ...JOB_TOOLSET }] } },
  });
  const logger = new RecordingLogger();
  const runtime = await createTaskRuntime({ configPath, databaseUrl: `sqlite:${path.join(dir, "tasks.sqlite")}`, logger });
  const toolkit = createMcpToolkit({ configPath, logger, dataDir: dir, taskRuntime: runtime });
  try {
    const tools = await toolkit.getTools();
    // The job has started on the server; its answer is not written yet when the toolkit closes.
    closeToolkit = () => void toolkit.close();
    const model = new ScriptedChatModel([ScriptedChatModel.toolCall("jobs_start_job", { label: "c", remote_id: "closed-1" }, "submit-1"), { content: "done" }]);
    const agent = createAgent({ model, tools, contextSchema: z.object({ user_id: z.string() }), checkpointer: new MemorySaver() });
    let outcome: string;
    try {
      const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { context: { user_id: "ann" }, configurable: { thread_id: "th-c" } });
      const message = result.messages.find((m): m is ToolMessage => ToolMessage.isInstance(m))!;
      outcome = `${message.status}: ${String(message.content)}`;
    } catch (err) {
      outcome = `threw ${(err as Error).name}`;
    }
    // The job started on the server; nothing stored it.
    expect(board.jobs.get("closed-1")?.state).toBe("running");
    expect(await runtime.service.listTasks("th-c", "ann")).toEqual([]);
    expect(outcome).not.toContain("nothing is running on the server");
    expect(outcome).toMatch(/ToolkitClosedError|McpToolkit is closed/);
  } finally {
    await toolkit.close();
    await runtime.stop();
    await proxy.close();
  }
});
