/**
 * A stdio child keeps what calls sent it: a later call in the same (user, thread) session, from a run that carries
 * none of those secrets, may answer with them. The session remembers every call's secrets and each later call's
 * answer is scrubbed of them too. Here a per-run header (added by an interceptor from the run's secrets) reaches
 * the child in `_meta.headers` at submit; the next call, from a run without secrets, asks for it back.
 */
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import type { ToolMessage } from "@langchain/core/messages";
import { createMcpToolkit, McpServerSchema, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { SESSION_SECRETS_LIMIT, SessionPool } from "../../lib/sessions/pool";
import { sessionScope } from "../../lib/sessions/scope";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { alive, waitUntil } from "../fixtures/processes";
import { REDACTED } from "../../lib/shared";
import { callThroughGraph, toolCalls, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { stdioFixture } from "../fixtures/stdio";

const SECRET = "run-token-8Hq";
let toolkit: McpToolkit;
let graph: ToolNodeGraph;

/** Sends the run's `secrets.token` (when it has one) to the server as a header. */
const runToken: McpToolInterceptor = (request, next) => {
  const token = (request.runtime?.context as { secrets?: { token?: string } } | undefined)?.secrets?.token;
  return next(token === undefined ? request : request.override({ headers: { ...request.headers, "X-Run-Token": token } }));
};

beforeAll(async () => {
  const dir = await makeTempDir("remembered-secrets-");
  const configPath = await writeConfig(dir, { mcpServers: { local: { type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"], tasks: true }) } } });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir: dir, interceptors: [runToken] });
  graph = toolNodeGraph(await toolkit.getTools());
});
afterAll(async () => {
  await toolkit.close();
});

test("a later call's answer is scrubbed of what an earlier call in the same stdio session carried", async () => {
  const scope = { configurable: { thread_id: "th-r" } };
  // The session exists before the secret arrives: what it remembers grows afterwards.
  await callThroughGraph(graph, "local_pid", {}, { ...scope, context: { user_id: "ann" } });
  const started = await callThroughGraph(graph, "local_start_job", { label: "r", mode: "echo_submit" }, { ...scope, context: { user_id: "ann", secrets: { token: SECRET } } });
  const { task_id: jobId } = JSON.parse(String(started.content)) as { task_id: string };
  const answered = await callThroughGraph(graph, "local_job_status", { task_id: jobId }, { ...scope, context: { user_id: "ann" } });
  const text = String(answered.content);
  const result = (JSON.parse(text) as { result: { submitted_with: Record<string, unknown>; b64: string } }).result;
  // The child did send the header back (so the checks can fail): raw and base64.
  expect(result.submitted_with["X-Run-Token"]).toBe(REDACTED);
  expect(text).not.toContain(SECRET);
  expect(Buffer.from(result.b64, "base64").toString("utf8")).not.toContain(SECRET);
  expect(JSON.stringify(answered.artifact ?? null)).not.toContain(SECRET);
});

test("a session sent more distinct secrets than it remembers forgets none: it is replaced once its running call is done", async () => {
  const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["pid"] }) });
  const logger = new RecordingLogger();
  const pool = new SessionPool(logger, { dataDir: await makeTempDir("remembered-limit-") });
  const opts = { headers: EMPTY_HEADERS, initTimeoutMs: null, scope: sessionScope("ann", "th-limit") };
  try {
    const lease = await pool.acquire("local", server, opts);
    const sent = Array.from({ length: SESSION_SECRETS_LIMIT + 1 }, (_, i) => `run-token-${i}`);
    expect(lease.session.rememberSecrets(sent.slice(0, SESSION_SECRETS_LIMIT))).toHaveLength(SESSION_SECRETS_LIMIT);
    const again = pool.tryAcquire("local", server, opts);
    expect(again?.session).toBe(lease.session);
    again?.release();
    // One more: all of them are still scrubbed from what this session's running call answers.
    expect(new Set(lease.session.rememberSecrets(sent.slice(-1)))).toEqual(new Set(sent));
    expect(pool.tryAcquire("local", server, opts)).toBeUndefined();
    expect(alive(lease.session.pid!)).toBe(true);
    lease.release();
    expect(await waitUntil(() => !alive(lease.session.pid!))).toBe(true);
    const next = await pool.acquire("local", server, opts);
    next.release();
    expect(next.session.pid).not.toBe(lease.session.pid);
    expect(logger.lines.map((l) => l.message)).toContainEqual(expect.stringContaining(`more than ${SESSION_SECRETS_LIMIT} distinct secrets`));
  } finally {
    await pool.close();
  }
});

test.each([
  ["its progress message and its answer", true],
  ["its answer", false],
])("two calls on one child at once: %s, scrubbed of what the other call sent the child later", async (_label, streamed) => {
  const logger = new RecordingLogger();
  const arrived = (n: number) => waitUntil(() => logger.messages("debug").some((m) => m.endsWith(`latest_token: call ${n} arrived`)));
  /** Puts the run's `secrets.token` into the call's arguments. */
  const tokenIntoArgs: McpToolInterceptor = (request, next) => {
    const token = (request.runtime?.context as { secrets?: { token?: string } } | undefined)?.secrets?.token ?? "";
    return next(request.override({ args: { ...request.args, token } }));
  };
  const dir = await makeTempDir("remembered-secrets-concurrent-");
  const configPath = await writeConfig(dir, {
    mcpServers: { latest: { type: "stdio", ...stdioFixture({ name: "latest", toolNames: ["latest_token"] }) } },
  });
  const own = createMcpToolkit({ configPath, env: {}, logger, dataDir: dir, interceptors: [tokenIntoArgs] });
  try {
    const ownGraph = toolNodeGraph(await own.getTools());
    const runOf = (token: string) => ({ context: { user_id: "alice", thread_id: "t1", secrets: { token } } });
    // The first call waits in the child for the second, which sends it a secret the first run never had.
    const first = (async () => {
      if (!streamed) return [(await callThroughGraph(ownGraph, "latest_latest_token", { token: "" }, runOf("tok-first-QZXJ1111"))).content];
      const stream = await ownGraph.stream({ messages: [toolCalls([{ name: "latest_latest_token", args: { token: "", progress: true } }])] }, {
        ...runOf("tok-first-QZXJ1111"),
        streamMode: ["custom", "updates"],
      });
      const seen: unknown[] = [];
      for await (const [mode, chunk] of stream as AsyncIterable<[string, unknown]>) {
        seen.push(mode === "custom" ? (chunk as { message?: string }).message : (chunk as { tools: { messages: ToolMessage[] } }).tools.messages[0].content);
      }
      return seen;
    })();
    expect(await arrived(1)).toBe(true);
    const second = await callThroughGraph(ownGraph, "latest_latest_token", { token: "" }, runOf("tok-second-VWKY2222"));
    expect(second.content).toBe(`current credentials: ${REDACTED}`);
    expect(await first).toEqual(Array.from({ length: streamed ? 2 : 1 }, () => `current credentials: ${REDACTED}`));
  } finally {
    await own.close();
  }
});
