import { createHash, timingSafeEqual } from "node:crypto";
import type { GatewayAuthorize } from "./app";

export const ADMIN_TOKEN_ENV_VAR = "MCP_HARNESS_ADMIN_TOKEN";

/**
 * An `authorize` hook for the gateway from the environment: a request with
 * `Authorization: Bearer <MCP_HARNESS_ADMIN_TOKEN>` is the admin; any other request is unauthenticated.
 * `undefined` when the variable is unset or blank, which leaves the config endpoints off.
 */
export function adminTokenAuthorize(env: NodeJS.ProcessEnv = process.env): GatewayAuthorize | undefined {
  const token = env[ADMIN_TOKEN_ENV_VAR]?.trim() ?? "";
  if (token === "") return undefined;
  const expected = digest(token);
  return (request) => {
    const header = request.headers.get("authorization") ?? "";
    const match = /^Bearer\s+(.+)$/i.exec(header.trim());
    if (match === null) return null;
    // Compared as digests: equal length whatever was sent, and constant time.
    return timingSafeEqual(digest(match[1] ?? ""), expected) ? { userId: "admin", admin: true } : null;
  };
}

function digest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}
