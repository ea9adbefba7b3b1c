/**
 * The demo's long-job MCP server behind `npm start` (stdio), in the "ordinary tools" task shape: `start_countdown`
 * answers at once with a job id, `countdown_status` and `countdown_cancel` follow it. With the demo config these
 * become one background task tool: the agent gets a local task id, the worker polls, and the result comes back
 * into the thread as a notification run.
 *
 * A job's id carries its start time and length, so any child of this server can answer for it (the harness polls
 * from the task's own session, which may be a new child after an idle eviction). Cancellations are remembered by
 * the child that received them.
 */
import { randomBytes } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { serveStdio } from "./serve-stdio";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

export const COUNTDOWN_MAX_SECONDS = 600;
const JOB_ID = /^countdown-(\d{1,15})-(\d{1,4})-[0-9a-f]{8}$/;

interface Countdown {
  startedAt: number;
  seconds: number;
}

function parseJobId(id: string): Countdown | undefined {
  const match = JOB_ID.exec(id);
  if (!match) return undefined;
  const seconds = Number(match[2]);
  return seconds <= COUNTDOWN_MAX_SECONDS ? { startedAt: Number(match[1]), seconds } : undefined;
}

function structured(content: Record<string, unknown>): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(content) }], structuredContent: content };
}

export function createJobsServer(now: () => number = Date.now): McpServer {
  const server = new McpServer({ name: "jobs", version: "0.1.0" });
  const cancelled = new Set<string>();

  server.registerTool(
    "start_countdown",
    {
      description: `Start a countdown of the given seconds (1-${COUNTDOWN_MAX_SECONDS}) that runs in the background; it finishes with a short report.`,
      inputSchema: { seconds: z.number().int().min(1).max(COUNTDOWN_MAX_SECONDS) },
    },
    async ({ seconds }) => structured({ task_id: `countdown-${now()}-${seconds}-${randomBytes(4).toString("hex")}`, status: "running" }),
  );

  server.registerTool(
    "countdown_status",
    { description: "Status of a countdown started with start_countdown.", inputSchema: { task_id: z.string() } },
    async ({ task_id }) => {
      const job = parseJobId(task_id);
      if (!job) return structured({ task_id, status: "failed", error_code: "task_not_found", error: "no such countdown" });
      if (cancelled.has(task_id)) return structured({ task_id, status: "cancelled" });
      const left = job.startedAt + job.seconds * 1000 - now();
      if (left > 0) return structured({ task_id, status: "running", poll_after_seconds: Math.max(1, Math.ceil(left / 1000)) });
      return structured({ task_id, status: "completed", result: { counted_seconds: job.seconds, finished_at: new Date(job.startedAt + job.seconds * 1000).toISOString() } });
    },
  );

  server.registerTool(
    "countdown_cancel",
    { description: "Cancel a countdown started with start_countdown.", inputSchema: { task_id: z.string() } },
    async ({ task_id }) => {
      const job = parseJobId(task_id);
      if (job && job.startedAt + job.seconds * 1000 <= now() && !cancelled.has(task_id)) return structured({ task_id, status: "completed" });
      cancelled.add(task_id);
      return structured({ task_id, status: "cancelled" });
    },
  );

  return server;
}

if (require.main === module) serveStdio(createJobsServer(), "demo jobs MCP server");
