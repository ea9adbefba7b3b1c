import { afterEach, beforeEach, describe, expect, it } from "@jest/globals";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import {
  ConfigJsonSyntaxError,
  ConfigValidationError,
  formatIssuePath,
  loadExtensionsConfig,
} from "../../lib/config";
import { silentLogger } from "../../lib/shared/logger";

describe("formatIssuePath", () => {
  it("renders identifiers with dots, indexes and other keys in brackets", () => {
    expect(formatIssuePath(["mcpServers", "github", "args", 1])).toBe("mcpServers.github.args[1]");
    expect(formatIssuePath(["mcpServers", "my server", "url"])).toBe('mcpServers["my server"].url');
    expect(formatIssuePath(["mcpServers", "long-running-reports", "task_toolsets", 0, "name"])).toBe(
      'mcpServers["long-running-reports"].task_toolsets[0].name',
    );
    expect(formatIssuePath(["a\"b"])).toBe('["a\\"b"]');
    expect(formatIssuePath([])).toBe("(root)");
  });

  it("shows keys from the user's file escaped to printable ASCII and cut to 64 characters", () => {
    expect(formatIssuePath(["mcpServers", "line\nbreak", "url"])).toBe('mcpServers["line\\nbreak"].url');
    expect(formatIssuePath(["mcpServers", "\u001b[31mred\u202e\u0000"])).toBe('mcpServers["\\u001b[31mred\\u202e\\u0000"]');
    expect(formatIssuePath(["mcpServers", "é"])).toBe('mcpServers["\\u00e9"]');
    const long = "k".repeat(65);
    expect(formatIssuePath(["mcpServers", long])).toBe(`mcpServers["${"k".repeat(64)}…"]`);
    expect(formatIssuePath(["mcpServers", "k".repeat(64)])).toBe(`mcpServers.${"k".repeat(64)}`);
    expect(formatIssuePath(["a", "x\n".repeat(1000)]).length).toBeLessThan(200);
  });

  it("shows a header name as header errors do: up to its first invalid character", () => {
    expect(formatIssuePath(["mcpServers", "s", "headers", "Authorization: Bearer sk-live-ABCDEF"])).toBe('mcpServers.s.headers["Authorization…"]');
    expect(formatIssuePath(["mcpServers", "s", "headers_from_context", "headers", "X-Key"])).toBe('mcpServers.s.headers_from_context.headers["X-Key"]');
    expect(formatIssuePath(["mcpServers", "s", "env", "Authorization: Bearer x"])).toBe('mcpServers.s.env["Authorization: Bearer x"]');
  });
});

describe("invalid JSON", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "cfg-json-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function loadText(text: string | Buffer): Promise<ConfigJsonSyntaxError> {
    const file = path.join(dir, "extensions_config.json");
    await writeFile(file, text);
    const error = await loadExtensionsConfig({ configPath: file, env: {}, logger: silentLogger }).then(
      () => {
        throw new Error("expected a syntax error");
      },
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(ConfigJsonSyntaxError);
    expect(error).toBeInstanceOf(ConfigValidationError);
    return error as ConfigJsonSyntaxError;
  }

  it("names the file and the position, not the content", async () => {
    const error = await loadText('{\n  "mcpServers": {\n    "x": { "headers": { "A": ghp_SECRETTOKEN123 } }\n  }\n}');
    expect(error.message).toContain(path.join(dir, "extensions_config.json"));
    expect(error.message).toContain("line 3 column 30");
    expect(error.position).toBe(49);
    expect(error.message).not.toContain("ghp_");
    expect(error.message).not.toContain("SECRET");
    expect(JSON.stringify(error.issues)).not.toContain("SECRET");
  });

  it("reports trailing commas, unterminated strings and end of input", async () => {
    expect((await loadText('{"a": 1,}')).reason).toBe("expected a property name in double quotes");
    expect((await loadText('{"a": "sk-SECRET')).reason).toBe("unterminated string");
    expect((await loadText('{"a": ')).reason).toBe("unexpected end of input");
    expect((await loadText("")).reason).toBe("unexpected end of input");
    const trailing = await loadText('{"a": 1} sk-SECRET');
    expect(trailing.reason).toBe("unexpected content after the JSON value");
    expect(trailing.message).not.toContain("SECRET");
  });

  it("refuses bytes that are not UTF-8, naming where, instead of replacing them", async () => {
    const file = path.join(dir, "extensions_config.json");
    const latin1 = Buffer.concat([Buffer.from('\ufeff{"mcpServers": {\n  "x": {"command": "\u00e9\ud83d\ude00', "utf8"), Buffer.from([0x4a, 0xfc, 0x72]), Buffer.from('g"}}}')]);
    await writeFile(file, latin1);
    const error = await loadExtensionsConfig({ configPath: file, env: {}, logger: silentLogger }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ConfigJsonSyntaxError);
    // The byte-order mark is not counted; é and the emoji (one and two UTF-16 units) are.
    expect((error as ConfigJsonSyntaxError).message).toContain("invalid UTF-8 at line 2 column 25 (position 41)");
  });

  it.each([
    ["a lone continuation byte", [0x80]],
    ["an overlong encoding", [0xc0, 0xaf]],
    ["an overlong three-byte encoding", [0xe0, 0x80, 0xaf]],
    ["a UTF-16 surrogate", [0xed, 0xa0, 0x80]],
    ["a value past U+10FFFF", [0xf4, 0x90, 0x80, 0x80]],
    ["a sequence cut by the end of the file", [0xe2, 0x82]],
  ])("refuses %s at its position", async (_what, bad) => {
    const error = await loadText(Buffer.concat([Buffer.from('{"a": "ok'), Buffer.from(bad), Buffer.from('"}')]));
    expect(error.reason).toBe("invalid UTF-8");
    expect(error.position).toBe(9);
  });

  it("accepts a leading byte-order mark", async () => {
    const file = path.join(dir, "bom.json");
    await writeFile(file, '\ufeff{"mcpServers": {}}');
    const loaded = await loadExtensionsConfig({ configPath: file, env: {}, logger: silentLogger });
    expect(loaded.config.mcpServers).toEqual({});
  });

  it.each([
    ["array", (depth: number) => `{"mcpServers": {"deep": {"command": "x", "args": ${"[".repeat(depth)}${"]".repeat(depth)}}}}`],
    ["object", (depth: number) => `{"mcpServers": {"deep": {"command": "x", "env": ${'{"a":'.repeat(depth)}1${"}".repeat(depth)}}}}`],
  ])("refuses a 100000-deep %s with a validation error naming where the 64-level limit was hit", async (_kind, doc) => {
    const file = path.join(dir, "deep.json");
    await writeFile(file, doc(100_000));
    const error = await loadExtensionsConfig({ configPath: file, env: {}, logger: silentLogger }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ConfigValidationError);
    const { issues } = error as ConfigValidationError;
    // levels 1-3 are the document, mcpServers and the server; the value is level 4, its 61st descendant level 65
    const inside = _kind === "array" ? "args" + "[0]".repeat(61) : "env" + ".a".repeat(61);
    expect(issues).toEqual([{ path: `mcpServers.deep.${inside}`, message: "nested deeper than 64 levels" }]);
    expect((error as Error).message).toContain(file);
  });

  it("an unclosed document nested 200000 deep is refused where the 64-level limit was hit, not as a bare syntax error", async () => {
    const error = await loadText(`{"mcpServers": ${"[".repeat(200_000)}`);
    expect(error.reason).toBe("nested deeper than 64 levels");
    expect(error.position).toBe(15 + 63);
  });

  it("accepts 64 levels", async () => {
    const file = path.join(dir, "deep.json");
    await writeFile(file, `{"mcpServers": {"deep": {"command": "x", "args": [], "x": ${"[".repeat(61)}${"]".repeat(61)}}}}`);
    const loaded = await loadExtensionsConfig({ configPath: file, env: {}, logger: silentLogger });
    expect(loaded.config.mcpServers.deep?.command).toBe("x");
  });

  it("rejects a document that is not an object", async () => {
    const file = path.join(dir, "array.json");
    await writeFile(file, "[]");
    await expect(loadExtensionsConfig({ configPath: file, env: {}, logger: silentLogger })).rejects.toThrow(
      /\(root\): expected a JSON object/,
    );
  });
});
