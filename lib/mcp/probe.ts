import type { ExtensionsConfig, McpTransportType } from "../config";
import { OAuthTokenManager, ServerHeaders, type OAuthTokenManagerOptions } from "../credentials";
import { silentLogger, type Logger } from "../shared/logger";
import { discoverAll, type DiscoveryTarget, type ServerDiscovery } from "./discovery";
import { SessionPool } from "./pool";
import { baseHeaders } from "./toolkit";

/** Whether one enabled server starts: connect + `tools/list`, as discovery does it. */
export interface ServerProbe {
  server: string;
  transport: McpTransportType;
  ok: boolean;
  /** Tools the server listed (0 when it failed). */
  tools: number;
  /** Why it failed: the discovery warning's reason, scrubbed of the headers sent. */
  reason?: string;
}

export interface ProbeServersOptions {
  logger?: Logger;
  /** Token endpoint client settings for servers with `oauth`. */
  oauth?: OAuthTokenManagerOptions;
  /** Hears each server as soon as its probe ends. */
  onResult?: (probe: ServerProbe) => void;
}

function toProbe(discovery: ServerDiscovery): ServerProbe {
  const probe: ServerProbe = {
    server: discovery.serverName,
    transport: discovery.server.type,
    ok: discovery.failure === undefined,
    tools: discovery.tools.length,
  };
  if (discovery.reason !== undefined) probe.reason = discovery.reason;
  return probe;
}

/**
 * Tries every enabled server of a loaded config the way the toolkit's discovery does (static headers and
 * OAuth, each server under its `session_init_timeout`, all in parallel), then closes every session.
 * For `mcp-harness check`; nothing is cached.
 */
export async function probeServers(config: ExtensionsConfig, options: ProbeServersOptions = {}): Promise<ServerProbe[]> {
  const logger = options.logger ?? silentLogger;
  const oauth = new OAuthTokenManager(options.oauth);
  const pool = new SessionPool(logger, { httpIdleMs: null });
  const targets: DiscoveryTarget[] = Object.entries(config.mcpServers)
    .filter(([, server]) => server.enabled)
    .map(([serverName, server]) => {
      const headers = new ServerHeaders(serverName, server, oauth);
      const base = baseHeaders(server);
      return { serverName, server, headers: (signal) => headers.resolve(base, signal) };
    });
  const onResult = options.onResult;
  try {
    const discoveries = await discoverAll(targets, pool, logger, onResult && ((d) => onResult(toProbe(d))));
    return discoveries.map(toProbe);
  } finally {
    await pool.close();
  }
}
