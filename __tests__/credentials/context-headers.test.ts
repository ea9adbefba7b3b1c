/**
 * The headers_from_context layer hands one user's calls the very same (frozen) header object, so the session pool,
 * the sendability check and the redactor hit their memos; different values never share one, and the memo is bounded.
 */
import { describe, expect, test } from "@jest/globals";
import type { ToolRuntime } from "@langchain/core/tools";
import { McpToolCallRequest } from "../../lib";
import { contextHeadersInterceptor } from "../../lib/credentials";
import type { HeaderMap } from "../../lib/shared/headers";

const BASE: HeaderMap = Object.freeze({ "X-Static": "s" });
const layer = () => contextHeadersInterceptor("remote", { headers: { "X-Api-Key": "api_key", "X-Team": "team" }, on_missing: "passthrough" });

function request(secrets: Record<string, unknown>): McpToolCallRequest {
  const runtime = { context: { secrets }, toolCallId: "c" } as unknown as ToolRuntime;
  const init = { serverName: "remote", toolName: "echo", args: {}, headers: BASE, runtime };
  return new McpToolCallRequest(init);
}

async function sent(interceptor: ReturnType<typeof layer>, secrets: Record<string, unknown>): Promise<HeaderMap> {
  let headers: HeaderMap | undefined;
  await interceptor(request(secrets), async (passed) => {
    headers = passed.headers;
    return { content: [] };
  });
  return headers!;
}

describe("headers_from_context header sets", () => {
  test("the same values give the same object; other values (or a missing one) another, each with its own values", async () => {
    const interceptor = layer();
    const alice = await sent(interceptor, { api_key: "key-a", team: "t1" });
    expect(await sent(interceptor, { api_key: "key-a", team: "t1" })).toBe(alice);
    expect(alice).toEqual({ "X-Static": "s", "X-Api-Key": "key-a", "X-Team": "t1" });
    expect(Object.isFrozen(alice)).toBe(true);
    const bob = await sent(interceptor, { api_key: "key-b", team: "t1" });
    expect(bob).toEqual({ "X-Static": "s", "X-Api-Key": "key-b", "X-Team": "t1" });
    // The same characters split differently between the headers: never the same key.
    expect(await sent(interceptor, { api_key: "key-", team: "at1" })).toEqual({ "X-Static": "s", "X-Api-Key": "key-", "X-Team": "at1" });
    expect(await sent(interceptor, { api_key: "key-at1", team: "" })).toEqual({ "X-Static": "s", "X-Api-Key": "key-at1" });
    expect(await sent(interceptor, { team: "t1" })).toEqual({ "X-Static": "s", "X-Team": "t1" });
    expect(await sent(interceptor, { api_key: "t1" })).toEqual({ "X-Static": "s", "X-Api-Key": "t1" });
  });

  test("a value that cannot be sent is rejected every time, never remembered", async () => {
    const interceptor = layer();
    for (let i = 0; i < 2; i += 1) {
      await expect(sent(interceptor, { api_key: "bad\r\nvalue", team: "t" })).rejects.toThrow(/'X-Api-Key' from headers_from_context contains a line break/);
    }
  });

  test("at most 1024 header sets are remembered, the least recently used first out", async () => {
    const interceptor = layer();
    const first = await sent(interceptor, { api_key: "user-0" });
    const second = await sent(interceptor, { api_key: "user-1" });
    for (let i = 2; i < 1024; i += 1) await sent(interceptor, { api_key: `user-${i}` });
    expect(await sent(interceptor, { api_key: "user-0" })).toBe(first); // used again: now the most recent
    await sent(interceptor, { api_key: "user-1024" }); // one more: user-1 leaves
    expect(await sent(interceptor, { api_key: "user-0" })).toBe(first);
    const again = await sent(interceptor, { api_key: "user-1" });
    expect(again).not.toBe(second);
    expect(again).toEqual(second);
  });
});
