export {
  CLIENT_INFO,
  DEFAULT_HTTP_SESSION_IDLE_MS,
  DEFAULT_MAX_HTTP_SESSIONS_PER_SERVER,
  SessionPool,
  type AcquireOptions,
  type McpSession,
  type SessionLease,
  type SessionPoolOptions,
} from "./pool";
export { DEFAULT_STDIO_MAX_MESSAGE_BYTES } from "./stdio-buffer";
export type { ProgressListener } from "./progress";
export { DEFAULT_MAX_STDIO_SESSIONS } from "./pool";
export { DEFAULT_SCOPE, DEFAULT_SCOPE_ID, runScope, sessionScope, type SessionScope } from "./scope";
export {
  DATA_DIR_ENV_VAR,
  DEFAULT_DATA_DIR,
  INTERNAL_DIR_NAME,
  resolveDataDir,
  stdioLaunch,
  threadFolderName,
  threadPaths,
  VIRTUAL_USER_DATA,
  type StdioLaunch,
  type ThreadPaths,
} from "./workspace";
export { changedFiles, EXCLUDED_DIR_NAMES, EXCLUDED_FILE_NAMES, MAX_SNAPSHOT_ENTRIES, SETTLED_LISTING_MS, snapshotWorkspace, WorkspaceScanner, type WorkspaceScannerOptions, type WorkspaceSnapshot } from "./changes";
export { mayTranslatePaths, translateResultPaths, virtualWorkspaceChanges, type PathContext } from "./paths";
export { hostArguments, withNamedPaths, type HostArguments } from "./argument-paths";
export { isConnectionClosed, isDroppedConnection, isExpiredSession, isExpiredWhileStarting, isGatewayProcessFailed } from "./expired";
export { isLostCall, LOST_CALL_CODE } from "./lost-calls";
export { SESSION_TAG_ENV } from "./session-processes";
export { stderrLogPrefix } from "./transport";
