import type { McpUserAuthConfig } from "../config";
import { rewritingInterceptor, type McpToolInterceptor } from "../shared/interceptor";
import { assertSendableHeader, CredentialError, MergedHeaders, mergeHeaders } from "../shared/headers";
import { ownText } from "../shared/errors";
import { runUserId, unusableRunUserId } from "../shared/identity";

const USER_ID_SHOWN_CHARS = 64;

/** User ids are not secrets, but they come from the caller: shown printable and bounded. */
function shownUserId(userId: string): string {
  const printable = userId.replace(/[^\x20-\x7e]/g, "?");
  return printable.length > USER_ID_SHOWN_CHARS ? `${printable.slice(0, USER_ID_SHOWN_CHARS)}…` : printable;
}

/**
 * The `user_auth` layer: the run's user id picks the header value from `users`. Fails closed on an unknown
 * user, a run without a user id or an empty value, unless `on_missing` is "passthrough"; a value that
 * cannot be sent is rejected either way.
 */
export function userAuthInterceptor(serverName: string, config: McpUserAuthConfig): McpToolInterceptor {
  const merged = new MergedHeaders();
  // The request with the user's header in, or as it was ("passthrough").
  return rewritingInterceptor((request) => {
    const userId = runUserId(request.runtime);
    const value = userId !== undefined && Object.hasOwn(config.users, userId) ? config.users[userId] : undefined;
    if (value === undefined || value === "") {
      if (config.on_missing === "passthrough") return request;
      throw ownText(new CredentialError(
        userId === undefined
          ? `MCP server '${serverName}' needs a per-user credential (user_auth, header '${config.header}'), but ${unusableRunUserId(request.runtime) ?? "the run has no user id (context.user_id)"}`
          : `MCP server '${serverName}' has no user_auth credential for user '${shownUserId(userId)}' (header '${config.header}')`,
      ));
    }
    const headers = merged.get(request.headers, value, () => {
      assertSendableHeader(serverName, config.header, value, "user_auth");
      return mergeHeaders(request.headers, { [config.header]: value });
    });
    return request.override({ headers });
  });
}
