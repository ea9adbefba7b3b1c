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
