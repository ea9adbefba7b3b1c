/**
 * The one logging seam of the package. Every message is written by this project's own code and must
 * never contain a secret value: name fields, headers and variables, never their values.
 */
export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

const PREFIX = "[mcp-harness]";

export const consoleLogger: Logger = {
  debug: (m) => {
    if (process.env.MCP_HARNESS_DEBUG) console.debug(`${PREFIX} ${m}`);
  },
  info: (m) => console.info(`${PREFIX} ${m}`),
  warn: (m) => console.warn(`${PREFIX} ${m}`),
  error: (m) => console.error(`${PREFIX} ${m}`),
};

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** A logger that keeps every line, for tests and for the CLI's reports. */
export class RecordingLogger implements Logger {
  readonly lines: { level: keyof Logger; message: string }[] = [];
  debug(message: string): void {
    this.lines.push({ level: "debug", message });
  }
  info(message: string): void {
    this.lines.push({ level: "info", message });
  }
  warn(message: string): void {
    this.lines.push({ level: "warn", message });
  }
  error(message: string): void {
    this.lines.push({ level: "error", message });
  }
  messages(level?: keyof Logger): string[] {
    return this.lines.filter((l) => !level || l.level === level).map((l) => l.message);
  }
}
