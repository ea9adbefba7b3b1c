import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import { getEventListeners } from "node:events";
import { createMcpToolkit, RecordingLogger, type McpToolkit } from "../../lib";
import { onAbort, withDeadline } from "../../lib/shared/deadline";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, rawHeaderValues, type HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { startTokenFixture, type TokenFixture } from "../fixtures/token-server";
import { toolCalls, toolMessagesOf, toolNodeGraph } from "../fixtures/graph";

describe("onAbort: one listener per signal, fanned out to its waiters", () => {
  test("many waiters add one listener, removed when the last one ends; an abort reaches every waiter once", () => {
    const controller = new AbortController();
    const fired: number[] = [];
    const unsubscribe = Array.from({ length: 30 }, (_, i) => onAbort(controller.signal, () => fired.push(i)));
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    for (const off of unsubscribe.slice(0, 29)) off();
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    unsubscribe[29]();
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);

    const again = [onAbort(controller.signal, () => fired.push(100)), onAbort(controller.signal, () => fired.push(101))];
    again[0]();
    again[0]();
    controller.abort();
    expect(fired).toEqual([101]);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    onAbort(controller.signal, () => fired.push(102));
    expect(fired).toEqual([101, 102]);
  });

  test("withDeadline waiters on one outer signal share its listener, and each one is stopped by its abort", async () => {
    const outer = new AbortController();
    const never = new Promise<never>(() => undefined);
    const inner: AbortSignal[] = [];
    const waits = Array.from({ length: 20 }, () =>
      withDeadline((signal) => {
        inner.push(signal);
        return never;
      }, null, outer.signal),
    );
    expect(getEventListeners(outer.signal, "abort")).toHaveLength(1);
    outer.abort(new Error("run cancelled"));
    await expect(Promise.all(waits)).rejects.toThrow("run cancelled");
    expect(inner.every((signal) => signal.aborted)).toBe(true);
  });
});

/**
 * Jest gives each test file a copy of `process`; Node emits its warnings on the real one. A function made by the
 * host realm's Function constructor (reached through a host-realm global) sees the host's `process`.
 */
function hostProcess(): NodeJS.Process {
  return (Buffer.constructor as FunctionConstructor)("return process")() as NodeJS.Process;
}

describe("30 parallel tool calls in one ToolNode step add no listener pile to the run's signal", () => {
  let tokens: TokenFixture;
  let secured: HttpFixture;
  let plain: HttpFixture;
  let toolkit: McpToolkit;
  let now = 1_700_000_000_000;
  const warnings: string[] = [];
  const onWarning = (warning: Error) => {
    if (warning.name === "MaxListenersExceededWarning") warnings.push(warning.message);
  };

  beforeAll(async () => {
    [tokens, secured, plain] = await Promise.all([
      startTokenFixture(),
      startHttpFixture({ name: "secured", toolNames: ["echo"] }),
      startHttpFixture({ name: "plain", toolNames: ["echo"] }),
    ]);
    const dir = await makeTempDir("mcp-listeners-");
    const configPath = await writeConfig(dir, {
      mcpServers: {
        secured: { type: "http", url: secured.url, oauth: { token_url: tokens.url, client_id: "c-1", client_secret: "s-1" } },
        plain: { type: "http", url: plain.url },
      },
    });
    toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), oauth: { now: () => now } });
    hostProcess().on("warning", onWarning);
  });
  afterEach(() => {
    warnings.length = 0;
  });
  afterAll(async () => {
    hostProcess().off("warning", onWarning);
    await toolkit.close();
    await Promise.all([tokens.close(), secured.close(), plain.close()]);
  });

  async function settleWarnings(): Promise<void> {
    // Node emits the warning on a later tick of the step that added the listener.
    await new Promise((resolve) => setImmediate(resolve));
  }

  test("OAuth: 30 calls wait on one token request, then on one new session, then call", async () => {
    const graph = toolNodeGraph(await toolkit.getTools());
    now += 7_200_000; // the discovery token expired: every call waits for the new one, then for its new session
    const start = tokens.requests.length;
    const held = tokens.hold();
    let started = 0;
    const calls = Array.from({ length: 30 }, (_, i) => ({ name: "secured_echo", args: { text: `oauth-burst-${i}` } }));
    const run = graph.invoke({ messages: [toolCalls(calls)] }, { callbacks: [{ handleToolStart: () => void (started += 1) }] });
    await held.received;
    while (started < 30) await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve)); // every started call waits on the token request
    held.release();
    const messages = toolMessagesOf((await run).messages);
    await settleWarnings();
    expect(messages.map((m) => m.status)).toEqual(Array(30).fill("success"));
    expect(tokens.requests.length - start).toBe(1);
    const sessions = new Set(calls.map((c) => findToolCall(secured.requests, c.args.text)!.sessionId));
    expect(sessions.size).toBe(1);
    expect(rawHeaderValues(findToolCall(secured.requests, "oauth-burst-0")!, "authorization")).toEqual(["Bearer access-2"]);
    expect(warnings).toEqual([]);
  });

  test("a plain server: 30 calls on its pooled session", async () => {
    const graph = toolNodeGraph(await toolkit.getTools());
    const calls = Array.from({ length: 30 }, (_, i) => ({ name: "plain_echo", args: { text: `plain-burst-${i}` } }));
    const messages = toolMessagesOf((await graph.invoke({ messages: [toolCalls(calls)] })).messages);
    await settleWarnings();
    expect(messages.map((m) => m.content)).toEqual(calls.map((c) => c.args.text));
    expect(warnings).toEqual([]);
  });
});
