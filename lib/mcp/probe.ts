import type { LoadedExtensionsConfig, McpTransportType } from "../config";
import { OAuthTokenManager, ServerHeaders, type OAuthTokenManagerOptions } from "../credentials";
import { silentLogger, type Logger } from "../shared/logger";
import { discoverAll, type DiscoveryTarget, type ServerDiscovery } from "./discovery";
import { SessionPool } from "../sessions";
import { discoveryTarget } from "./toolkit";

/** Whether one enabled server starts: connect + `tools/list`, as discovery does it. */
export interface ServerProbe {
  server: string;
  transport: McpTransportType;
  ok: boolean;
  /** Tools the server listed (0 when it failed). */
  tools: number;
  /** Why it failed: the discovery warning's reason, scrubbed of the server's secrets and the headers sent. */
  reason?: string;
  /** Listed tools that cannot be used (a definition that is not valid MCP, …), one warning each. */
  toolWarnings?: string[];
}

export interface ProbeServersOptions {
  logger?: Logger;
  /** Token endpoint client settings for servers with `oauth`. */
  oauth?: OAuthTokenManagerOptions;
  /** Hears each server as soon as its probe ends. */
  onResult?: (probe: ServerProbe) => void;
  /**
   * The data dir the toolkit would use (absolute): a stdio server then starts in the `default` thread workspace with
   * its private temp folder, as the toolkit's discovery starts it, not in the folder the probe runs in.
   */
  dataDir?: string;
}

function toProbe(discovery: ServerDiscovery): ServerProbe {
  const probe: ServerProbe = {
    server: discovery.serverName,
    transport: discovery.server.type,
    ok: discovery.failure === undefined,
    tools: discovery.tools.length,
  };
  if (discovery.reason !== undefined) probe.reason = discovery.reason;
  if (discovery.toolWarnings !== undefined) probe.toolWarnings = discovery.toolWarnings;
  return probe;
}

/**
 * Tries every enabled server of a loaded config the way the toolkit's discovery does (static headers and
 * OAuth, each server under its `session_init_timeout`, all in parallel, failure texts scrubbed of the
 * server's secrets), then closes every session. For `mcp-harness check`; nothing is cached.
 */
export async function probeServers(loaded: LoadedExtensionsConfig, options: ProbeServersOptions = {}): Promise<ServerProbe[]> {
  const logger = options.logger ?? silentLogger;
  const oauth = new OAuthTokenManager(options.oauth);
  const targets = new Map<string, DiscoveryTarget>();
  for (const [serverName, server] of Object.entries(loaded.config.mcpServers)) {
    if (!server.enabled) continue;
    const headers = new ServerHeaders(serverName, server, oauth);
    targets.set(serverName, discoveryTarget(serverName, server, headers, loaded.envSecrets[serverName] ?? []));
  }
  const pool = new SessionPool(logger, { httpIdleMs: null, dataDir: options.dataDir, secretsFor: (name) => targets.get(name)?.secrets ?? [] });
  const onResult = options.onResult;
  try {
    const discoveries = await discoverAll([...targets.values()], pool, logger, onResult && ((d) => onResult(toProbe(d))));
    return discoveries.map(toProbe);
  } finally {
    await pool.close();
  }
}
