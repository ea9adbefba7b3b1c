export {
  assertSendableHeader,
  collapseHeaderCase,
  CredentialError,
  headerNameProblem,
  headerValueProblem,
  mergeHeaders,
  type HeaderLayer,
  type HeaderMap,
} from "../shared/headers";
export { runSecrets, runUserId } from "../shared/identity";
export {
  OAuthTokenManager,
  OAUTH_HEADER,
  DEFAULT_EARLY_REFRESH_WAIT_MS,
  DEFAULT_TOKEN_REQUEST_TIMEOUT_MS,
  EARLY_REFRESH_RETRY_MS,
  type OAuthTokenManagerOptions,
} from "./oauth";
export { userAuthInterceptor } from "./user-auth";
export { contextHeadersInterceptor } from "./context-headers";
export { credentialLayers, ServerHeaders, StdioLayerWarnings, type CredentialLayers } from "./layers";
export {
  buildCustomInterceptor,
  DEFAULT_INTERCEPTOR_BUILD_TIMEOUT_MS,
  interceptorSpecs,
  InterceptorSpecError,
  loadCustomInterceptors,
  resolveInterceptorSpec,
  type ResolvedInterceptorSpec,
} from "./custom-interceptors";
