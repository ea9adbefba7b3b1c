/**
 * Reading the errors of the database drivers, without the drivers: the error helpers need no sequelize, sqlite3
 * or pg instance, only the shapes of their errors.
 */

/** The driver's own error inside a sequelize error (whose `parent` it is), else the error itself. */
export function driverError(err: unknown): unknown {
  if (!(err instanceof Error) || !err.name.startsWith("Sequelize")) return err;
  return (err as { parent?: unknown }).parent ?? err;
}

export function isSqliteBusy(err: unknown): boolean {
  const e = driverError(err);
  const code = (e as { code?: unknown } | null)?.code;
  return code === "SQLITE_BUSY" || code === "SQLITE_LOCKED" || (e instanceof Error && /SQLITE_BUSY/.test(e.message));
}

const PG_REASONS: Record<string, string> = {
  "28P01": "password authentication failed",
  "28000": "the server rejected the login (no such role, or not allowed by pg_hba.conf)",
  "3D000": "the database does not exist",
  "42501": "permission denied",
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host name lookup failed",
  EHOSTUNREACH: "host unreachable",
  ETIMEDOUT: "connection timed out",
  ECONNRESET: "connection reset",
};

/** A connection failure as text that names codes, never the server's message or the URL's password. */
export function describePgFailure(failure: unknown): string {
  const err = driverError(failure);
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string") return PG_REASONS[code] ?? `error code ${code}`;
  if (err instanceof Error && /timeout/i.test(err.message)) return "connection timed out";
  return "connection failed";
}

