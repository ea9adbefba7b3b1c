const SESSION_ID = "mcp-session-id";

/**
 * The fetch under a streamable HTTP session's transport that keeps the session's id the one the server gave at
 * initialize: the SDK takes the `mcp-session-id` of any response as the session's id from then on, so a response
 * naming another session (a 404 for an expired session carrying another client's id, a proxy mixing up its
 * sessions' headers) would have this session's next requests, and its closing DELETE, sent on that other session.
 * A request that carries an id gets its response without an `mcp-session-id` naming another.
 */
export function keepSessionId(base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const response = await base(input, init);
    const named = response.headers.get(SESSION_ID);
    if (named === null) return response;
    // The SDK passes a Headers: read in place, not copied, on every call's answer.
    const headers = init?.headers;
    const sent = headers instanceof Headers ? headers.get(SESSION_ID) : new Headers(headers).get(SESSION_ID);
    if (sent === null || named === sent) return response;
    const kept = new Headers(response.headers);
    kept.delete(SESSION_ID);
    const rebuilt = new Response(response.body, { status: response.status, statusText: response.statusText, headers: kept });
    // The SDK resolves an unfollowed redirect's Location against it, which may be a redirect it followed.
    Object.defineProperty(rebuilt, "url", { value: response.url });
    return rebuilt;
  };
}
