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
