import { describe, expect, test } from "@jest/globals";
import { createMcpToolkit, McpToolCallRequest, RecordingLogger, type McpToolInterceptor } from "../../lib";
import { rewritingInterceptor } from "../../lib/shared/interceptor";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { findToolCall } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";

function request(): McpToolCallRequest {
  return new McpToolCallRequest({
    serverName: "s",
    toolName: "echo",
    args: { text: "original" },
    headers: { "X-A": "1" },
    runtime: undefined,
    meta: { m: 1 },
  });
}

// Test files compile to strict-mode code, where writing to a frozen object throws.
describe("McpToolCallRequest is immutable", () => {
  test("the request, its args, headers and meta are frozen: writes throw and change nothing", () => {
    const req = request();
    expect(Object.isFrozen(req)).toBe(true);
    expect(() => {
      (req as { toolName: string }).toolName = "other";
    }).toThrow(TypeError);
    expect(() => {
      (req.args as Record<string, unknown>).text = "changed";
    }).toThrow(TypeError);
    expect(() => {
      (req.headers as Record<string, string>)["X-B"] = "2";
    }).toThrow(TypeError);
    expect(() => {
      (req.meta as Record<string, unknown>).m = 2;
    }).toThrow(TypeError);
    expect(() => {
      delete (req.args as Record<string, unknown>).text;
    }).toThrow(TypeError);
    expect(req.toolName).toBe("echo");
    expect(req.args).toEqual({ text: "original" });
    expect(req.headers).toEqual({ "X-A": "1" });
    expect(req.meta).toEqual({ m: 1 });
  });

  test("the constructor copies what it is given: the caller's objects stay its own and later edits do not leak in", () => {
    const args: Record<string, unknown> = { text: "original" };
    const req = new McpToolCallRequest({ serverName: "s", toolName: "echo", args, headers: {}, runtime: undefined });
    expect(Object.isFrozen(args)).toBe(false);
    args.text = "edited afterwards";
    expect(req.args).toEqual({ text: "original" });
  });

  test("nested arguments are copied and frozen too: a write into them throws, and the caller's tool call stays as it was", () => {
    const person = { name: "Ada", tags: ["a"] };
    const args: Record<string, unknown> = { person, list: [{ k: 1 }] };
    const req = new McpToolCallRequest({ serverName: "s", toolName: "profile", args, headers: {}, runtime: undefined });
    const seen = req.args as { person: { name: string; tags: string[] }; list: { k: number }[] };
    expect(() => {
      seen.person.name = "sk-secret";
    }).toThrow(TypeError);
    expect(() => {
      seen.person.tags.push("b");
    }).toThrow(TypeError);
    expect(() => {
      seen.list[0].k = 2;
    }).toThrow(TypeError);
    expect(person).toEqual({ name: "Ada", tags: ["a"] });
    expect(Object.isFrozen(person)).toBe(false);
    const proto = JSON.parse('{"__proto__": {"x": 1}}') as Record<string, unknown>;
    const withProto = new McpToolCallRequest({ serverName: "s", toolName: "t", args: proto, headers: {}, runtime: undefined });
    expect(Object.keys(withProto.args)).toEqual(["__proto__"]);
    expect(Object.getPrototypeOf(withProto.args)).toBe(Object.prototype);
  });

  test("override returns a new frozen request and leaves the original as it was", () => {
    const req = request();
    const patch = { args: { text: "patched" } };
    const next = req.override(patch);
    expect(next).not.toBe(req);
    expect(next).toBeInstanceOf(McpToolCallRequest);
    expect(Object.isFrozen(next) && Object.isFrozen(next.args)).toBe(true);
    expect(next.args).toEqual({ text: "patched" });
    expect(next.headers).toBe(req.headers);
    expect(req.args).toEqual({ text: "original" });
    patch.args.text = "edited afterwards";
    expect(next.args).toEqual({ text: "patched" });
  });
});

describe("rewritingInterceptor", () => {
  test("passes the rewritten request on and returns the next layer's promise as it is", () => {
    const original = request();
    const rewritten = original.override({ headers: { "X-B": "2" } });
    const seen: McpToolCallRequest[] = [];
    const answer = Promise.resolve({ content: [] });
    const result = rewritingInterceptor(() => rewritten)(original, (passed) => (seen.push(passed), answer));
    expect(result).toBe(answer);
    expect(seen).toEqual([rewritten]);
  });

  test("a rewrite or a next layer that throws gives a rejection, never a synchronous throw", async () => {
    const denied = rewritingInterceptor(() => {
      throw new Error("denied");
    });
    let called = false;
    const outcome = denied(request(), async () => ((called = true), { content: [] }));
    await expect(outcome).rejects.toThrow("denied");
    expect(called).toBe(false);
    const thrown = rewritingInterceptor((r) => r)(request(), () => {
      throw new Error("next failed");
    });
    await expect(thrown).rejects.toThrow("next failed");
  });
});

describe("on the call path", () => {
  test("an interceptor cannot change what is sent except through override", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
    const attempts: string[] = [];
    const tamper: McpToolInterceptor = async (request, next) => {
      try {
        (request.args as Record<string, unknown>).text = "tampered";
      } catch (err) {
        attempts.push((err as Error).name);
      }
      request.override({ args: { text: "overridden but not passed on" } });
      return next(request);
    };
    const dir = await makeTempDir("mcp-frozen-request-");
    const configPath = await writeConfig(dir, { mcpServers: { remote: { type: "http", url: fx.url } } });
    const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger(), interceptors: [tamper] });
    try {
      const message = await callThroughGraph(toolNodeGraph(await toolkit.getTools()), "remote_echo", { text: "as the model asked" });
      expect(message.content).toBe("as the model asked");
      expect(findToolCall(fx.requests, "as the model asked")).toBeDefined();
      expect(attempts).toEqual(["TypeError"]);
    } finally {
      await toolkit.close();
      await fx.close();
    }
  });
});
