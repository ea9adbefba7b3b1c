export {
  DEFAULT_SESSION_INIT_TIMEOUT_SECONDS,
  DEFAULT_TOOL_CALL_TIMEOUT_SECONDS,
  MAX_TIMEOUT_SECONDS,
  ExtensionsConfigSchema,
  MCP_TASK_NAME_MAX_LENGTH,
  MCP_TASK_SERVER_NAME_MAX_LENGTH,
  McpHeadersFromContextSchema,
  McpOAuthSchema,
  McpRoutingOverrideSchema,
  McpRoutingSchema,
  McpServerSchema,
  McpTasksSettingsSchema,
  McpTaskToolsetSchema,
  McpToolOverrideSchema,
  McpUserAuthSchema,
  normalizeTransportName,
  OnMissingSchema,
  ROUTING_PRIORITY_MAX,
  ROUTING_PRIORITY_MIN,
  RoutingModeSchema,
  TRANSPORT_TYPES,
  type ExtensionsConfig,
  type ExtensionsConfigInput,
  type McpHeadersFromContextConfig,
  type McpOAuthConfig,
  type McpRouting,
  type McpRoutingOverride,
  type McpServerConfig,
  type McpServerConfigInput,
  type McpTasksSettings,
  type McpTaskToolset,
  type McpTransportType,
  type McpUserAuthConfig,
  type OnMissing,
} from "./schema";
export { resolveEnvReferences, type EnvResolution } from "./env";
export {
  CONFIG_FILE_NAMES,
  CONFIG_PATH_ENV_VAR,
  ConfigFileNotFoundError,
  configSearchDirs,
  resolveExtensionsConfigPath,
  type ConfigPathSource,
  type ResolveConfigPathOptions,
} from "./path";
export { sameConnection } from "./connection";
export { isSensitiveKey, launchCredentials, urlCredentials } from "./sensitive";
export { isDisabledServer, laxServer, laxTaskSettings } from "./lax";
export { getConfigSignature, readSignedFile, signaturesEqual, type ConfigSignature, type SignedFile } from "./signature";
export { ConfigJsonSyntaxError, ConfigReadError, ConfigValidationError, formatIssuePath, McpTaskConfigurationError, type ConfigIssue } from "./errors";
export {
  loadExtensionsConfig,
  type LoadedExtensionsConfig,
  type LoadExtensionsConfigOptions,
  type SkippedServer,
} from "./load";
