import { ConfigFileNotFoundError, ConfigValidationError, loadExtensionsConfig } from "../config";
import { RecordingLogger } from "../shared/logger";
import { createMcpToolkit, getMcpRouting, getMcpToolRecord } from "../mcp";
import { renderTable } from "./table";

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

interface Parsed {
  positional: string[];
  json: boolean;
}

function parse(args: readonly string[]): Parsed {
  return { positional: args.filter((a) => !a.startsWith("--")), json: args.includes("--json") };
}

function describeLoadError(err: unknown): string | null {
  if (err instanceof ConfigValidationError || err instanceof ConfigFileNotFoundError) return err.message;
  return null;
}

/** `check [config]`: validate the config; exit 1 when it is invalid or an enabled server cannot start. */
export async function checkCommand(args: readonly string[], io: CliIo): Promise<number> {
  const { positional, json } = parse(args);
  const logger = new RecordingLogger();
  try {
    const loaded = await loadExtensionsConfig({ configPath: positional[0], env: io.env, cwd: io.cwd, logger });
    const servers = Object.entries(loaded.config.mcpServers).map(([name, s]) => ({
      name,
      transport: s.type as string,
      enabled: s.enabled,
      status: "ok",
    }));
    for (const skipped of loaded.skipped) {
      servers.push({ name: skipped.server, transport: "-", enabled: true, status: `skipped: ${skipped.reason}` });
    }
    const ok = loaded.skipped.length === 0;
    if (json) {
      io.out(JSON.stringify({ ok, path: loaded.path, servers, warnings: loaded.warnings, skipped: loaded.skipped }, null, 2));
    } else {
      io.out(`config: ${loaded.path ?? "(none found: empty config)"}`);
      io.out(renderTable(["server", "transport", "enabled", "status"], servers.map((s) => [s.name, s.transport, String(s.enabled), s.status])));
      for (const w of loaded.warnings) io.err(`warning: ${w}`);
      io.out(ok ? "config OK" : `${loaded.skipped.length} enabled server(s) cannot start`);
    }
    return ok ? 0 : 1;
  } catch (err) {
    const message = describeLoadError(err);
    if (message === null) throw err;
    if (json) io.out(JSON.stringify({ ok: false, error: message }, null, 2));
    else io.err(message);
    return 1;
  }
}

/** `tools [config]`: discover and list every tool with its source server, raw name, transport and routing. */
export async function toolsCommand(args: readonly string[], io: CliIo): Promise<number> {
  const { positional, json } = parse(args);
  const logger = new RecordingLogger();
  const toolkit = createMcpToolkit({ configPath: positional[0], env: io.env, cwd: io.cwd, logger });
  try {
    if (!json) io.err("discovering MCP tools…");
    const tools = await toolkit.getTools();
    const rows = tools.map((tool) => {
      const record = getMcpToolRecord(tool)!;
      const routing = getMcpRouting(tool);
      return {
        name: tool.name,
        server: record.server,
        rawName: record.rawName,
        transport: record.transport,
        routing: routing ? { priority: routing.priority, keywords: routing.keywords } : null,
      };
    });
    const failures = Object.fromEntries(toolkit.discoveryFailures);
    if (json) {
      io.out(JSON.stringify({ tools: rows, failures }, null, 2));
    } else {
      io.out(
        renderTable(
          ["tool", "server", "raw name", "transport", "routing"],
          rows.map((r) => [r.name, r.server, r.rawName, r.transport, r.routing ? `prefer ${r.routing.priority}: ${r.routing.keywords.join(", ")}` : "-"]),
        ),
      );
      for (const warning of logger.messages("warn")) io.err(`warning: ${warning}`);
    }
    return 0;
  } catch (err) {
    const message = describeLoadError(err);
    if (message === null) throw err;
    io.err(message);
    return 1;
  } finally {
    await toolkit.close();
  }
}
