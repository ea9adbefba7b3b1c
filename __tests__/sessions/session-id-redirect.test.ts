/**
 * A response that names another session (its `mcp-session-id` stripped, lib/sessions/session-id.ts) keeps the URL it
 * came from: the SDK resolves an unfollowed redirect's `Location` against it, after the redirects it followed.
 */
import { afterEach, expect, test } from "@jest/globals";
import type { ServerResponse } from "node:http";
import { createMcpToolkit, RecordingLogger } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";
import { startHttpFixture } from "../fixtures/http-server";
import { startProxy, type ProxyAnswer } from "../fixtures/proxy";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const redirect =
  (status: number, location: string, headers: Record<string, string> = {}): ProxyAnswer =>
  (res: ServerResponse) =>
    res.writeHead(status, { Location: location, ...headers }).end();

test("a call's POST moved within the origin, then a 302 naming another session: the error names the target the server meant", async () => {
  const http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
  cleanups.push(() => http.close());
  const front = await startProxy(http.url);
  cleanups.push(() => front.close());
  const url = front.url(new URL(http.url).pathname);
  const configPath = await writeConfig(await makeTempDir("mcp-session-id-redirect-"), { mcpServers: { remote: { type: "http", url } } });
  const toolkit = createMcpToolkit({ configPath, env: {}, logger: new RecordingLogger() });
  cleanups.push(() => toolkit.close());
  const graph = toolNodeGraph(await toolkit.getTools());

  // The POST of a call to /moved/...: a 307 (followed, same origin), then a relative 302 a POST does not follow.
  const answers = async (text: string, headers: Record<string, string>) => {
    front.rule = (r) => {
      if (r.rpcMethod !== "tools/call") return undefined;
      return r.url.startsWith("/moved/") ? redirect(302, "elsewhere", headers) : redirect(307, `/moved${r.url}`);
    };
    return callThroughGraph(graph, "remote_echo", { text });
  };
  const plain = await answers("plain", {});
  expect(plain.status).toBe("error");
  expect(String(plain.content)).toContain(`Redirect to ${front.url("/moved/elsewhere")} not followed`);
  const foreign = await answers("foreign", { "mcp-session-id": "another-clients-session" });
  expect([foreign.status, foreign.content]).toEqual(["error", plain.content]);
});
