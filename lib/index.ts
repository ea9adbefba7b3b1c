export * from "./config";
export * from "./mcp";
export { consoleLogger, silentLogger, RecordingLogger, type Logger } from "./logger";
