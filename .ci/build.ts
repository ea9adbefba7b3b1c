/**
 * `npm run build` (and `prepare`): the dual package, from lib/ with the TypeScript compiler API.
 *
 *   dist/esm  ES modules: `.js` + `.d.ts`, with a `{"type":"module"}` package.json  (`import` condition)
 *   dist/cjs  CommonJS:   `.cjs` + `.d.cts`                                          (`require` condition)
 *
 * Each build has its own declarations, so a user's TypeScript resolves `@langchain/core` in the same
 * module format as their own code (one format for both sides is what makes `createAgent({ tools })`
 * fail to type-check with TS2769 in an ES-module project).
 *
 * Plain `tsc` cannot emit these: the sources import relative modules without an extension (`./config`),
 * which ES modules must spell out (`./config/index.js`), and a CommonJS build whose files end in `.cjs`
 * must `require("./config/index.cjs")`. Transformers rewrite the relative specifiers of both the code and
 * the declarations; in the ES-module build `__dirname`/`__filename` become `import.meta.dirname`/
 * `import.meta.filename`. Both builds are written to a temporary folder and swapped into dist/ at the
 * end, so a concurrent reader (a test packing the package) never sees half a build.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as ts from "typescript";

const ROOT = path.resolve(__dirname, "..");
const LIB = path.join(ROOT, "lib");
const DIST = path.join(ROOT, "dist");

interface Flavor {
  readonly name: "esm" | "cjs";
  readonly packageType: "module" | "commonjs";
  readonly jsExt: ".js" | ".cjs";
  readonly dtsExt: ".d.ts" | ".d.cts";
  readonly options: ts.CompilerOptions;
}

const FLAVORS: readonly Flavor[] = [
  {
    name: "esm",
    packageType: "module",
    jsExt: ".js",
    dtsExt: ".d.ts",
    options: { module: ts.ModuleKind.ES2022, moduleResolution: ts.ModuleResolutionKind.Bundler },
  },
  {
    name: "cjs",
    packageType: "commonjs",
    jsExt: ".cjs",
    dtsExt: ".d.cts",
    // The repository's package.json has no "type", so Node16 makes every source file CommonJS.
    options: { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 },
  },
];

function isRelative(specifier: string): boolean {
  // The compiler writes a folder's index as "." or ".." in declarations it infers (`import("..").TaskStatus`).
  return specifier === "." || specifier === ".." || specifier.startsWith("./") || specifier.startsWith("../");
}

/** `./config` → `./config/index.js`, `./load` → `./load.cjs`; bare specifiers are left alone. */
function rewriteSpecifier(specifier: string, fromFile: string, ext: string): string {
  if (!isRelative(specifier)) return specifier;
  const stem = specifier.replace(/\.(js|ts)$/, "");
  const target = path.resolve(path.dirname(fromFile), stem);
  if (fs.existsSync(`${target}.ts`)) return `${stem}${ext}`;
  if (fs.existsSync(path.join(target, "index.ts"))) return `${stem}/index${ext}`;
  throw new Error(`${path.relative(ROOT, fromFile)}: cannot resolve '${specifier}' to a source file under lib/`);
}

const RELATIVE_SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*)["'](\.\.?(?:\/[^"']*)?)["']/g;

/** A relative specifier the transformer missed would not resolve for users (ES modules need the file's extension). */
function assertSpecifiersRewritten(fileName: string, text: string, ext: string): void {
  for (const match of text.matchAll(RELATIVE_SPECIFIER)) {
    if (!match[1].endsWith(ext)) throw new Error(`${path.relative(ROOT, fileName)}: relative specifier '${match[1]}' was not rewritten`);
  }
}

function stringLiteralText(node: ts.Node | undefined): string | undefined {
  return node !== undefined && ts.isStringLiteral(node) ? node.text : undefined;
}

/** Rewrites the relative module specifiers of imports, exports, `require()`, `import()` and `import("…")` types. */
function specifierTransformer(ext: string) {
  return (context: ts.TransformationContext) =>
    <T extends ts.SourceFile | ts.Bundle>(root: T): T => {
      if (!ts.isSourceFile(root)) return root;
      const f = context.factory;
      const fileName = root.fileName;
      const fix = (text: string) => f.createStringLiteral(rewriteSpecifier(text, fileName, ext));
      const visit = (node: ts.Node): ts.Node => {
        if (ts.isImportDeclaration(node)) {
          const text = stringLiteralText(node.moduleSpecifier);
          if (text !== undefined && isRelative(text)) {
            return f.updateImportDeclaration(node, node.modifiers, node.importClause, fix(text), node.attributes);
          }
        } else if (ts.isExportDeclaration(node)) {
          const text = stringLiteralText(node.moduleSpecifier);
          if (text !== undefined && isRelative(text)) {
            return f.updateExportDeclaration(node, node.modifiers, node.isTypeOnly, node.exportClause, fix(text), node.attributes);
          }
        } else if (ts.isCallExpression(node) && node.arguments.length === 1) {
          const text = stringLiteralText(node.arguments[0]);
          const callee = node.expression;
          const isLoader =
            callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === "require");
          if (isLoader && text !== undefined && isRelative(text)) {
            return f.updateCallExpression(node, callee, node.typeArguments, [fix(text)]);
          }
        } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
          const text = stringLiteralText(node.argument.literal);
          if (text !== undefined && isRelative(text)) {
            const argument = f.updateLiteralTypeNode(node.argument, fix(text));
            const updated = f.updateImportTypeNode(node, argument, node.attributes, node.qualifier, node.typeArguments, node.isTypeOf);
            return ts.visitEachChild(updated, visit, context);
          }
        } else if (ts.isExternalModuleReference(node)) {
          const text = stringLiteralText(node.expression);
          if (text !== undefined && isRelative(text)) return f.updateExternalModuleReference(node, fix(text));
        }
        return ts.visitEachChild(node, visit, context);
      };
      return ts.visitNode(root, visit) as T;
    };
}

/** ES modules have no `__dirname`/`__filename`; Node ≥ 20.11 has `import.meta.dirname`/`filename`. */
function importMetaTransformer(context: ts.TransformationContext) {
  const f = context.factory;
  const META: Record<string, string> = { __dirname: "dirname", __filename: "filename" };
  return (file: ts.SourceFile): ts.SourceFile => {
    const visit = (node: ts.Node): ts.Node => {
      if (ts.isIdentifier(node) && Object.hasOwn(META, node.text)) {
        const parent = node.parent as ts.Node | undefined;
        // Not when it names something (`x.__dirname`, `{ __dirname: … }`, `const __dirname = …`).
        const isName = parent !== undefined && (parent as { name?: ts.Node }).name === node;
        if (!isName) {
          const importMeta = f.createMetaProperty(ts.SyntaxKind.ImportKeyword, f.createIdentifier("meta"));
          return f.createPropertyAccessExpression(importMeta, META[node.text]);
        }
      }
      return ts.visitEachChild(node, visit, context);
    };
    return ts.visitNode(file, visit) as ts.SourceFile;
  };
}

function baseConfig(): ts.ParsedCommandLine {
  const host: ts.ParseConfigFileHost = {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
    },
  };
  const parsed = ts.getParsedCommandLineOfConfigFile(path.join(LIB, "tsconfig.json"), {}, host);
  if (!parsed) throw new Error("cannot read lib/tsconfig.json");
  return parsed;
}

const formatHost: ts.FormatDiagnosticsHost = {
  getCanonicalFileName: (fileName) => fileName,
  getCurrentDirectory: () => ROOT,
  getNewLine: () => "\n",
};

function build(flavor: Flavor, base: ts.ParsedCommandLine, outDir: string): void {
  const options: ts.CompilerOptions = {
    ...base.options,
    ...flavor.options,
    rootDir: LIB,
    outDir,
    noEmit: false,
    declaration: true,
    sourceMap: false,
    declarationMap: false,
    incremental: false,
    tsBuildInfoFile: undefined,
  };
  const program = ts.createProgram({ rootNames: base.fileNames, options });
  const writeFile: ts.WriteFileCallback = (fileName, text) => {
    assertSpecifiersRewritten(fileName, text, flavor.jsExt);
    let target = fileName;
    if (target.endsWith(".d.ts")) target = target.slice(0, -".d.ts".length) + flavor.dtsExt;
    else if (target.endsWith(".js")) target = target.slice(0, -".js".length) + flavor.jsExt;
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, text);
  };
  const transformers: ts.CustomTransformers = {
    before: flavor.name === "esm" ? [importMetaTransformer] : [],
    after: [specifierTransformer(flavor.jsExt)],
    afterDeclarations: [specifierTransformer(flavor.jsExt)],
  };
  const emitted = program.emit(undefined, writeFile, undefined, false, transformers);
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics];
  if (diagnostics.length > 0) {
    process.stderr.write(ts.formatDiagnosticsWithColorAndContext(diagnostics, formatHost));
    throw new Error(`the ${flavor.name} build has ${diagnostics.length} error(s)`);
  }
  fs.writeFileSync(path.join(outDir, "package.json"), `${JSON.stringify({ type: flavor.packageType }, null, 2)}\n`);
}

function main(): void {
  const base = baseConfig();
  const staging = path.join(ROOT, `.dist-staging-${process.pid}`);
  fs.rmSync(staging, { recursive: true, force: true });
  try {
    for (const flavor of FLAVORS) build(flavor, base, path.join(staging, flavor.name));
    fs.chmodSync(path.join(staging, "cjs", "cli", "main.cjs"), 0o755);
    const retired = path.join(ROOT, `.dist-retired-${process.pid}`);
    if (fs.existsSync(DIST)) fs.renameSync(DIST, retired);
    fs.renameSync(staging, DIST);
    fs.rmSync(retired, { recursive: true, force: true });
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

try {
  main();
} catch (error) {
  process.stderr.write(`build: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
