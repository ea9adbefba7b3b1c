import { isExpiredStatus } from "./expired";

/**
 * The fetch under a streamable HTTP session's transport, watching its event streams (GET): the SDK reconnects a stream
 * that ended, and once the server has served one on this URL, a later GET on the session's id answered 404 (or 410)
 * says the server no longer knows the session (it expired it or restarted). `onForgotten` hears it then, before any
 * call is sent on that session. A server that never served a stream (one that answers 404 where it means 405) says
 * nothing by it. POSTs pass through as they are.
 */
export function watchForgottenSession(onForgotten: (status: number) => void, base: typeof fetch = fetch): typeof fetch {
  let served = false;
  return (input, init) => {
    if (init?.method !== "GET" || !new Headers(init.headers).has("mcp-session-id")) return base(input, init);
    return base(input, init).then((response) => {
      if (response.ok) served = true;
      else if (isExpiredStatus(response.status) && served) onForgotten(response.status);
      return response;
    });
  };
}
