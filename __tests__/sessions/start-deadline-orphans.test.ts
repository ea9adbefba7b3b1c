/**
 * SPEC §5 (issue 10): `session_init_timeout` bounds the whole of a stdio session's start, the wait for the one-time sweep
 * of the processes a killed host left included (it reads /proc, off the event loop). Its own file: the sweep runs once
 * per process (per module registry here), with the first stdio session, and this test must be that session. libuv's
 * thread pool is held (`BusyPool`), so the sweep cannot go on until the test releases it.
 */
import { afterAll, expect, test } from "@jest/globals";
import * as path from "node:path";
import { RecordingLogger } from "../../lib";
import { McpServerSchema } from "../../lib/config/schema";
import { SessionPool } from "../../lib/sessions/pool";
import { StartStepTimeoutError } from "../../lib/sessions/start-failure";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { BusyPool } from "../fixtures/busy-pool";

const SH_SERVER = path.join(__dirname, "..", "fixtures", "sh-server.sh");
let busy: BusyPool | undefined;
let pool: SessionPool | undefined;

// Also after a test that timed out: a pool left held keeps jest from exiting.
afterAll(async () => {
  await busy?.release();
  await pool?.close();
});

test("the first stdio start of the process, held by a stalled sweep of a killed host's processes, fails at session_init_timeout naming that step; the next start works", async () => {
  const fifos = await BusyPool.fifos("mcp-start-deadline-orphans-fifos-");
  // No data dir: no thread folders to prepare, the sweep is all that comes before the spawn.
  pool = new SessionPool(new RecordingLogger());
  const server = McpServerSchema.parse({ type: "stdio", command: "bash", args: [SH_SERVER] });
  busy = BusyPool.hold(fifos);
  const failure = await pool.acquire("sh", server, { headers: EMPTY_HEADERS, initTimeoutMs: 1000 }).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(failure).toBeInstanceOf(StartStepTimeoutError);
  expect((failure as StartStepTimeoutError).step).toBe("orphan sweep");
  await busy.release();
  busy = undefined;
  const lease = await pool.acquire("sh", server, { headers: EMPTY_HEADERS, initTimeoutMs: 30_000 });
  lease.release();
  expect(typeof lease.session.pid).toBe("number");
}, 60_000);
