/**
 * Hostile servers that echo every credential they receive, in every field and encoding, and interceptors that
 * throw errors quoting the request: no secret of a call reaches a ToolMessage (text or artifact), an error, a
 * progress event, a tool description, a log line, the console, a checkpoint or a trace, in any form.
 */
import { afterAll, beforeAll, describe, expect, jest, test } from "@jest/globals";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { ToolMessage } from "@langchain/core/messages";
import type { DynamicStructuredTool } from "@langchain/core/tools";
import { Command, MemorySaver } from "@langchain/langgraph";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createMcpToolkit, McpToolCallError, RecordingLogger, type McpToolInterceptor, type McpToolkit } from "../../lib";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { TraceRecorder } from "../fixtures/trace";
import { callThroughGraph, toolCalls, toolMessagesOf, toolNodeGraph, type ToolNodeGraph } from "../fixtures/graph";
import { rawHeaderValues, type HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { startSseFixture } from "../fixtures/sse-server";
import { stdioFixture } from "../fixtures/stdio";
import { startTokenFixture, type TokenFixture } from "../fixtures/token-server";

/** Distinctive values, several short, several with characters that JSON, URL and HTML encode differently. */
const SECRETS = {
  static: 'st"a\\t9', // $VAR in a static header
  url: "uK3y", // $VAR in the url's query
  local: 'l0c"al&', // $VAR in a stdio server's env
  arg: "aRg7", // $VAR in a stdio server's args
  literalEnv: "l1t-T0k", // written as it is into a stdio server's env, under a credential name
  literalArg: "l1t-Pw", // written as it is into a stdio server's args, after a credential flag
  literalUrl: "l1t-qk3y", // written as it is into a server URL's query (`access_token=`)
  literalDbPassword: "pgPw-9x", // written as it is into a URL in a stdio server's args (`user:password@`)
  user: "Zq7w", // user_auth value (4 characters)
  context: "c/x+1 z", // context.secrets
  unused: "unUs3d", // a context secret no header carries
  oauth: "oa/tok+en=1", // OAuth access token
  clientSecret: "cl1ent-s", // OAuth client secret
  inner: "inn3r", // a header an interceptor adds
  symbols: "?>~?>~?>", // $VAR in a static header: its base64 holds '/' or '+' at every alignment
};
const ENV: NodeJS.ProcessEnv = {
  STATIC_KEY: SECRETS.static,
  URL_KEY: SECRETS.url,
  LOCAL_KEY: SECRETS.local,
  ARG_KEY: SECRETS.arg,
  CLIENT_SECRET: SECRETS.clientSecret,
  SYM_KEY: SECRETS.symbols,
};
const CONTEXT = { user_id: "alice", secrets: { request_key: SECRETS.context, other: SECRETS.unused } };

let http: HttpFixture;
let sse: HttpFixture;
let tokens: TokenFixture;
let urlEcho: Server;
let toolkit: McpToolkit;
let tools: DynamicStructuredTool[];
let graph: ToolNodeGraph;
const logger = new RecordingLogger();
const checkpointer = new MemorySaver();
const consoleLines: string[] = [];
const traces: string[] = [];
const seen: unknown[] = [];
let thread = 0;

/** Throws, quoting the headers as they stand, for `echo` calls whose text asks for it. */
const quoteHeaders: McpToolInterceptor = async (request, next) => {
  const text = String(request.args.text ?? "");
  if (text === "throw-plain") throw new Error(`refused with ${JSON.stringify(request.headers)}`);
  if (text === "throw-tool-error") throw new McpToolCallError(`refused: ${encodeURIComponent(JSON.stringify(request.headers))}`);
  return next(request);
};
/** Puts a context secret into the arguments (a custom interceptor may do that): the echo of args is scrubbed too. */
const secretIntoArgs: McpToolInterceptor = (request, next) => {
  if (request.args.text !== "secret-in-args") return next(request);
  const secrets = (request.runtime?.context as { secrets?: Record<string, string> } | undefined)?.secrets ?? {};
  return next(request.override({ args: { text: `using ${secrets.other}` } }));
};
/** Answers without the server, quoting the headers, as a ToolMessage or as a Command carrying one. */
const answerDirectly: McpToolInterceptor = async (request) => {
  const text = String(request.args.text ?? "");
  const message = new ToolMessage({
    content: `headers ${JSON.stringify(request.headers)}`,
    artifact: { headers: request.headers },
    tool_call_id: request.runtime?.toolCallId ?? "none",
    name: "remote_echo",
  });
  if (text === "tool-message") return message;
  return new Command({ update: { messages: [message] } });
};
const answering: McpToolInterceptor = (request, next) =>
  ["tool-message", "command"].includes(String(request.args.text)) ? answerDirectly(request, next) : next(request);
/** Adds a header of its own before passing the call on. */
const addInner: McpToolInterceptor = (request, next) =>
  next(request.override({ headers: { ...request.headers, "X-Inner": SECRETS.inner } }));

beforeAll(async () => {
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    jest.spyOn(console, level).mockImplementation((...args: unknown[]) => void consoleLines.push(args.map(String).join(" ")));
  }
  [http, sse, tokens] = await Promise.all([
    startHttpFixture({ name: "remote", toolNames: ["leak", "echo"] }),
    startSseFixture({ name: "legacy", toolNames: ["leak"] }),
    startTokenFixture(),
  ]);
  tokens.respond(() => ({ body: { access_token: SECRETS.oauth, token_type: "Bearer", expires_in: 3600 } }));
  // Not an MCP server: a 400 whose body quotes the request URL, raw and decoded.
  urlEcho = createServer((req, res) => {
    res.writeHead(400, { "Content-Type": "text/plain" });
    res.end(`bad request for ${req.url} (${decodeURIComponent(req.url ?? "")})`);
  });
  await new Promise<void>((resolve) => urlEcho.listen(0, "127.0.0.1", resolve));

  const local = stdioFixture({ name: "local", toolNames: ["leak"] });
  const credentials = {
    headers: { "X-Api-Key": "${STATIC_KEY}", "X-Sym-Key": "${SYM_KEY}" },
    oauth: { token_url: tokens.url, client_id: "client-1", client_secret: "${CLIENT_SECRET}" },
    user_auth: { header: "X-User-Token", users: { alice: SECRETS.user } },
    headers_from_context: { headers: { "X-Request-Key": "request_key" } },
  };
  const dir = await makeTempDir("mcp-echo-");
  const configPath = await writeConfig(dir, {
    mcpServers: {
      remote: { type: "http", url: `${http.url}?key=\${URL_KEY}`, ...credentials },
      legacy: { type: "sse", url: sse.url, ...credentials },
      local: {
        type: "stdio",
        command: local.command,
        args: [...local.args, "--api-key=${ARG_KEY}", `postgresql://app:${SECRETS.literalDbPassword}@db.example/app`, "--db-password", SECRETS.literalArg],
        env: { ...local.env, LOCAL_KEY: "${LOCAL_KEY}", GITHUB_TOKEN: SECRETS.literalEnv, FIXTURE_LEAK_DESCRIBE_ENV: "LOCAL_KEY" },
      },
      urlecho: { type: "http", url: `http://127.0.0.1:${(urlEcho.address() as AddressInfo).port}/mcp?key=\${URL_KEY}&access_token=${SECRETS.literalUrl}` },
    },
  });
  toolkit = createMcpToolkit({ configPath, env: ENV, logger, interceptors: [addInner, quoteHeaders, secretIntoArgs, answering] });
  tools = await toolkit.getTools();
  graph = toolNodeGraph(tools, checkpointer);
});
afterAll(async () => {
  await toolkit.close();
  await Promise.all([http.close(), sse.close(), tokens.close(), new Promise((resolve) => urlEcho.close(resolve))]);
  jest.restoreAllMocks();
});

async function call(name: string, args: Record<string, unknown>): Promise<ToolMessage> {
  const message = await callThroughGraph(graph, name, args, {
    context: CONTEXT,
    configurable: { thread_id: `echo-${++thread}` },
    callbacks: [new TraceRecorder(traces)],
  });
  seen.push(message.toDict(), message.artifact);
  return message;
}

describe("a server echoing what it received", () => {
  test.each([
    ["streamable HTTP", "remote_leak"],
    ["SSE", "legacy_leak"],
    ["stdio", "local_leak"],
  ])("%s: success and isError results come back scrubbed, text and artifact", async (_transport, name) => {
    for (const error of [false, true]) {
      const message = await call(name, { error, env: ["LOCAL_KEY", "GITHUB_TOKEN"] });
      expect(message.status).toBe(error ? "error" : "success");
      expect(String(message.content)).toContain("[redacted]");
      if (!error) {
        const artifact = message.artifact as { structuredContent: { received: Record<string, unknown> }; meta: { basic: string[] } };
        expect(JSON.stringify(artifact.structuredContent)).toContain("[redacted]");
        expect(artifact.meta.basic.some((b) => b.includes("[redacted]"))).toBe(true);
      }
    }
  });

  test("the credentials did reach the servers (the scan below is not vacuous)", async () => {
    const remote = http.requests.filter((r) => r.rpcMethods?.includes("tools/call"));
    expect(remote.length).toBeGreaterThan(0);
    const last = remote[remote.length - 1];
    expect(rawHeaderValues(last, "x-api-key")).toEqual([SECRETS.static]);
    expect(rawHeaderValues(last, "x-user-token")).toEqual([SECRETS.user]);
    expect(rawHeaderValues(last, "x-request-key")).toEqual([SECRETS.context]);
    expect(rawHeaderValues(last, "x-inner")).toEqual([SECRETS.inner]);
    expect(rawHeaderValues(last, "authorization")).toEqual([`Bearer ${SECRETS.oauth}`]);
    expect(last.url).toContain(`key=${SECRETS.url}`);
    // stdio: the whole echoed env value and argument were blanked, so the child had exactly those values.
    const message = await call("local_leak", { env: ["LOCAL_KEY", "GITHUB_TOKEN"] });
    const received = (message.artifact as { structuredContent: { received: { env: object; argv: string[] } } }).structuredContent.received;
    expect(received.env).toEqual({ LOCAL_KEY: "[redacted]", GITHUB_TOKEN: "[redacted]" });
    expect(received.argv).toContain("--api-key=[redacted]");
    expect(received.argv).toContain("postgresql://app:[redacted]@db.example/app");
    expect(received.argv.slice(-2)).toEqual(["--db-password", "[redacted]"]);
  });

  test("progress messages in the custom stream are scrubbed", async () => {
    const stream = await graph.stream(
      { messages: [toolCalls([{ name: "remote_leak", args: {} }])] },
      { context: CONTEXT, configurable: { thread_id: `echo-${++thread}` }, streamMode: ["custom", "values"] },
    );
    const events: unknown[] = [];
    for await (const [mode, chunk] of stream) {
      if (mode === "custom") events.push(chunk);
      else seen.push(...toolMessagesOf((chunk as { messages: never[] }).messages).map((m: ToolMessage) => m.toDict()));
    }
    expect(events).toEqual([expect.objectContaining({ type: "mcp_progress", message: expect.stringContaining("[redacted]") })]);
    seen.push(...events);
  });

  test("a direct call (the durable-task path) returns a scrubbed outcome", async () => {
    const outcome = (await toolkit.callTool({ server: "remote", tool: "leak", args: {}, runtime: { context: CONTEXT } as never })) as CallToolResult;
    expect(JSON.stringify(outcome.structuredContent)).toContain("[redacted]");
    seen.push(outcome);
  });
});

describe("interceptor failures", () => {
  test.each(["throw-plain", "throw-tool-error"])("an interceptor after the credential layers throwing with the headers (%s)", async (text) => {
    const message = await call("remote_echo", { text });
    expect(message.status).toBe("error");
    expect(String(message.content)).toMatch(/refused/);
    expect(String(message.content)).toContain("[redacted]");
  });
});

test("a context secret an interceptor put into the arguments is scrubbed from the echo", async () => {
  const message = await call("remote_echo", { text: "secret-in-args" });
  expect(message.content).toBe("using [redacted]");
});

test.each(["tool-message", "command"])("an interceptor answering with a %s quoting the headers: scrubbed text and artifact", async (text) => {
  const message = await call("remote_echo", { text });
  expect(String(message.content)).toMatch(/^headers \{.*\[redacted\]/);
  expect(JSON.stringify(message.artifact)).toContain("[redacted]");
});

describe("at discovery", () => {
  test("a server's 400 body quoting the url: the $VAR value and the literal credential in it are scrubbed from the warning", () => {
    const warning = logger.messages("warn").find((m) => m.startsWith("Skipping MCP server 'urlecho'"));
    expect(warning).toContain("bad request for /mcp?key=[redacted]&access_token=[redacted] (/mcp?key=[redacted]&access_token=[redacted])");
  });

  test("a tool description quoting a $VAR value is scrubbed", () => {
    const leak = tools.find((t) => t.name === "local_leak")!;
    expect(leak.description).toContain("Configured with [redacted].");
    seen.push(tools.map((t) => ({ name: t.name, description: t.description, schema: t.schema })));
  });

  test("a stdio child's stderr reaches debug logs scrubbed", () => {
    const stderr = logger.messages("debug").filter((m) => m.startsWith("MCP server 'local' stderr: leak:"));
    expect(stderr.length).toBeGreaterThan(0);
    for (const line of stderr) expect(line).toContain("[redacted]");
  });
});

/**
 * `text` with what can hide a base64 run undone: JSON escapes of '/', the percent-encoding of '/', '+' and '=', and line
 * breaks (raw, JSON-escaped at any depth, percent-encoded).
 */
function unwrapped(text: string): string {
  return text
    .replace(/\\+\//g, "/")
    .replace(/%(?:25)?2F/gi, "/")
    .replace(/%(?:25)?2B/gi, "+")
    .replace(/%(?:25)?3D/gi, "=")
    .replace(/\r?\n|\\+r|\\+n|%(?:25)?0[AD]/gi, "");
}

/** True when a base64/base64url run in `text`, read at any offset, decodes to bytes containing `secret`. */
function decodesTo(text: string, secret: string): boolean {
  const needle = Buffer.from(secret);
  for (const match of unwrapped(text).matchAll(/[A-Za-z0-9+/_-]{4,}/g)) {
    for (let offset = 0; offset < 4; offset += 1) {
      if (Buffer.from(match[0].slice(offset), "base64").includes(needle)) return true;
    }
  }
  return false;
}

function forms(secret: string): string[] {
  const url = encodeURIComponent(secret);
  return [
    secret,
    JSON.stringify(secret).slice(1, -1),
    url,
    url.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
    url.replace(/%20/g, "+"),
    secret.replace(/&/g, "&amp;").replace(/"/g, "&quot;"),
  ];
}

describe("the leak scan", () => {
  test("no secret, in any form, in messages, artifacts, errors, events, descriptions, logs, console, checkpoints or traces", async () => {
    const checkpoints: string[] = [];
    for (let t = 1; t <= thread; t += 1) {
      for await (const tuple of checkpointer.list({ configurable: { thread_id: `echo-${t}` } })) checkpoints.push(JSON.stringify(tuple));
    }
    expect(checkpoints.length).toBeGreaterThan(0);
    expect(traces.length).toBeGreaterThan(0);
    const texts = [
      ...seen.map((value) => JSON.stringify(value) ?? ""),
      ...logger.lines.map((l) => l.message),
      ...consoleLines,
      ...checkpoints,
      ...traces,
    ];
    const leaks: string[] = [];
    for (const [label, secret] of Object.entries(SECRETS)) {
      for (const text of texts) {
        const form = forms(secret).find((f) => text.includes(f));
        if (form !== undefined) leaks.push(`${label} as ${JSON.stringify(form)} in ${text.slice(0, 160)}`);
        else if (decodesTo(text, secret)) leaks.push(`${label} as base64 in ${text.slice(0, 160)}`);
      }
    }
    expect(leaks).toEqual([]);
  });
});
