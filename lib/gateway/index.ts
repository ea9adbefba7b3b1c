export {
  ADMIN_REQUIRED,
  AUTHENTICATION_REQUIRED,
  createGatewayApp,
  DEFAULT_MAX_BODY_BYTES,
  GatewayHttpError,
  type GatewayAppOptions,
  type GatewayAuthorize,
  type GatewayToolkit,
  type GatewayUser,
} from "./app";
export { adminTokenAuthorize, ADMIN_TOKEN_ENV_VAR } from "./admin-token";
export {
  CODE_INJECTING_ENV_VARS,
  DEFAULT_STDIO_ALLOWLIST,
  isStdioServer,
  STDIO_ALLOWLIST_ENV_VAR,
  stdioAllowlist,
  validateStdioLaunch,
  type StdioLaunchOptions,
  type StdioLaunchServer,
} from "./launch-policy";
export { EXEC_FLAGS } from "./launcher-args";
export { MASK, maskServers } from "./masking";
export { isSensitiveKey } from "../config/sensitive";
export { ConfigLockTimeoutError, type FileLockOptions } from "./file-lock";
export type { WriteStep } from "./write";
export {
  publicTaskDetail,
  publicTaskSummary,
  PUBLIC_ERROR_MAX_CHARS,
  type GatewayTaskRuntime,
} from "./task-routes";
