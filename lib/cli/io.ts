/** What a command writes to and reads from; the bin wires it to the process, tests to arrays. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** stderr is a terminal: long operations print progress lines there. Off for pipes, files and `--json`. */
  interactive?: boolean;
  /** Ends a long-running command (`worker`) as SIGTERM does; the bin relies on the signals alone. */
  stopSignal?: AbortSignal;
}
