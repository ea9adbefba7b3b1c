/** The notifiers of SPEC §7 and the notification message they share. */
export {
  createGraphNotifier,
  type GraphNotifier,
  type GraphNotifierOptions,
  type NotifiableGraph,
  type NotificationInput,
  type NotificationRunConfig,
  type ThreadStateReader,
  type ThreadStateView,
} from "./graph";
export {
  createLangGraphServerNotifier,
  IDEMPOTENCY_METADATA_KEY,
  LANGGRAPH_API_KEY_ENV_VARS,
  LANGGRAPH_API_URL_ENV_VAR,
  langGraphApiKeyFromEnv,
  type LangGraphServerNotifierOptions,
  type NotifierClient,
} from "./server";
export {
  NOTIFICATION_INSTRUCTION,
  NOTIFICATION_KWARG,
  notificationMarkerOf,
  notificationMessage,
  notificationText,
  type NotificationMarker,
} from "./message";
export { langGraphServerLoopback, LOOPBACK_API_URL, type LoopbackFetch } from "./loopback";
