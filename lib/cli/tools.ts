import type { DynamicStructuredTool } from "@langchain/core/tools";
import { McpTaskConfigurationError, type LoadedExtensionsConfig } from "../config";
import { getMcpRouting, getMcpToolRecord } from "../mcp";
import { RecordingLogger } from "../shared/logger";
import { parseArgs } from "./args";
import { CliConfigError, loadForCli } from "./config";
import type { CliIo } from "./io";
import { renderTable } from "./table";
import { listingToolkit } from "./task-listing";

/**
 * `tools [config] [--json]`: discover and list every tool with its source server, raw name, transport and
 * routing, as an agent gets them: a task server's submit tools carry their toolset's name (`task`), its status and
 * cancel tools are hidden. Exit 1 when there were enabled servers and every one of them failed (or was not started),
 * or when the task toolsets break a startup rule (the agent's `getTools()` would fail the same way).
 */
export async function toolsCommand(args: readonly string[], io: CliIo): Promise<number> {
  const { positional, flags } = parseArgs(args, ["json"], 1);
  const json = flags.has("json");

  // Loaded here too for the CLI's wording of errors and for the count of enabled servers.
  let loaded: LoadedExtensionsConfig;
  try {
    loaded = await loadForCli(positional[0], io, new RecordingLogger());
  } catch (err) {
    if (!(err instanceof CliConfigError)) throw err;
    if (json) io.out(JSON.stringify({ ok: false, error: err.message }, null, 2));
    else io.err(err.message);
    return 1;
  }

  const logger = new RecordingLogger();
  const { toolkit, tasks } = listingToolkit(loaded.path, io, logger);
  try {
    if (!json && io.interactive) io.err("discovering MCP tools…");
    let tools: DynamicStructuredTool[];
    try {
      tools = await toolkit.getTools();
    } catch (err) {
      if (!(err instanceof McpTaskConfigurationError)) throw err;
      if (json) io.out(JSON.stringify({ ok: false, error: err.message }, null, 2));
      else io.err(`error: ${err.message}`);
      return 1;
    }
    const rows = tools.map((tool) => {
      const record = getMcpToolRecord(tool)!;
      const routing = getMcpRouting(tool);
      return {
        name: tool.name,
        server: record.server,
        rawName: record.rawName,
        transport: record.transport,
        task: tasks.taskOf(record),
        routing: routing ? { mode: routing.mode, priority: routing.priority, keywords: routing.keywords, scope: routing.scope } : null,
      };
    });
    const failures: Record<string, string> = {};
    for (const skipped of loaded.skipped) failures[skipped.server] = skipped.reason;
    for (const [server, reason] of toolkit.discoveryFailures) failures[server] = reason;
    const enabled = Object.values(loaded.config.mcpServers).filter((s) => s.enabled).length + loaded.skipped.length;
    const allFailed = enabled > 0 && Object.keys(failures).length >= enabled;
    // The toolkit logs the failures as warnings too; they are reported once, scrubbed, under `failures`.
    const failureTexts = new Set([...toolkit.discoveryFailures.values(), ...loaded.skipped.map((s) => s.reason)]);
    const warnings = logger.messages("warn").filter((w) => !failureTexts.has(w));

    if (json) {
      io.out(JSON.stringify({ ok: !allFailed, tools: rows, failures, warnings }, null, 2));
    } else {
      io.out(
        renderTable(
          ["tool", "server", "raw name", "transport", "task", "routing"],
          rows.map((r) => [
            r.name,
            r.server,
            r.rawName,
            r.transport,
            r.task ?? "-",
            r.routing ? `prefer ${r.routing.priority}: ${r.routing.keywords.join(", ")}` : "-",
          ]),
        ),
      );
      for (const warning of [...Object.values(failures), ...warnings]) io.err(`warning: ${warning}`);
      if (allFailed) io.err(`error: every enabled server failed (${enabled}); no tools`);
    }
    return allFailed ? 1 : 0;
  } finally {
    await toolkit.close();
  }
}
