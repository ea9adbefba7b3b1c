/**
 * A call that ends while its workspace walk (off the event loop) hangs, by the run's cancellation: the walk is left
 * behind and the attempt ends at once, releasing its session, rather than holding it (busy, never idle-closed) until
 * the file system answers. libuv's thread pool is held by reads of FIFOs without a writer, so the walk cannot go on
 * until the test lets it: nothing depends on timing.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "@jest/globals";
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpCallOutcome, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { stdioFixture } from "../fixtures/stdio";
import { BusyPool } from "../fixtures/busy-pool";

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

let toolkit: McpToolkit;
let fifos: string[];
let busy: BusyPool | undefined;
let watch: "no" | "one" | "two" = "no";
let attempts: Promise<McpCallOutcome>[] = [];
let entered = deferred();
const run = { context: { user_id: "u" }, configurable: { thread_id: "walk-cancel" } };

// Hands the test the attempt: by the time `next` returns, its walk runs (the session is up, the tree known large).
const spy: McpToolInterceptor = (request, next) => {
  if (watch === "no") return next(request);
  // "two": two attempts at once (a hedging interceptor), each with a walk of its own.
  attempts = watch === "one" ? [next(request)] : [next(request), next(request)];
  entered.resolve();
  return Promise.all(attempts).then(([first]) => first);
};

beforeAll(async () => {
  const dataDir = await makeTempDir("mcp-walk-cancel-data-");
  const workspace = path.join(dataDir, "threads", "walk-cancel", "user-data", "workspace");
  mkdirSync(workspace, { recursive: true });
  for (let f = 0; f < 300; f += 1) writeFileSync(path.join(workspace, `f${f}`), "");
  fifos = await BusyPool.fifos("mcp-walk-cancel-fifos-");
  const configPath = await writeConfig(await makeTempDir("mcp-walk-cancel-"), {
    mcpServers: { ws: { type: "stdio", ...stdioFixture({ name: "ws", toolNames: ["echo"] }), tool_call_timeout: 600 } },
  });
  toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), dataDir, interceptors: [spy] });
  const [echo] = await toolkit.getTools();
  // The child is started and the workspace known to be large before the pool is held.
  expect(await echo.invoke({ type: "tool_call", id: "warm", name: echo.name, args: { text: "warm" } }, run)).toMatchObject({ content: "warm" });
});
afterEach(async () => {
  await busy?.release();
  busy = undefined;
});
afterAll(async () => {
  await toolkit?.close();
});

test.each(["one", "two"] as const)("the run cancelled while the walk before the call hangs (%s attempt(s)): each attempt ends at once and releases its session", async (how) => {
  const [echo] = await toolkit.getTools();
  busy = BusyPool.hold(fifos);
  watch = how;
  entered = deferred();
  const controller = new AbortController();
  const running = echo.invoke({ type: "tool_call", id: "c1", name: echo.name, args: { text: "never" } }, { ...run, signal: controller.signal });
  await entered.promise;
  controller.abort(new Error("run cancelled"));
  await expect(running).rejects.toThrow("run cancelled");
  // While the pool is still held: no attempt waits for its walk.
  for (const sent of attempts) await expect(sent).rejects.toThrow("run cancelled");
}, 20_000);
