import { createRequire } from "node:module";
import * as nodePath from "node:path";
import { pathToFileURL } from "node:url";
import type { Logger } from "../shared/logger";
import type { McpToolInterceptor } from "../shared/interceptor";
import { boundText } from "../shared/text";

const REASON_MAX_CHARS = 300;

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

/**
 * Loads the custom interceptors of `mcpInterceptors` (SPEC §4.2): each entry is `"module:export"`, the
 * module resolved relative to the config file (a relative path, or a package visible from there); the export
 * is a builder called with no arguments that returns an interceptor, or `null` to contribute nothing.
 * An entry that fails to load is logged and skipped; the others still load.
 */
export async function loadCustomInterceptors(
  specs: readonly string[],
  configPath: string | null,
  logger: Logger,
): Promise<McpToolInterceptor[]> {
  if (specs.length === 0) return [];
  const anchor = configPath ?? nodePath.join(process.cwd(), "extensions_config.json");
  const resolveFrom = createRequire(anchor);
  const loaded: McpToolInterceptor[] = [];
  for (const spec of specs) {
    const colon = spec.lastIndexOf(":");
    if (colon <= 0 || colon === spec.length - 1) {
      logger.warn(`MCP interceptor '${spec}' is not of the form 'module:export'; skipping it`);
      continue;
    }
    const moduleName = spec.slice(0, colon);
    const exportName = spec.slice(colon + 1);
    try {
      const builder = exportOf(await loadModule(resolveFrom.resolve(moduleName), requireFor(resolveFrom)), exportName);
      if (typeof builder !== "function") {
        logger.warn(`MCP interceptor '${spec}': the module has no function export '${exportName}'; skipping it`);
        continue;
      }
      const interceptor: unknown = await (builder as () => unknown)();
      if (interceptor === null || interceptor === undefined) {
        logger.debug(`MCP interceptor builder '${spec}' returned nothing; skipping it`);
      } else if (typeof interceptor !== "function") {
        logger.warn(`MCP interceptor builder '${spec}' returned a ${typeof interceptor}, not a function; skipping it`);
      } else {
        loaded.push(interceptor as McpToolInterceptor);
        logger.info(`Loaded MCP interceptor '${spec}'`);
      }
    } catch (err) {
      const reason = boundText((err as Error)?.message ?? String(err), REASON_MAX_CHARS);
      logger.warn(`Failed to load MCP interceptor '${spec}'; skipping it: ${reason}`);
    }
  }
  return loaded;
}
