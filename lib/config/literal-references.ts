/**
 * `$NAME` written inside a longer value (`"Bearer $API_TOKEN"`, `postgresql://app:$DB_PASSWORD@db/app`) stays as
 * written (SPEC §2.2: only a whole value `$NAME`, or `${NAME}` anywhere, is replaced), so the server is sent the text
 * and refuses it, or connects without the secret, and nothing says why. Where no shell reads the value (a header, the
 * URL, the child's environment, a URL among the arguments) and `NAME` is a variable the loader sees, that is almost
 * surely a mistake: the loader warns, naming the field and the variable, never a value. Other arguments are not looked
 * at: `sh -c "… $PWD …"` means the shell's variable, also beside a URL (`sh -c "npx mcp-remote https://…?key=$KEY"`).
 */
import { isPlainObject } from "../shared/plain-object";
import { resolveEnvReferences } from "./env";
import { formatIssuePath } from "./errors";

/** The warnings for one enabled server, as written in the file (before its references were resolved). */
export function literalReferenceWarnings(name: string, server: Record<string, unknown>, env: NodeJS.ProcessEnv): string[] {
  const warnings: string[] = [];
  for (const [path, text] of unexpandedFields(server, ["mcpServers", name])) {
    for (const variable of resolveEnvReferences(text, env).literal) {
      if (typeof env[variable] !== "string") continue;
      warnings.push(
        `MCP server '${name}': ${formatIssuePath(path)} holds $${variable} inside a longer value, where it is sent as written ` +
          `(only a whole value "$${variable}" is replaced); write \${${variable}} to use the variable, or $$${variable} to keep the text`,
      );
    }
  }
  return warnings;
}

/** The strings no shell reads: header values, `url`, `env` values, OAuth settings, and the arguments holding a URL. */
function* unexpandedFields(server: Record<string, unknown>, at: PropertyKey[]): Generator<[PropertyKey[], string]> {
  for (const key of ["headers", "env", "oauth"]) {
    const fields = server[key];
    if (!isPlainObject(fields)) continue;
    for (const [field, value] of Object.entries(fields)) if (typeof value === "string") yield [[...at, key, field], value];
  }
  if (typeof server.url === "string") yield [[...at, "url"], server.url];
  if (Array.isArray(server.args)) {
    for (const [i, arg] of server.args.entries()) if (typeof arg === "string" && isUrlArgument(arg)) yield [[...at, "args", i], arg];
  }
}

/** A URL (or `--flag=URL`) as a whole: a shell script that holds one has spaces, and its shell expands its `$NAME`. */
const isUrlArgument = (arg: string): boolean => arg.includes("://") && !/\s/.test(arg);
