export * from "./config";
export * from "./mcp";
export {
  CredentialError,
  headerNameProblem,
  headerValueProblem,
  mergeHeaders,
  OAuthTokenManager,
  runSecrets,
  runUserId,
  type HeaderLayer,
  type HeaderMap,
  type OAuthTokenManagerOptions,
} from "./credentials";
export { consoleLogger, silentLogger, RecordingLogger, type Logger } from "./shared";
export {
  ATTENTION_TASK_STATUSES,
  DuplicateMcpRemoteTaskError,
  McpTaskDriverRegistry,
  McpTaskProtocolError,
  openTaskStore,
  POLLABLE_TASK_STATUSES,
  TaskSnapshot,
  TaskStatus,
  TaskStore,
  TaskStoreConfigError,
  TaskSubmitRequest,
  TERMINAL_TASK_STATUSES,
  type McpTaskDriver,
  type OpenTaskStoreOptions,
  type TaskRecord,
  type TaskReference,
  type TaskSubmission,
} from "./tasks";
export {
  adminTokenAuthorize,
  createGatewayApp,
  stdioAllowlist,
  validateStdioLaunch,
  type GatewayAppOptions,
  type GatewayAuthorize,
  type GatewayToolkit,
  type GatewayUser,
  type StdioLaunchOptions,
  type StdioLaunchServer,
} from "./gateway";
