/**
 * SPEC §5: `session_init_timeout` bounds a stdio session's start as a whole, the end of a handshake that ran out
 * included: the call hears of it at the bound while the child that never answered is closed behind it, also when the
 * file system does not answer then (libuv's thread pool held by `BusyPool`: the listing of what the child started, in
 * /proc, waits for it). The closing is not lost: `close()` waits for it, and the child is gone once it resolves.
 * Its own file: the one-time sweep of a killed host's processes must be over before the pool is held.
 */
import { afterAll, expect, test } from "@jest/globals";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { RecordingLogger } from "../../lib";
import { McpServerSchema } from "../../lib/config/schema";
import { SessionPool } from "../../lib/sessions/pool";
import { StartStepTimeoutError } from "../../lib/sessions/start-failure";
import { DeadlineExceededError } from "../../lib/shared/deadline";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { BusyPool } from "../fixtures/busy-pool";
import { makeTempDir } from "../fixtures/config";
import { alive } from "../fixtures/processes";

const SH_SERVER = path.join(__dirname, "..", "fixtures", "sh-server.sh");
let busy: BusyPool | undefined;
let pool: SessionPool | undefined;

afterAll(async () => {
  await busy?.release();
  await pool?.close();
});

test("a handshake that runs out while the file system does not answer: the start fails at session_init_timeout (no step), not once the file system answers; close() then ends the child", async () => {
  const fifos = await BusyPool.fifos("mcp-start-deadline-close-fifos-");
  const log = path.join(await makeTempDir("mcp-start-deadline-close-log-"), "pid");
  // No data dir: nothing to prepare before the spawn, which needs no file-system call of the thread pool.
  pool = new SessionPool(new RecordingLogger());
  // The sweep of a killed host's processes runs with the first stdio start: over before the pool is held.
  const first = await pool.acquire("sh", McpServerSchema.parse({ type: "stdio", command: "bash", args: [SH_SERVER] }), { headers: EMPTY_HEADERS, initTimeoutMs: 30_000 });
  first.release();
  // Never answers initialize; its pid is written synchronously by the shell, read once the pool is released.
  const mute = McpServerSchema.parse({ type: "stdio", command: "bash", args: ["-c", 'echo $$ > "$0"; exec sleep 600', log] });
  busy = BusyPool.hold(fifos);
  const failure = await pool.acquire("mute", mute, { headers: EMPTY_HEADERS, initTimeoutMs: 500 }).then(
    () => undefined,
    (err: unknown) => err,
  );
  // Still held here: the start's end did not wait for the file system.
  expect(failure).toBeInstanceOf(DeadlineExceededError);
  expect(failure).not.toBeInstanceOf(StartStepTimeoutError);
  await busy.release();
  busy = undefined;
  await pool.close();
  expect(alive(Number(readFileSync(log, "utf8")))).toBe(false);
}, 30_000);
