/**
 * A session's id is the one the server gave at initialize: a later response naming another session (a 404 for an
 * expired session carrying another client's `mcp-session-id`) never makes it that other session's, so its close
 * ends only its own session on the server (DELETE), never another client's.
 */
import { describe, expect, test } from "@jest/globals";
import { createMcpToolkit, RecordingLogger } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { findToolCall } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";

describe("a 404 on an expired session that names another client's session", () => {
  test("the DELETE names the expired session, the other client's session lives on, and the next call re-initializes", async () => {
    const fx = await startHttpFixture({ name: "remote", toolNames: ["echo"], unknownSessionNamesAnother: true });
    const configPath = await writeConfig(await makeTempDir("mcp-session-id-"), { mcpServers: { remote: { type: "http", url: fx.url } } });
    const loggerA = new RecordingLogger();
    const loggerB = new RecordingLogger();
    const clientA = createMcpToolkit({ configPath, env: {}, logger: loggerA });
    const clientB = createMcpToolkit({ configPath, env: {}, logger: loggerB });
    try {
      const graphB = toolNodeGraph(await clientB.getTools());
      const graphA = toolNodeGraph(await clientA.getTools());
      expect((await callThroughGraph(graphB, "remote_echo", { text: "b-before" })).content).toBe("b-before");
      expect((await callThroughGraph(graphA, "remote_echo", { text: "a-before" })).content).toBe("a-before");
      const idA = findToolCall(fx.requests, "a-before")!.sessionId!;
      const idB = findToolCall(fx.requests, "b-before")!.sessionId!;
      expect(idA).not.toBe(idB);

      await fx.forgetSessions({ ids: [idA], streams: "kept" });
      const since = fx.requests.length;
      const failed = await callThroughGraph(graphA, "remote_echo", { text: "a-lost" });
      expect(failed.content).toBe(
        "MCP tool 'echo' on server 'remote' failed: the server no longer knows this MCP session (HTTP 404: it expired or the " +
          "server restarted). The call was not sent again; a new session serves the next call.",
      );
      const deleted = await fx.waitForRequest((r) => r.method === "DELETE" && fx.requests.indexOf(r) >= since);
      expect(deleted.sessionId).toBe(idA);
      await fx.responseClosed(deleted);
      expect(fx.activeSessionIds()).toContain(idB);

      const inits = fx.initializeCount();
      expect((await callThroughGraph(graphB, "remote_echo", { text: "b-after" })).content).toBe("b-after");
      expect(findToolCall(fx.requests, "b-after")!.sessionId).toBe(idB);
      expect(fx.initializeCount()).toBe(inits);

      expect((await callThroughGraph(graphA, "remote_echo", { text: "a-after" })).content).toBe("a-after");
      const newA = findToolCall(fx.requests, "a-after")!.sessionId;
      expect([idA, idB]).not.toContain(newA);
      expect(fx.initializeCount()).toBe(inits + 1);
      expect(fx.requests.filter((r) => r.method === "DELETE" && r.sessionId === idB)).toEqual([]);
      for (const line of [...loggerA.messages(), ...loggerB.messages()]) expect(line).not.toContain(idB);
    } finally {
      await clientA.close();
      await clientB.close();
      await fx.close();
    }
  });
});
