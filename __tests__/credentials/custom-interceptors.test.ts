import { afterAll, afterEach, beforeAll, describe, expect, test } from "@jest/globals";
import { execFile } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import * as path from "node:path";
import { createMcpToolkit, RecordingLogger, type McpToolkit, type McpToolkitOptions } from "../../lib";
import { buildCustomInterceptor, DEFAULT_INTERCEPTOR_BUILD_TIMEOUT_MS, InterceptorSpecError } from "../../lib/credentials";
import { makeTempDir, writeConfig } from "../fixtures/config";
import { findToolCall, rawHeaderValues, type HttpFixture } from "../fixtures/http-common";
import { startHttpFixture } from "../fixtures/http-server";
import { TSX_CJS_REGISTER } from "../fixtures/stdio";
import { callThroughGraph, toolNodeGraph } from "../fixtures/graph";

/** What a user ships: a CommonJS module next to the config file, with builders of interceptors. */
const MODULE = `
exports.seen = [];
exports.buildTagger = () => async (request, next) => {
  exports.seen.push(Object.keys(request.headers));
  return next(request.override({
    args: { ...request.args, text: request.args.text + " [tagged]" },
    headers: { ...request.headers, "X-Tagged": "yes" },
  }));
};
exports.buildOverride = () => async (request, next) =>
  next(request.override({ headers: { ...request.headers, "x-user-token": "from-interceptor" } }));
exports.buildNothing = () => null;
exports.buildBroken = () => { throw new Error("builder exploded"); };
exports.buildNumber = () => 42;
exports.buildHanging = () => new Promise(() => {});
exports.notABuilder = "text";
`;

let http: HttpFixture;
let dir: string;
const toolkits: McpToolkit[] = [];

beforeAll(async () => {
  http = await startHttpFixture({ name: "remote", toolNames: ["echo"] });
  dir = await makeTempDir("mcp-custom-");
  await mkdir(path.join(dir, "lib"));
  await writeFile(path.join(dir, "lib", "interceptors.js"), MODULE);
});
afterEach(async () => {
  await Promise.all(toolkits.splice(0).map((t) => t.close()));
});
afterAll(async () => {
  await http.close();
});

function server(extra: object = {}) {
  return {
    type: "http",
    url: http.url,
    user_auth: { header: "X-User-Token", users: { alice: "alice-token-1" } },
    ...extra,
  };
}

async function toolkitWith(mcpInterceptors: unknown, file = "extensions_config.json", options: Partial<McpToolkitOptions> = {}) {
  const configPath = await writeConfig(dir, { mcpServers: { remote: server() }, mcpInterceptors }, file);
  const logger = new RecordingLogger();
  const toolkit = createMcpToolkit({ configPath, env: {}, logger, ...options });
  toolkits.push(toolkit);
  return { toolkit, logger, configPath };
}

describe("mcpInterceptors loaded from 'module:export' strings", () => {
  test("resolved relative to the config file; a broken entry is skipped with a warning and the rest still run", async () => {
    const { toolkit, logger } = await toolkitWith([
      "./lib/interceptors.js:buildBroken",
      "./lib/interceptors.js:buildTagger",
      "./lib/interceptors.js:buildNothing",
      "./lib/interceptors.js:buildNumber",
      "./lib/interceptors.js:notABuilder",
      "./lib/missing.js:buildTagger",
      "no-colon-here",
    ]);
    const graph = toolNodeGraph(await toolkit.getTools());
    const message = await callThroughGraph(graph, "remote_echo", { text: "custom-1" }, { context: { user_id: "alice" } });
    expect(message.content).toBe("custom-1 [tagged]");
    const request = findToolCall(http.requests, "custom-1 [tagged]")!;
    expect(rawHeaderValues(request, "x-tagged")).toEqual(["yes"]);
    expect(rawHeaderValues(request, "x-user-token")).toEqual(["alice-token-1"]);

    const warnings = logger.messages("warn");
    expect(warnings).toEqual(
      expect.arrayContaining([
        "Failed to load MCP interceptor './lib/interceptors.js:buildBroken'; skipping it: builder exploded",
        "MCP interceptor builder './lib/interceptors.js:buildNumber' returned a number, not a function; skipping it",
        "MCP interceptor './lib/interceptors.js:notABuilder': the module has no function export 'notABuilder'; skipping it",
        expect.stringMatching(/^Failed to load MCP interceptor '\.\/lib\/missing\.js:buildTagger'; skipping it: Cannot find module/),
        "MCP interceptor 'no-colon-here' is not of the form 'module:export'; skipping it",
      ]),
    );
    expect(warnings.some((w) => w.includes("buildNothing"))).toBe(false);
    expect(logger.messages("info")).toContain("Loaded MCP interceptor './lib/interceptors.js:buildTagger'");
  });

  test("an entry whose builder never finishes is skipped after interceptorLoadSeconds; the rest still run", async () => {
    const { toolkit, logger } = await toolkitWith(
      ["./lib/interceptors.js:buildHanging", "./lib/interceptors.js:buildTagger"],
      "extensions_config.json",
      { interceptorLoadSeconds: 0.2 },
    );
    const graph = toolNodeGraph(await toolkit.getTools());
    const message = await callThroughGraph(graph, "remote_echo", { text: "custom-hang" }, { context: { user_id: "alice" } });
    expect(message.content).toBe("custom-hang [tagged]");
    expect(logger.messages("warn")).toContain(
      "MCP interceptor './lib/interceptors.js:buildHanging': the builder did not finish within 0.2 s; skipping it",
    );
  });

  test("check loads an entry as startup does, with the same bound (30 s by default)", async () => {
    expect(DEFAULT_INTERCEPTOR_BUILD_TIMEOUT_MS).toBe(30_000);
    const configPath = path.join(dir, "extensions_config.json");
    const failure = await buildCustomInterceptor("./lib/interceptors.js:buildHanging", configPath, 100).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(InterceptorSpecError);
    expect((failure as InterceptorSpecError).reason).toBe("the builder did not finish within 0.1 s");
  });

  test("an ES module whose import outlasts the bound is skipped, and its builder is not called when the import ends", async () => {
    // Jest cannot import ES modules: a real node process does (the library through tsx).
    const work = await makeTempDir("mcp-custom-esm-");
    await writeFile(
      path.join(work, "slow.mjs"),
      "globalThis.built = 0;\nawait new Promise((resolve) => { globalThis.finishImport = resolve; });\n" +
        "export const build = () => { globalThis.built += 1; return async (request, next) => next(request); };\n",
    );
    await writeFile(path.join(work, "extensions_config.json"), "{}");
    const script = `
      const { pathToFileURL } = require("node:url");
      const { loadCustomInterceptors } = require(${JSON.stringify(path.resolve(__dirname, "../../lib/credentials"))});
      const warnings = [];
      const logger = { debug() {}, info() {}, warn: (m) => warnings.push(m), error() {} };
      (async () => {
        const loaded = await loadCustomInterceptors(["./slow.mjs:build"], ${JSON.stringify(path.join(work, "extensions_config.json"))}, logger, 100);
        // The bound may pass before the module even starts: wait until it waits, then let it finish.
        while (typeof globalThis.finishImport !== "function") await new Promise((resolve) => setTimeout(resolve, 10));
        globalThis.finishImport();
        await import(pathToFileURL(${JSON.stringify(path.join(work, "slow.mjs"))}).href);
        await new Promise((resolve) => setImmediate(resolve));
        process.stdout.write(JSON.stringify({ loaded: loaded.length, built: globalThis.built, warnings }));
      })();`;
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ["--require", TSX_CJS_REGISTER, "-e", script], { cwd: work }, (err, out) => (err ? reject(err) : resolve(out))),
    );
    expect(JSON.parse(stdout)).toEqual({
      loaded: 0,
      built: 0,
      warnings: ["MCP interceptor './slow.mjs:build': the module did not finish within 0.1 s; skipping it"],
    });
  });

  test("custom interceptors run innermost: they see the credential layers' headers, and their overrides win", async () => {
    const loaded = require(path.join(dir, "lib", "interceptors.js")) as { seen: string[][] };
    loaded.seen.length = 0;
    const { toolkit } = await toolkitWith(["./lib/interceptors.js:buildTagger", "./lib/interceptors.js:buildOverride"]);
    const graph = toolNodeGraph(await toolkit.getTools());
    await callThroughGraph(graph, "remote_echo", { text: "custom-2" }, { context: { user_id: "alice" } });
    expect(loaded.seen).toEqual([["X-User-Token"]]);
    // one header, under the spelling in use, with the interceptor's value
    expect(rawHeaderValues(findToolCall(http.requests, "custom-2 [tagged]")!, "x-user-token")).toEqual(["from-interceptor"]);
  });

  test("a single string is accepted as a one-entry list", async () => {
    const { toolkit } = await toolkitWith("./lib/interceptors.js:buildTagger");
    const message = await callThroughGraph(toolNodeGraph(await toolkit.getTools()), "remote_echo", { text: "custom-3" }, { context: { user_id: "alice" } });
    expect(message.content).toBe("custom-3 [tagged]");
  });

  test("they are frozen at startup: an edit makes getTools() fail and asks for a restart", async () => {
    const { toolkit, configPath } = await toolkitWith(["./lib/interceptors.js:buildTagger"], "frozen.json");
    await toolkit.getTools();
    await writeConfig(dir, { mcpServers: { remote: server({ description: "edited" }) }, mcpInterceptors: [] }, "frozen.json");
    await expect(toolkit.getTools()).rejects.toThrow(
      "mcpInterceptors changed since startup ('./lib/interceptors.js:buildTagger' → none); restart the process to apply the change",
    );
    await writeConfig(dir, { mcpServers: { remote: server({ description: "edited again" }) }, mcpInterceptors: ["./lib/interceptors.js:buildTagger"] }, "frozen.json");
    expect((await toolkit.getTools()).map((t) => t.name)).toEqual(["remote_echo"]);
    expect(configPath).toBe(path.join(dir, "frozen.json"));
  });
});
