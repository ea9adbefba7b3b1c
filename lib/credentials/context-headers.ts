import type { McpHeadersFromContextConfig } from "../config";
import type { McpToolInterceptor } from "../shared/interceptor";
import { assertSendableHeader, CredentialError, mergeHeaders } from "../shared/headers";
import { ownText } from "../shared/errors";
import { runSecrets } from "../shared/identity";

/**
 * The `headers_from_context` layer: each header takes its value from the run's `context.secrets[key]`.
 * A missing, non-string or empty secret fails the call naming the key, unless `on_missing` is
 * "passthrough"; a value that cannot be sent is rejected either way.
 */
export function contextHeadersInterceptor(serverName: string, config: McpHeadersFromContextConfig): McpToolInterceptor {
  const mapping = Object.entries(config.headers);
  return async (request, next) => {
    const secrets = runSecrets(request.runtime);
    const found: Record<string, string> = {};
    const missing: string[] = [];
    for (const [header, key] of mapping) {
      const value = secrets && Object.hasOwn(secrets, key) ? secrets[key] : undefined;
      if (typeof value !== "string" || value === "") {
        missing.push(key);
        continue;
      }
      assertSendableHeader(serverName, header, value, "headers_from_context");
      found[header] = value;
    }
    if (missing.length > 0 && config.on_missing === "deny") {
      const keys = missing.map((key) => `'${key}'`).join(", ");
      throw ownText(new CredentialError(
        `MCP server '${serverName}' needs the run's context.secrets ${keys} (headers_from_context), which the run does not provide (missing or empty)`,
      ));
    }
    if (Object.keys(found).length === 0) return next(request);
    return next(request.override({ headers: mergeHeaders(request.headers, found) }));
  };
}
