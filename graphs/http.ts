/**
 * The HTTP app of `langgraph.json` (`http.app`): the gateway of SPEC §8 for the process-wide toolkit the
 * graphs use (`getCachedMcpTools`). Its config endpoints are on only when `MCP_HARNESS_ADMIN_TOKEN` is set:
 * then `Authorization: Bearer <token>` is the admin.
 */
import { adminTokenAuthorize, createGatewayApp, resetMcpToolsCache } from "../lib";

export const app = createGatewayApp({
  toolkit: { reset: resetMcpToolsCache },
  authorize: adminTokenAuthorize(),
});
