import * as nodePath from "node:path";
import { realFolderPath } from "../shared/data-dir";

/**
 * The forms a stdio server's `$VAR` values that are paths take once its child resolves them, as secrets to add: a
 * server that takes a folder in its `args` or `env` echoes it normalized (`/srv//t1/` as `/srv/t1`) and by its real
 * path (a link followed), a relative one (`./t1`) read from the configured `cwd`. A form that still holds the value as
 * written, or is the root, adds nothing. A relative value without a configured `cwd` is read from each thread's
 * workspace, which is not known here: it stays a secret as written only.
 */
export function resolvedPathSecrets(secrets: readonly string[], cwd: string | undefined): string[] {
  const added = new Set<string>();
  for (const secret of secrets) {
    const relative = secret.startsWith("./") || secret.startsWith("../");
    if (!secret.startsWith("/") && !(relative && cwd)) continue;
    const resolved = nodePath.resolve(cwd ?? "/", secret);
    for (const form of [resolved, realFolderPath(resolved)]) {
      if (form !== nodePath.sep && !form.includes(secret) && !secrets.includes(form)) added.add(form);
    }
  }
  return [...added];
}
