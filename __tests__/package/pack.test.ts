/**
 * The package as a user gets it: `npm pack` (which runs the dual build), the tarball unpacked into a
 * temporary ES-module project and a temporary CommonJS project, each with TypeScript `NodeNext`.
 * In both, `tsc` must type-check (and compile) the README's minimal agent and its offline-testing
 * example, and both must run, with the scripted model from `langgraph-mcp-harness/testing` instead of
 * a provider and the test MCP server as a stdio child or in-process over HTTP.
 *
 * Offline: the projects get no `npm install`. Their node_modules hold the unpacked tarball and links to
 * this repository's installed copies of exactly the packages the tarball declares (dependencies and
 * peer dependencies), plus typescript and @types/node as a user's dev tools. The unpacked package can
 * therefore only load what it declares, and the user's code and the package share one @langchain/core.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { execFile, execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");
const NODE_MODULES = path.join(ROOT, "node_modules");
const PACKAGE = "langgraph-mcp-harness";
const RUN_TIMEOUT_MS = 300_000;

jest.setTimeout(600_000);

interface Manifest {
  name: string;
  type?: string;
  main?: string;
  types?: string;
  bin?: Record<string, string>;
  exports: Record<string, unknown>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

function run(command: string, args: readonly string[], cwd: string): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { cwd, encoding: "utf8", maxBuffer: 64 * 1024 * 1024, timeout: RUN_TIMEOUT_MS, env: { ...process.env, NO_COLOR: "1" } },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout, stderr: error && code === 1 && !stderr ? String(error) : stderr });
      },
    );
  });
}

function expectSuccess(result: RunResult, what: string): void {
  if (result.code !== 0) {
    throw new Error(`${what} exited with ${result.code}\n--- stdout ---\n${result.stdout}\n--- stderr ---\n${result.stderr}`);
  }
}

function tarAvailable(): boolean {
  try {
    execFileSync("tar", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** The first ```ts block after `heading` in the README. */
function readmeBlock(heading: string): string {
  const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
  const at = readme.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`README.md has no section '${heading}'`);
  const match = /```ts\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!match) throw new Error(`README.md section '${heading}' has no ts block`);
  return match[1];
}

function replaceOnce(text: string, search: string, replacement: string, where: string): string {
  if (!text.includes(search)) throw new Error(`${where} no longer contains ${JSON.stringify(search)}; update this test`);
  return text.replace(search, replacement);
}

/**
 * One program for either module format: the imports first, then the rest as top-level code (ESM,
 * as the README shows it) or inside an async main (CommonJS has no top-level await).
 */
function program(kind: "esm" | "cjs", imports: string[], body: string): string {
  const lines = body.split("\n");
  const importLines = [...imports, ...lines.filter((line) => line.startsWith("import "))];
  const code = lines.filter((line) => !line.startsWith("import ")).join("\n");
  if (kind === "esm") return `${importLines.join("\n")}\n\n${code}\n`;
  const indented = code.replace(/^(?=.)/gm, "  ");
  return `${importLines.join("\n")}\n\nasync function main(): Promise<void> {\n${indented}\n}\n\nmain().catch((error: unknown) => {\n  console.error(error);\n  process.exit(1);\n});\n`;
}

/** The README's minimal agent, with the offline model and a test stdio server instead of a provider and real servers. */
function minimalAgentProgram(kind: "esm" | "cjs"): string {
  const where = "README.md's minimal agent";
  let body = readmeBlock("## A minimal agent");
  body = replaceOnce(body, 'model: "openai:gpt-4o-mini",', "model: scriptedModel,", where);
  body = replaceOnce(body, "await toolkit.close();", "await toolkit.close();\nconsole.log(`ANSWER ${result.messages.at(-1)?.text}`);", where);
  const setup = [
    "// test set-up: a config with the test stdio server and one CommonJS and one ES-module interceptor",
    'writeFileSync("./extensions_config.json", JSON.stringify({',
    '  mcpServers: { demo: testStdioServer({ name: "demo" }) },',
    '  mcpInterceptors: ["./interceptors/tag.cjs:buildTag", "./interceptors/tag.mjs:buildTag"],',
    "}));",
    'const scriptedModel = new ScriptedChatModel([ScriptedChatModel.toolCall("demo_echo", { text: "hi" })], { fallback: demoPolicy });',
    "",
  ].join("\n");
  return program(
    kind,
    ['import { writeFileSync } from "node:fs";', `import { ScriptedChatModel, demoPolicy, testStdioServer } from "${PACKAGE}/testing";`],
    `${setup}${body}`,
  );
}

const INTERCEPTOR_CJS = `exports.buildTag = () => async (request, next) =>
  next(request.override({ args: { ...request.args, text: request.args.text + " +cjs" } }));
`;
const INTERCEPTOR_MJS = `export const buildTag = () => async (request, next) =>
  next(request.override({ args: { ...request.args, text: request.args.text + " +mjs" } }));
`;

/**
 * With skipLibCheck, a declaration whose import does not resolve silently becomes a type that accepts
 * anything. Each assignment below must be a type error; if one of the types (some only reachable through
 * a relative import inside the package's declarations) accepts the number, the unused
 * \`@ts-expect-error\` fails the compile.
 */
const TYPES_PROGRAM = `import type { McpToolkit, McpToolkitOptions, McpToolInterceptor, ExtensionsConfig } from "${PACKAGE}";
import type { ScriptedChatModel, TestMcpHttpServer, TestStdioServerConfig } from "${PACKAGE}/testing";

// @ts-expect-error
export const probe1: McpToolkit = 0;
// @ts-expect-error
export const probe2: Awaited<ReturnType<McpToolkit["getTools"]>>[number] = 0;
// @ts-expect-error
export const probe3: NonNullable<McpToolkitOptions["logger"]> = 0;
// @ts-expect-error
export const probe4: McpToolInterceptor = 0;
// @ts-expect-error
export const probe5: ExtensionsConfig["mcpServers"][string] = 0;
// @ts-expect-error
export const probe6: ScriptedChatModel = 0;
// @ts-expect-error
export const probe7: TestMcpHttpServer["calls"][number] = 0;
// @ts-expect-error
export const probe8: TestStdioServerConfig = 0;
`;

let work: string;
let packed: string;
let manifest: Manifest;
let tarballFiles: string[];
const HAVE_TAR = tarAvailable();

function linkInstalled(projectModules: string, name: string): void {
  const source = path.join(NODE_MODULES, name);
  if (!existsSync(source)) throw new Error(`${name} is not installed in ${NODE_MODULES}; run npm ci first`);
  const target = path.join(projectModules, name);
  mkdirSync(path.dirname(target), { recursive: true });
  symlinkSync(source, target, "dir");
}

function makeProject(kind: "esm" | "cjs"): string {
  const dir = path.join(work, kind);
  const modules = path.join(dir, "node_modules");
  mkdirSync(path.join(dir, "src"), { recursive: true });
  mkdirSync(path.join(dir, "interceptors"), { recursive: true });
  cpSync(packed, path.join(modules, PACKAGE), { recursive: true });
  const declared = [...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.peerDependencies ?? {})];
  for (const name of new Set([...declared, "typescript", "@types/node"])) linkInstalled(modules, name);

  writeFileSync(
    path.join(dir, "package.json"),
    JSON.stringify({ name: `user-${kind}`, private: true, type: kind === "esm" ? "module" : "commonjs" }, null, 2),
  );
  writeFileSync(
    path.join(dir, "tsconfig.json"),
    JSON.stringify(
      {
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          // Every declaration file is checked, the package's own included (an import in them that does not resolve is an
          // error here; with skipLibCheck it would silently be \`any\`, which types.ts below also catches).
          skipLibCheck: false,
          types: ["node"],
          rootDir: "src",
          outDir: "out",
        },
        include: ["src"],
      },
      null,
      2,
    ),
  );
  writeFileSync(path.join(dir, "interceptors", "tag.cjs"), INTERCEPTOR_CJS);
  writeFileSync(path.join(dir, "interceptors", "tag.mjs"), INTERCEPTOR_MJS);
  writeFileSync(path.join(dir, "src", "agent.ts"), minimalAgentProgram(kind));
  writeFileSync(path.join(dir, "src", "testing.ts"), program(kind, [], readmeBlock("## Testing your graphs offline")));
  writeFileSync(path.join(dir, "src", "types.ts"), TYPES_PROGRAM);
  return dir;
}

const describeWithTar = HAVE_TAR ? describe : describe.skip;
if (!HAVE_TAR) process.stdout.write("pack.test: skipped, no `tar` on PATH to unpack the npm tarball\n");

describeWithTar("the packed package in user projects", () => {
  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), "mcp-harness-pack-"));
    const pack = await run("npm", ["pack", "--json", "--pack-destination", work], ROOT);
    expectSuccess(pack, "npm pack");
    const [info] = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[] }[];
    tarballFiles = info.files.map((f) => f.path);
    expectSuccess(await run("tar", ["-xzf", path.join(work, info.filename), "-C", work], ROOT), "tar");
    packed = path.join(work, "package");
    manifest = JSON.parse(readFileSync(path.join(packed, "package.json"), "utf8")) as Manifest;
  });

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("declares LangChain as peer dependencies and ships an ESM and a CJS build with types for each", () => {
    const peers = ["@langchain/core", "@langchain/langgraph", "langchain"];
    for (const peer of peers) {
      expect(manifest.peerDependencies?.[peer]).toBeDefined();
      expect(manifest.dependencies?.[peer]).toBeUndefined();
    }
    const entry = (sub: string) => ({
      import: { types: `./dist/esm/${sub}.d.ts`, default: `./dist/esm/${sub}.js` },
      require: { types: `./dist/cjs/${sub}.d.cts`, default: `./dist/cjs/${sub}.cjs` },
    });
    expect(manifest.exports["."]).toEqual(entry("index"));
    expect(manifest.exports["./testing"]).toEqual(entry("testing/index"));
    const targets = [
      ...Object.values(manifest.exports).flatMap((value) =>
        typeof value === "string" ? [value] : Object.values(value as Record<string, Record<string, string>>).flatMap((c) => Object.values(c)),
      ),
      manifest.main,
      manifest.types,
      ...Object.values(manifest.bin ?? {}),
    ].filter((target): target is string => target !== undefined);
    for (const target of targets) expect(tarballFiles).toContain(path.normalize(target));
    expect(readFileSync(path.join(packed, "dist", "esm", "package.json"), "utf8")).toContain('"module"');
    expect(tarballFiles.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))).toEqual([]);
    expect(tarballFiles).toEqual(expect.arrayContaining(["extensions_config.example.json", "graphs/demo/audit-interceptor.js"]));
  });

  for (const kind of ["esm", "cjs"] as const) {
    it(`${kind.toUpperCase()} project: tsc type-checks the README examples, and they run offline`, async () => {
      const dir = makeProject(kind);
      expectSuccess(await run(process.execPath, [path.join(dir, "node_modules", "typescript", "bin", "tsc"), "-p", dir], dir), `tsc (${kind})`);

      const agent = await run(process.execPath, [path.join("out", "agent.js")], dir);
      expectSuccess(agent, `the minimal agent (${kind})`);
      // the scripted model called demo_echo; both interceptors (CJS and ESM modules) changed the arguments
      expect(agent.stdout).toContain("ANSWER Tool demo_echo returned: hi +cjs +mjs");

      const testing = await run(process.execPath, [path.join("out", "testing.js")], dir);
      expectSuccess(testing, `the offline-testing example (${kind})`);
      expect(testing.stdout).toContain("Tool crm_add returned: 5");
      expect(testing.stdout).toContain("x-api-key");
      expect(testing.stdout).toContain("ToolNode: hi");

      if (kind === "cjs") {
        const bin = manifest.bin?.["mcp-harness"];
        expect(bin).toBeDefined();
        const tools = await run(process.execPath, [path.join("node_modules", PACKAGE, bin!), "tools", "extensions_config.json"], dir);
        expectSuccess(tools, "mcp-harness tools");
        expect(tools.stdout).toContain("demo_echo");
      }
    });
  }
});
