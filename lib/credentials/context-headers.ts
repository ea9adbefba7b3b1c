import type { McpHeadersFromContextConfig } from "../config";
import { rewritingInterceptor, type McpToolInterceptor } from "../shared/interceptor";
import { assertSendableHeader, CredentialError, MergedHeaders, mergeHeaders } from "../shared/headers";
import { ownText } from "../shared/errors";
import { runSecrets } from "../shared/identity";

/**
 * The `headers_from_context` layer: each header takes its value from the run's `context.secrets[key]`.
 * A missing, non-string or empty secret fails the call naming the key, unless `on_missing` is
 * "passthrough"; a value that cannot be sent is rejected either way.
 */
export function contextHeadersInterceptor(serverName: string, config: McpHeadersFromContextConfig): McpToolInterceptor {
  const mapping = Object.entries(config.headers);
  const merged = new MergedHeaders();
  // The request with the run's values in its headers, or as it was when no value applies ("passthrough").
  return rewritingInterceptor((request) => {
    const secrets = runSecrets(request.runtime);
    const found: Record<string, string> = {};
    const missing: string[] = [];
    // The values, each ended by NUL: no sendable value holds one, so two different value lists never meet.
    let values = "";
    for (const [header, key] of mapping) {
      const value = secrets && Object.hasOwn(secrets, key) ? secrets[key] : undefined;
      if (typeof value !== "string" || value === "") {
        missing.push(key);
        values += "\u0000";
        continue;
      }
      found[header] = value;
      values += `${value}\u0000`;
    }
    if (missing.length > 0 && config.on_missing === "deny") {
      const keys = missing.map((key) => `'${key}'`).join(", ");
      throw ownText(new CredentialError(
        `MCP server '${serverName}' needs the run's context.secrets ${keys} (headers_from_context), which the run does not provide (missing or empty)`,
      ));
    }
    if (missing.length === mapping.length) return request;
    const headers = merged.get(request.headers, values, () => {
      for (const [header, value] of Object.entries(found)) assertSendableHeader(serverName, header, value, "headers_from_context");
      return mergeHeaders(request.headers, found);
    });
    return request.override({ headers });
  });
}
