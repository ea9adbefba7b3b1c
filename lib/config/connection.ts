import { canonicalJson } from "../shared/canonical-json";
import type { McpServerConfig } from "./schema";

/**
 * The settings that decide where a server's calls go and what they carry: transport, process or URL, headers and
 * credential layers, timeouts. A server's description, routing and tool settings are not among them.
 */
const CONNECTION_KEYS = [
  "enabled",
  "type",
  "transport",
  "command",
  "args",
  "env",
  "cwd",
  "url",
  "headers",
  "oauth",
  "user_auth",
  "headers_from_context",
  "session_init_timeout",
  "tool_call_timeout",
  "max_total_timeout",
] as const satisfies readonly (keyof McpServerConfig)[];

/** Whether two configs of one server connect, authenticate and time out the same way. */
export function sameConnection(a: McpServerConfig, b: McpServerConfig): boolean {
  return CONNECTION_KEYS.every((key) => canonicalJson(a[key]) === canonicalJson(b[key]));
}
