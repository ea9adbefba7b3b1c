import * as nodePath from "node:path";
import { realFolderPath } from "../shared/data-dir";

/** A URL's scheme, or a Windows drive (`C:`): no path the child reads from its cwd. */
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;
/** Links each process reads as its own (`/proc/self/cwd`, `/dev/stderr`): followed here, they name its files. */
const PER_PROCESS = /^\/(?:proc\/(?:self|thread-self)|dev\/(?:fd|stdin|stdout|stderr))(?:\/|$)/;

/**
 * A stdio `cwd` (`written`, and `resolved` against the config's folder) holding a `$VAR` value, as secrets to add: the
 * resolving, and the child's working folder (its real path), normalize that value out of the form redaction looks for
 * (`./s3cr3t`, `s3cr3t/`, `/srv//s3cr3t`, a link on the way, `..` after a link, which the kernel reads after the link
 * where `resolve` drops it as text), and what is left of it would show where the path does. The resolved path and the
 * real path of the path as spawned are secrets as a whole when either no longer holds the value as written.
 */
export function cwdSecrets(written: string, resolved: string, secrets: readonly string[]): string[] {
  const held = secrets.filter((secret) => written.includes(secret));
  if (held.length === 0) return [];
  const real = realFolderPath(nodePath.isAbsolute(written) ? written : resolved);
  return [...new Set([resolved, real])].filter((form) => held.some((secret) => !form.includes(secret)));
}

/**
 * The forms a stdio server's `$VAR` values that are paths take once its child resolves them, as secrets to add: a
 * server that takes a folder in its `args` or `env` echoes it normalized (`/srv//t1/` as `/srv/t1`) and by its real
 * path (a link followed), a relative one (`./t1`, `t1/`) read from the configured `cwd`. A form that still holds the
 * value as written, or is the root, adds nothing; nor does a URL. A relative value without a configured `cwd` is read
 * from each thread's workspace, which is not known here: it stays a secret as written only. A link each process reads
 * as its own is not followed: here it would name this process's folder or stream (`/dev/stdin` as `/dev/null`).
 */
export function resolvedPathSecrets(secrets: readonly string[], cwd: string | undefined): string[] {
  const added = new Set<string>();
  for (const secret of secrets) {
    if (!secret.startsWith("/") && (cwd === undefined || SCHEME.test(secret))) continue;
    const resolved = nodePath.resolve(cwd ?? "/", secret);
    for (const form of PER_PROCESS.test(resolved) ? [resolved] : [resolved, realFolderPath(resolved)]) {
      if (form !== nodePath.sep && !form.includes(secret) && !secrets.includes(form)) added.add(form);
    }
  }
  return [...added];
}
