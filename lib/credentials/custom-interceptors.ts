import { createRequire } from "node:module";
import * as nodePath from "node:path";
import { pathToFileURL } from "node:url";
import { DeadlineExceededError, withDeadline } from "../shared/deadline";
import type { Logger } from "../shared/logger";
import type { McpToolInterceptor } from "../shared/interceptor";
import { boundText } from "../shared/text";

const REASON_MAX_CHARS = 300;

/**
 * How long one entry may take to load: its module's import and its builder (a builder may fetch a secret first). One
 * that takes longer is skipped, so a hung builder holds neither the tools nor `check` for ever.
 */
export const DEFAULT_INTERCEPTOR_BUILD_TIMEOUT_MS = 30_000;

/** `mcpInterceptors` as the config holds it: one string, a list, or nothing. */
export function interceptorSpecs(value: string | readonly string[] | null | undefined): string[] {
  if (value === null || value === undefined) return [];
  return typeof value === "string" ? [value] : [...value];
}

// Compiled to CommonJS, `import()` would become `require()`; this keeps a real dynamic import for ES modules.
const importModule = new Function("specifier", "return import(specifier)") as (specifier: string) => Promise<unknown>;

/**
 * `require` of this module where there is one (the CommonJS build; under jest it is jest's, so tests share
 * the instance the toolkit loaded), else one made for the config's folder (the ES-module build has none).
 */
function requireFor(resolveFrom: NodeJS.Require): NodeJS.Require {
  return typeof require === "function" ? require : resolveFrom;
}

async function loadModule(resolved: string, load: NodeJS.Require): Promise<unknown> {
  try {
    return load(resolved) as unknown;
  } catch (err) {
    // Node 20 cannot require ES modules; Node 22+ can, except those with top-level await.
    const code = (err as { code?: unknown })?.code;
    if (code !== "ERR_REQUIRE_ESM" && code !== "ERR_REQUIRE_ASYNC_MODULE") throw err;
    return importModule(pathToFileURL(resolved).href);
  }
}

function exportOf(mod: unknown, name: string): unknown {
  if (typeof mod !== "object" && typeof mod !== "function") return undefined;
  const direct = (mod as Record<string, unknown>)[name];
  if (direct !== undefined) return direct;
  const fallback = (mod as { default?: unknown }).default;
  return typeof fallback === "object" && fallback !== null ? (fallback as Record<string, unknown>)[name] : undefined;
}

/** The first line of an error's message, bounded: module errors append a "Require stack" of local paths. */
function reasonOf(err: unknown): string {
  const message = (err as Error)?.message ?? String(err);
  return boundText(message.split(/\r?\n/, 1)[0] ?? "", REASON_MAX_CHARS);
}

/** An `mcpInterceptors` entry that cannot be used; `message` names the entry, never a value. */
export class InterceptorSpecError extends Error {
  constructor(
    readonly spec: string,
    /** Why, without the entry's name: "the module cannot be resolved: Cannot find module './x.js'". */
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = "InterceptorSpecError";
  }
}

export interface ResolvedInterceptorSpec {
  spec: string;
  moduleName: string;
  exportName: string;
  /** The module file the entry names. */
  path: string;
}

/**
 * Splits a `"module:export"` entry and resolves its module relative to the config file (a relative path,
 * or a package visible from the config's folder; the working directory when there is no file). Throws an
 * `InterceptorSpecError` when the entry is malformed or the module cannot be found. Nothing is loaded.
 */
export function resolveInterceptorSpec(spec: string, configPath: string | null): ResolvedInterceptorSpec {
  const colon = spec.lastIndexOf(":");
  if (colon <= 0 || colon === spec.length - 1) {
    throw new InterceptorSpecError(
      spec,
      "not of the form 'module:export'",
      `MCP interceptor '${spec}' is not of the form 'module:export'; skipping it`,
    );
  }
  const moduleName = spec.slice(0, colon);
  const exportName = spec.slice(colon + 1);
  const anchor = configPath ?? nodePath.join(process.cwd(), "extensions_config.json");
  try {
    return { spec, moduleName, exportName, path: createRequire(anchor).resolve(moduleName) };
  } catch (err) {
    const reason = reasonOf(err);
    throw new InterceptorSpecError(spec, `the module cannot be resolved: ${reason}`, `Failed to load MCP interceptor '${spec}'; skipping it: ${reason}`);
  }
}

/**
 * Loads one entry as startup does: resolve, import, call the builder. Returns the interceptor, or `null`
 * when the builder returned nothing; throws an `InterceptorSpecError` for everything that skips the entry.
 */
export async function buildCustomInterceptor(
  spec: string,
  configPath: string | null,
  timeoutMs: number = DEFAULT_INTERCEPTOR_BUILD_TIMEOUT_MS,
): Promise<McpToolInterceptor | null> {
  const resolved = resolveInterceptorSpec(spec, configPath);
  let builder: unknown;
  let interceptor: unknown;
  try {
    interceptor = await withDeadline(async (signal) => {
      const loaded = await loadModule(resolved.path, requireFor(createRequire(resolved.path)));
      // An import that finished after the entry was skipped: its builder is never called.
      if (signal.aborted) return null;
      builder = exportOf(loaded, resolved.exportName);
      if (typeof builder !== "function") {
        throw new InterceptorSpecError(
          spec,
          `the module has no function export '${resolved.exportName}'`,
          `MCP interceptor '${spec}': the module has no function export '${resolved.exportName}'; skipping it`,
        );
      }
      return (builder as () => unknown)();
    }, timeoutMs);
  } catch (err) {
    if (err instanceof InterceptorSpecError) throw err;
    if (err instanceof DeadlineExceededError) {
      const stage = typeof builder === "function" ? "the builder" : "the module";
      const reason = `${stage} did not finish within ${err.timeoutMs / 1000} s`;
      throw new InterceptorSpecError(spec, reason, `MCP interceptor '${spec}': ${reason}; skipping it`);
    }
    const reason = reasonOf(err);
    const stage = typeof builder === "function" ? "the builder failed" : "the module cannot be loaded";
    throw new InterceptorSpecError(spec, `${stage}: ${reason}`, `Failed to load MCP interceptor '${spec}'; skipping it: ${reason}`);
  }
  if (interceptor === null || interceptor === undefined) return null;
  if (typeof interceptor !== "function") {
    throw new InterceptorSpecError(
      spec,
      `the builder returned a ${typeof interceptor}, not a function`,
      `MCP interceptor builder '${spec}' returned a ${typeof interceptor}, not a function; skipping it`,
    );
  }
  return interceptor as McpToolInterceptor;
}

/**
 * Loads the custom interceptors of `mcpInterceptors` (SPEC §4.2): each entry is `"module:export"`, the
 * module resolved relative to the config file (a relative path, or a package visible from there); the export
 * is a builder called with no arguments that returns an interceptor, or `null` to contribute nothing.
 * An entry that fails to load, or takes longer than `timeoutMs`, is logged and skipped; the others still load.
 */
export async function loadCustomInterceptors(
  specs: readonly string[],
  configPath: string | null,
  logger: Logger,
  timeoutMs: number = DEFAULT_INTERCEPTOR_BUILD_TIMEOUT_MS,
): Promise<McpToolInterceptor[]> {
  const loaded: McpToolInterceptor[] = [];
  for (const spec of specs) {
    try {
      const interceptor = await buildCustomInterceptor(spec, configPath, timeoutMs);
      if (interceptor === null) {
        logger.debug(`MCP interceptor builder '${spec}' returned nothing; skipping it`);
      } else {
        loaded.push(interceptor);
        logger.info(`Loaded MCP interceptor '${spec}'`);
      }
    } catch (err) {
      if (!(err instanceof InterceptorSpecError)) throw err;
      logger.warn(err.message);
    }
  }
  return loaded;
}
