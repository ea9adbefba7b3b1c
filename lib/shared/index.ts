export { isOwnText, McpToolCallError, ownText } from "./errors";
export { withCallSignal } from "./abort";
export { Deadline, DeadlineExceededError, onAbort, withDeadline, withExtendableDeadline, type DeadlineKind, type DeadlineLimits } from "./deadline";
export { MAX_TIMER_MS, MAX_TIMER_SECONDS, setClampedTimeout, timerDelay } from "./timers";
export { boundText } from "./text";
export {
  assertSendableHeader,
  collapseHeaderCase,
  CredentialError,
  EMPTY_HEADERS,
  headerNameProblem,
  headerValueProblem,
  invalidHeaderMessage,
  MergedHeaders,
  mergeHeaders,
  shownHeaderName,
  type HeaderLayer,
  type HeaderMap,
} from "./headers";
export {
  composeInterceptors,
  rewritingInterceptor,
  McpToolCallRequest,
  type McpCallOutcome,
  type McpToolCallHandler,
  type McpToolCallPatch,
  type McpToolCallRequestInit,
  type McpToolInterceptor,
} from "./interceptor";
export { headerSecrets } from "./header-secrets";
export { recordSecrets, Redactor, REDACTED } from "./redact";
export { consoleLogger, silentLogger, RecordingLogger, type Logger } from "./logger";
export { runSecrets, runThreadId, runUserId } from "./identity";
export { DATA_DIR_ENV_VAR, DEFAULT_DATA_DIR, resolveDataDir } from "./data-dir";
