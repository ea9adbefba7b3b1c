import type { McpOAuthConfig } from "../config";
import { DeadlineExceededError, withDeadline } from "../shared/deadline";
import { CredentialError, headerValueProblem, invalidHeaderMessage } from "../shared/headers";
import { ownText } from "../shared/errors";

export const OAUTH_HEADER = "Authorization";
export const DEFAULT_TOKEN_REQUEST_TIMEOUT_MS = 15_000;
/** How long a call waits for an early refresh while the token in hand is still valid; then it uses that token. */
export const DEFAULT_EARLY_REFRESH_WAIT_MS = 1_000;
/** After an early refresh failed, calls use the token in hand for this long before one asks again. */
export const EARLY_REFRESH_RETRY_MS = 5_000;
const DEFAULT_EXPIRES_IN_SECONDS = 3600;
const MAX_TOKEN_RESPONSE_BYTES = 1_048_576;
/**
 * The registered OAuth `error` codes a token endpoint answers with (RFC 6749 §4.1.2.1 and §5.2, RFC 8628, RFC 8693,
 * RFC 9449): only these are shown. Any other value is not: an endpoint may put what it was sent there (the client
 * secret, the refresh token), and the error text reaches a ToolMessage.
 */
const OAUTH_ERROR_CODES: ReadonlySet<string> = new Set([
  "invalid_request",
  "invalid_client",
  "invalid_grant",
  "unauthorized_client",
  "unsupported_grant_type",
  "invalid_scope",
  "access_denied",
  "server_error",
  "temporarily_unavailable",
  "authorization_pending",
  "slow_down",
  "expired_token",
  "invalid_target",
  "invalid_dpop_proof",
  "use_dpop_nonce",
]);

export interface OAuthTokenManagerOptions {
  /** Milliseconds since the epoch; injectable so tests move time instead of sleeping. */
  now?: () => number;
  fetch?: typeof fetch;
  requestTimeoutMs?: number;
  /** See DEFAULT_EARLY_REFRESH_WAIT_MS. */
  earlyRefreshWaitMs?: number;
}

interface CachedToken {
  header: string;
  expiresAt: number;
  fetchedAt: number;
}

interface ServerTokenState {
  config: McpOAuthConfig;
  /** Starts as the configured one; a rotated refresh token replaces it here, never in the file. */
  refreshToken: string | null;
  cached?: CachedToken;
  inflight?: Promise<CachedToken>;
  /** When an early refresh (the token in hand still valid) last failed. */
  earlyFailureAt?: number;
}

/**
 * OAuth access tokens for HTTP/SSE servers (SPEC §4.2): `client_credentials` and `refresh_token` grants,
 * cached until `expires_in − refresh_skew_seconds`, one token request for concurrent callers. An early refresh (the
 * token in hand has not expired yet) never holds a call for long: past `earlyRefreshWaitMs` the call goes on with
 * the token in hand while the request finishes; after a failed one, calls use that token for `EARLY_REFRESH_RETRY_MS`
 * before one asks again. State is kept per server and survives config reloads while that server's `oauth` block is
 * unchanged.
 */
export class OAuthTokenManager {
  private readonly states = new Map<string, ServerTokenState>();
  private readonly now: () => number;
  private readonly fetchImpl: typeof fetch;
  private readonly timeoutMs: number;
  private readonly earlyWaitMs: number;

  constructor(options: OAuthTokenManagerOptions = {}) {
    this.now = options.now ?? Date.now;
    this.fetchImpl = options.fetch ?? fetch;
    this.timeoutMs = options.requestTimeoutMs ?? DEFAULT_TOKEN_REQUEST_TIMEOUT_MS;
    this.earlyWaitMs = options.earlyRefreshWaitMs ?? DEFAULT_EARLY_REFRESH_WAIT_MS;
  }

  /**
   * The validated `"<token_type> <access_token>"` value for the server's Authorization header. `signal` stops
   * only this caller's wait; a token request other callers share runs on under its own timeout.
   */
  async getAuthorizationHeader(serverName: string, config: McpOAuthConfig, signal?: AbortSignal): Promise<string> {
    const state = this.stateFor(serverName, config);
    const cached = state.cached;
    const now = this.now();
    if (cached && cached.expiresAt > now + config.refresh_skew_seconds * 1000) return cached.header;
    const early = cached !== undefined && cached.expiresAt > now;
    if (early && state.earlyFailureAt !== undefined && now < state.earlyFailureAt + EARLY_REFRESH_RETRY_MS) return cached.header;
    if (!state.inflight) {
      const inflight = this.fetchToken(serverName, state).catch((err: unknown) => {
        if (state.cached && state.cached.expiresAt > this.now()) state.earlyFailureAt = this.now();
        throw err;
      });
      state.inflight = inflight;
      // Forgotten once settled; the catch keeps this side chain from being an unhandled rejection (callers get it).
      inflight
        .finally(() => {
          if (state.inflight === inflight) state.inflight = undefined;
        })
        .catch(() => undefined);
    }
    try {
      return (await withDeadline(() => state.inflight!, early ? this.earlyWaitMs : null, signal)).header;
    } catch (err) {
      if (signal?.aborted) throw err;
      // The early refresh failed or is slow, but the token in hand has not expired yet: use it.
      if ((err instanceof CredentialError || err instanceof DeadlineExceededError) && cached && cached.expiresAt > this.now()) {
        return cached.header;
      }
      throw err;
    }
  }

  /**
   * The server answered a request that carried `header` with HTTP 401 (it revoked the token, or restarted with new
   * keys): that token is not used again, the next caller asks for a new one. A token that already replaced it is kept,
   * and so is one fetched less than `EARLY_REFRESH_RETRY_MS` ago: refused that soon, another header of the call is the
   * likelier cause, and calls that keep failing must not each cost a token request. Returns whether the next caller
   * gets another token than `header`.
   */
  rejected(serverName: string, header: string): boolean {
    const state = this.states.get(serverName);
    if (!state) return false;
    const cached = state.cached;
    if (cached?.header !== header) return true;
    if (this.now() < cached.fetchedAt + EARLY_REFRESH_RETRY_MS) return false;
    state.cached = undefined;
    state.earlyFailureAt = undefined;
    return true;
  }

  /** Forgets the state of servers that are no longer configured. */
  retain(serverNames: Iterable<string>): void {
    const keep = new Set(serverNames);
    for (const name of [...this.states.keys()]) if (!keep.has(name)) this.states.delete(name);
  }

  private stateFor(serverName: string, config: McpOAuthConfig): ServerTokenState {
    const existing = this.states.get(serverName);
    if (existing?.config === config) return existing;
    if (existing && sameOAuthConfig(existing.config, config)) {
      // A reload with the same oauth block keeps the cached token and any rotated refresh token.
      existing.config = config;
      return existing;
    }
    const state: ServerTokenState = { config, refreshToken: config.refresh_token ?? null };
    this.states.set(serverName, state);
    return state;
  }

  private async fetchToken(serverName: string, state: ServerTokenState): Promise<CachedToken> {
    const { config } = state;
    const body = tokenRequestBody(serverName, config, state.refreshToken);
    const text = await this.post(serverName, config.token_url, body);
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      throw ownText(new CredentialError(`OAuth token endpoint of MCP server '${serverName}' answered with a body that is not JSON`));
    }
    if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
      throw ownText(new CredentialError(`OAuth token endpoint of MCP server '${serverName}' answered with JSON that is not an object`));
    }
    const fields = payload as Record<string, unknown>;
    // Kept before the rest is checked: the endpoint has spent the refresh token it was sent either way.
    const rotated = fields.refresh_token;
    if (config.grant_type === "refresh_token" && typeof rotated === "string" && rotated !== "") state.refreshToken = rotated;
    const accessToken = fields[config.token_field];
    if (typeof accessToken !== "string" || accessToken === "") {
      throw ownText(new CredentialError(`OAuth token response of MCP server '${serverName}' is missing '${config.token_field}'`));
    }
    const tokenType = fields[config.token_type_field];
    const header = `${typeof tokenType === "string" && tokenType !== "" ? tokenType : config.default_token_type} ${accessToken}`;
    const problem = headerValueProblem(header);
    if (problem !== null) throw ownText(new CredentialError(invalidHeaderMessage(serverName, OAUTH_HEADER, "oauth", problem)));

    const now = this.now();
    const token = { header, expiresAt: now + Math.max(expiresInSeconds(fields[config.expires_in_field]), 1) * 1000, fetchedAt: now };
    state.cached = token;
    return token;
  }

  private async post(serverName: string, url: string, body: URLSearchParams): Promise<string> {
    const where = `OAuth token request of MCP server '${serverName}'`;
    let response: Response;
    let text: string | null;
    try {
      ({ response, text } = await withDeadline(async (signal) => {
        const res = await this.fetchImpl(url, {
          method: "POST",
          headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
          body,
          signal,
          // A redirect would re-send the client secret or refresh token to wherever it points: it is an error.
          redirect: "manual",
        });
        return { response: res, text: await boundedText(res, MAX_TOKEN_RESPONSE_BYTES) };
      }, this.timeoutMs));
    } catch (err) {
      if (err instanceof DeadlineExceededError) throw ownText(new CredentialError(`${where} ${err.message}`));
      throw ownText(new CredentialError(`${where} failed: ${networkReason(err)}`));
    }
    if (!response.ok) {
      const code = text === null ? undefined : oauthErrorCode(text);
      throw ownText(new CredentialError(
        `${where} failed: the token endpoint answered HTTP ${response.status}${code ? ` (error '${code}')` : ""}`,
      ));
    }
    if (text === null) throw ownText(new CredentialError(`${where} failed: the token response is larger than ${MAX_TOKEN_RESPONSE_BYTES} bytes`));
    return text;
  }
}

/**
 * The body as text, or `null` when it is longer than `maxBytes`: read no further than that (an endless or huge answer
 * is neither held whole nor waited for), and not at all when its Content-Length already says so.
 */
async function boundedText(response: Response, maxBytes: number): Promise<string | null> {
  const body = response.body;
  if (body === null) return "";
  if (Number(response.headers.get("content-length") ?? 0) > maxBytes) {
    await body.cancel().catch(() => undefined);
    return null;
  }
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    size += next.value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(next.value);
  }
  // As Response.text() reads it: UTF-8, a leading byte-order mark dropped.
  return new TextDecoder().decode(Buffer.concat(chunks, size));
}

function tokenRequestBody(serverName: string, config: McpOAuthConfig, refreshToken: string | null): URLSearchParams {
  const body = new URLSearchParams(config.extra_token_params);
  // grant_type is authoritative: extra_token_params cannot change the flow.
  body.set("grant_type", config.grant_type);
  if (config.grant_type === "client_credentials") {
    if (!config.client_id || !config.client_secret) {
      throw ownText(new CredentialError(`OAuth client_credentials for MCP server '${serverName}' requires client_id and client_secret`));
    }
    body.set("client_id", config.client_id);
    body.set("client_secret", config.client_secret);
  } else {
    if (!refreshToken) throw ownText(new CredentialError(`OAuth refresh_token grant for MCP server '${serverName}' requires refresh_token`));
    body.set("refresh_token", refreshToken);
    if (config.client_id) body.set("client_id", config.client_id);
    if (config.client_secret) body.set("client_secret", config.client_secret);
  }
  if (config.scope) body.set("scope", config.scope);
  if (config.audience) body.set("audience", config.audience);
  return body;
}

function expiresInSeconds(value: unknown): number {
  const seconds = typeof value === "number" ? value : typeof value === "string" && value.trim() !== "" ? Number(value) : NaN;
  return Number.isFinite(seconds) ? Math.trunc(seconds) : DEFAULT_EXPIRES_IN_SECONDS;
}

function oauthErrorCode(body: string): string | undefined {
  try {
    const code = (JSON.parse(body) as { error?: unknown }).error;
    return typeof code === "string" && OAUTH_ERROR_CODES.has(code) ? code : undefined;
  } catch {
    return undefined;
  }
}

/** The failure class only: fetch errors can carry the URL, and a token URL may hold a secret in its query. */
function networkReason(err: unknown): string {
  const code = (err as { cause?: { code?: unknown } })?.cause?.code;
  return typeof code === "string" && /^[A-Z0-9_]{1,40}$/.test(code)
    ? `could not reach the token endpoint (${code})`
    : "could not reach the token endpoint";
}

function sameOAuthConfig(a: McpOAuthConfig, b: McpOAuthConfig): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
