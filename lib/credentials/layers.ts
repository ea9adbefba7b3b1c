import type { McpServerConfig } from "../config";
import type { Logger } from "../shared/logger";
import type { McpToolInterceptor } from "../shared/interceptor";
import { contextHeadersInterceptor } from "./context-headers";
import { mergeHeaders, type HeaderMap } from "../shared/headers";
import { isUnauthorized } from "../shared/unauthorized";
import { OAUTH_HEADER, type OAuthTokenManager } from "./oauth";
import { userAuthInterceptor } from "./user-auth";

/** A server's credential interceptors, outermost first, for the two kinds of call. */
export interface CredentialLayers {
  /** Agent tool calls and durable-task submits: OAuth → user_auth → headers_from_context. */
  requestScoped: readonly McpToolInterceptor[];
  /** Calls outside any agent run (durable-task status/cancel): OAuth only, on top of the static headers. */
  serverLevel: readonly McpToolInterceptor[];
}

/**
 * Static headers plus the server's OAuth Authorization header: what discovery and every call start from.
 * The merged object is reused while the inputs are the same, so per-object memos downstream (validation,
 * the session pool's header fingerprint) keep hitting.
 */
export class ServerHeaders {
  private last?: { base: HeaderMap; value: string; merged: HeaderMap };

  constructor(
    private readonly serverName: string,
    private readonly server: McpServerConfig,
    private readonly oauth: OAuthTokenManager,
  ) {}

  get usesOAuth(): boolean {
    return this.server.type !== "stdio" && this.server.oauth?.enabled === true;
  }

  async resolve(base: HeaderMap, signal?: AbortSignal): Promise<HeaderMap> {
    const config = this.server.oauth;
    if (!this.usesOAuth || !config) return base;
    const value = await this.oauth.getAuthorizationHeader(this.serverName, config, signal);
    const last = this.last;
    if (last && last.base === base && last.value === value) return last.merged;
    const merged = mergeHeaders(base, { [OAUTH_HEADER]: value });
    this.last = { base, value, merged };
    return merged;
  }

  /**
   * A request sent with `headers` (as `resolve` gave them) was refused with HTTP 401: its token is not used again.
   * Whether `resolve` now gives another token (the refused one was dropped, or had been replaced meanwhile).
   */
  rejected(headers: HeaderMap): boolean {
    if (!this.usesOAuth) return false;
    const name = Object.keys(headers).find((key) => key.toLowerCase() === OAUTH_HEADER.toLowerCase());
    return name !== undefined && this.oauth.rejected(this.serverName, headers[name]);
  }
}

/**
 * The stdio "credential layers are ignored" warnings already given, per server: a toolkit keeps one, so a
 * config reload does not repeat a warning; it is given again only when that server's set of declared layers changes.
 */
export class StdioLayerWarnings {
  private readonly given = new Map<string, string>();

  warn(serverName: string, declared: readonly string[], logger: Logger): void {
    const key = declared.join(",");
    if ((this.given.get(serverName) ?? "") === key) return;
    this.given.set(serverName, key);
    const one = declared.length === 1;
    logger.warn(
      `MCP server '${serverName}' uses stdio; ${declared.join(", ")} ${one ? "applies" : "apply"} only to http/sse ` +
        `servers and ${one ? "is" : "are"} ignored (stdio sessions are per user/thread already)`,
    );
  }
}

/**
 * The layers of SPEC §4.2 above the static headers, for one server. They apply to HTTP/SSE only: on stdio
 * they are ignored with one warning (per `warnings`, i.e. per toolkit), since stdio sessions are per user/thread already.
 */
export function credentialLayers(
  serverName: string,
  server: McpServerConfig,
  headers: ServerHeaders,
  logger: Logger,
  warnings: StdioLayerWarnings = new StdioLayerWarnings(),
): CredentialLayers {
  if (server.type === "stdio") {
    const declared = [
      server.oauth?.enabled ? "oauth" : null,
      server.user_auth ? "user_auth" : null,
      server.headers_from_context ? "headers_from_context" : null,
    ].filter((key) => key !== null);
    warnings.warn(serverName, declared, logger);
    return { requestScoped: [], serverLevel: [] };
  }
  const serverLevel: McpToolInterceptor[] = [];
  if (headers.usesOAuth) {
    serverLevel.push(async (request, next) => {
      const signal = request.runtime?.signal;
      const resolved = await headers.resolve(request.headers, signal);
      try {
        return await next(request.override({ headers: resolved }));
      } catch (err) {
        // The server refused the token before it ran anything (it revoked it, or restarted with new keys): sent once
        // more with a new one. A token fetched moments ago is not replaced (see `OAuthTokenManager.rejected`).
        if (!isUnauthorized(err) || !headers.rejected(resolved)) throw err;
        return next(request.override({ headers: await headers.resolve(request.headers, signal) }));
      }
    });
  }
  const requestScoped = [...serverLevel];
  if (server.user_auth) requestScoped.push(userAuthInterceptor(serverName, server.user_auth));
  if (server.headers_from_context) requestScoped.push(contextHeadersInterceptor(serverName, server.headers_from_context));
  return { requestScoped, serverLevel };
}
