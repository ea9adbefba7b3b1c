/**
 * The `mcpInterceptors` module that extensions_config.example.json names as
 * "./graphs/demo/audit-interceptor.js:buildAuditInterceptor" (a path relative to the config file, then the export).
 *
 * The export is a builder: called once at startup with no arguments, it returns an interceptor (or null
 * for none). This interceptor tells MCP servers who asked: it adds an `X-Requested-By` header with the
 * run's user id (`context.user_id`, else "anonymous"). On stdio servers, interceptor headers travel as
 * the call's `_meta.headers`. Like every header value, the user id is then one of the call's secrets: it is
 * blanked ("[redacted]") wherever that call's result shows it.
 *
 * CommonJS; an ES module (`.mjs`, or `.js` under `"type": "module"`) with a named export works too.
 */

/** @returns {import("langgraph-mcp-harness").McpToolInterceptor} */
exports.buildAuditInterceptor = () => async (request, next) => {
  const context = request.runtime && request.runtime.context;
  const userId = context && typeof context.user_id === "string" ? context.user_id : "anonymous";
  return next(request.override({ headers: { ...request.headers, "X-Requested-By": userId } }));
};
