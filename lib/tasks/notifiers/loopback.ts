/**
 * The LangGraph API server (`langgraphjs dev`, and the JS server of LangGraph Platform) binds an in-process
 * `fetch` into its own routes before it loads the `http.app` of `langgraph.json` (for webhooks and custom
 * routes). Code running inside that server can reach the server's API through it without knowing the port the
 * server listens on, and before it listens.
 */

/** The key the LangGraph API server binds its loopback fetch under. */
const LOOPBACK_FETCH = Symbol.for("langgraph_api:fetch");

export type LoopbackFetch = (url: string, init?: RequestInit) => Promise<Response>;

/** The loopback fetch of the LangGraph API server this code runs in, or `undefined` outside one. */
export function langGraphServerLoopback(): LoopbackFetch | undefined {
  const bound = (globalThis as Record<symbol, unknown>)[LOOPBACK_FETCH];
  return typeof bound === "function" ? (bound as LoopbackFetch) : undefined;
}

/** The base URL to pair with the loopback fetch: the server routes by path, the host is never dialled. */
export const LOOPBACK_API_URL = "http://langgraph-api.loopback";
