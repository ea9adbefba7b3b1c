/**
 * Where the task store lives: `MCP_HARNESS_DATABASE_URL` (`sqlite:<path>` or `postgres://…`), else
 * `sqlite:<data dir>/tasks.sqlite` with the data dir from `MCP_HARNESS_DATA_DIR` (default `./.mcp-harness`).
 * Messages name the variable and never repeat the URL's password.
 */
import * as path from "node:path";
import { resolveDataDir } from "../../shared/data-dir";
import { userInfoUnencoded } from "../../shared/url-user-info";

export const DATABASE_URL_VARIABLE = "MCP_HARNESS_DATABASE_URL";
export { DATA_DIR_ENV_VAR as DATA_DIR_VARIABLE, DEFAULT_DATA_DIR } from "../../shared/data-dir";
export const DEFAULT_SQLITE_FILE = "tasks.sqlite";

/** A store that cannot be opened as configured: a bad URL, an unreachable or refusing database, a missing folder. */
export class TaskStoreConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TaskStoreConfigError";
  }
}

export interface SqliteTarget {
  dialect: "sqlite";
  /** Absolute path of the database file. */
  file: string;
  /** False for the default file: its folder is created; an explicit path's folder must exist. */
  explicit: boolean;
}

export interface PostgresTarget {
  dialect: "postgres";
  host: string;
  port: number;
  database: string;
  user: string;
  password: string | undefined;
  schema: string | undefined;
  ssl: false | { rejectUnauthorized: boolean };
  /** The URL without its password, for messages. */
  display: string;
}

export type DatabaseTarget = SqliteTarget | PostgresTarget;

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

export function isSqlIdentifier(name: string): boolean {
  return IDENTIFIER.test(name);
}

/**
 * `url` wins over the environment. `source` names where the URL came from in messages.
 */
export function resolveDatabaseTarget(
  opts: { url?: string; env?: NodeJS.ProcessEnv; cwd?: string; dataDir?: string; source?: string } = {},
): DatabaseTarget {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const source = opts.source ?? (opts.url !== undefined ? "the task store url" : DATABASE_URL_VARIABLE);
  const raw = (opts.url ?? env[DATABASE_URL_VARIABLE] ?? "").trim();
  if (raw === "") {
    return { dialect: "sqlite", file: path.join(resolveDataDir({ dataDir: opts.dataDir, env, cwd }), DEFAULT_SQLITE_FILE), explicit: false };
  }
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(raw)?.[1]?.toLowerCase();
  if (scheme === "sqlite") return sqliteTarget(raw.slice("sqlite:".length), cwd, source);
  if (scheme === "postgres" || scheme === "postgresql") return postgresTarget(raw, source);
  throw new TaskStoreConfigError(`${source} must be sqlite:<path> or postgres://user@host:port/database`);
}

function sqliteTarget(rest: string, cwd: string, source: string): SqliteTarget {
  // sqlite:///abs/path and sqlite://rel are accepted alongside sqlite:/abs/path and sqlite:rel.
  let file = rest.startsWith("//") ? rest.slice(2) : rest;
  const query = file.indexOf("?");
  if (query !== -1) file = file.slice(0, query);
  if (file === "") throw new TaskStoreConfigError(`${source} names no SQLite file (expected sqlite:<path>)`);
  if (file === ":memory:" || file.startsWith("file::memory:")) {
    throw new TaskStoreConfigError(`${source} names an in-memory SQLite database; durable tasks need a file`);
  }
  return { dialect: "sqlite", file: path.resolve(cwd, file), explicit: true };
}

function postgresTarget(raw: string, source: string): PostgresTarget {
  // Read as the URL parser reads it, a fragment of the password would be the host or a parameter's name, both quoted
  // in the messages below. A second '@' is fine here: this parser takes the user info up to the last one.
  if (userInfoUnencoded(raw, false)) {
    throw new TaskStoreConfigError(`${source} holds user info that is not percent-encoded (an '@' after the end of its host); percent-encode the user name and password`);
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TaskStoreConfigError(`${source} is not a valid postgres:// URL`);
  }
  const decode = (text: string, what: string) => {
    try {
      return decodeURIComponent(text);
    } catch {
      throw new TaskStoreConfigError(`${source} has a badly encoded ${what}`);
    }
  };
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  if (host === "") throw new TaskStoreConfigError(`${source} names no PostgreSQL host`);
  const port = url.port === "" ? 5432 : Number(url.port);
  const database = decode(url.pathname.replace(/^\//, ""), "database name");
  if (database === "" || database.includes("/")) {
    throw new TaskStoreConfigError(`${source} must name one database (postgres://user@host:port/database)`);
  }
  const user = decode(url.username, "user name") || "postgres";
  const password = url.password === "" ? undefined : decode(url.password, "password");
  let schema: string | undefined;
  let ssl: PostgresTarget["ssl"] = false;
  for (const [key, value] of url.searchParams) {
    if (key === "schema") {
      if (!isSqlIdentifier(value)) throw new TaskStoreConfigError(`${source} has a schema that is not a plain SQL identifier`);
      schema = value;
    } else if (key === "sslmode") {
      if (value === "disable") ssl = false;
      else if (value === "require" || value === "prefer" || value === "no-verify") ssl = { rejectUnauthorized: false };
      else if (value === "verify-ca" || value === "verify-full") ssl = { rejectUnauthorized: true };
      else throw new TaskStoreConfigError(`${source} has an unsupported sslmode`);
    } else {
      throw new TaskStoreConfigError(`${source} has an unsupported parameter '${key}' (supported: schema, sslmode)`);
    }
  }
  const display = `postgres://${encodeURIComponent(user)}@${url.host}/${encodeURIComponent(database)}`;
  return { dialect: "postgres", host, port, database, user, password, schema, ssl, display };
}
