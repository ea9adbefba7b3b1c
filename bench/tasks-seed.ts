/** Bulk rows for the task benchmarks, written straight into `mcp_tasks` (one statement per chunk). */
import type { Db } from "../dist/cjs/tasks/index.cjs";

const COLUMNS =
  "id, user_id, thread_id, server_name, driver_name, remote_task_id, task_name, status, driver_data, notification_status, " +
  "next_poll_at, poll_attempt_count, consecutive_poll_error_count, created_at, updated_at, event_version, notified_version";

/**
 * `due` pollable rows due at `at`, then `terminal` completed and delivered rows. A row's remote id is its id
 * (`due-0000000`, …); `driverData` (plain strings only) is written into every row.
 */
export async function seedRows(db: Db, due: number, terminal: number, at: Date, driverData: Record<string, string> = {}): Promise<void> {
  const ts = at.toISOString();
  const data = JSON.stringify(driverData).replace(/'/g, "''");
  const cast = db.dialect === "postgres" ? "::timestamptz" : "";
  const chunk = 1000;
  for (const [count, prefix, status, note, version, next] of [
    [due, "due", "working", "none", 0, `$1${cast}`],
    [terminal, "done", "completed", "delivered", 1, "NULL"],
  ] as const) {
    for (let start = 0; start < count; start += chunk) {
      const n = Math.min(chunk, count - start);
      const values = Array.from({ length: n }, (_, i) => {
        const id = `${prefix}-${String(start + i).padStart(7, "0")}`;
        return `('${id}', 'bench', 'thread', 'jobs', 'ordinary-tools', '${id}', 'job', '${status}', '${data}', '${note}', ${next}, 0, 0, $1${cast}, $1${cast}, ${version}, ${version})`;
      });
      await db.rows(`INSERT INTO mcp_tasks (${COLUMNS}) VALUES ${values.join(", ")}`, [ts]);
    }
  }
}
