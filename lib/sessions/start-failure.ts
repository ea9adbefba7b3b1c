const CAUSES: Readonly<Record<string, string>> = {
  ENOENT: "the command or its working folder does not exist",
  EACCES: "the command is not executable",
};

/**
 * What a call shows when its stdio child could not be spawned: the server and the error code. Node's own text
 * ("spawn /home/op/bin/server ENOENT") names the command's local path, which only the operator's logs may show.
 * `undefined` for any other error.
 */
export function startFailureText(serverName: string, err: unknown): string | undefined {
  const { syscall, code } = (err ?? {}) as NodeJS.ErrnoException;
  if (typeof syscall !== "string" || !syscall.startsWith("spawn")) return undefined;
  const cause = code === undefined ? "" : ` (${code}${CAUSES[code] ? `: ${CAUSES[code]}` : ""})`;
  return `could not start the stdio MCP server '${serverName}'${cause}`;
}
