/**
 * Progress routing on a pooled session: notifications read in the same chunk as the result still reach the call's
 * listener, and a finished call leaves no token behind.
 */
import { afterAll, expect, test } from "@jest/globals";
import type { Progress } from "@modelcontextprotocol/sdk/types.js";
import { McpServerSchema, RecordingLogger } from "../../lib";
import { SessionPool } from "../../lib/sessions/pool";
import { EMPTY_HEADERS } from "../../lib/shared/headers";
import { stdioFixture } from "../fixtures/stdio";

const pool = new SessionPool(new RecordingLogger());
afterAll(() => pool.close());

test("every notification sent before the result is delivered, and the token is forgotten with the result", async () => {
  const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["progress"] }) });
  const lease = await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: 30_000 });
  try {
    const { client, progress } = lease.session;
    for (let round = 0; round < 3; round += 1) {
      const seen: Progress[] = [];
      const registration = progress.register((p) => seen.push(p));
      // flush: false lets the server write the notifications and the result in one go.
      const result = await client.callTool({ name: "progress", arguments: { steps: 3, flush: false }, _meta: { progressToken: registration.token } });
      registration.done();
      expect(result.content).toEqual([{ type: "text", text: "done" }]);
      expect(seen.map((p) => p.progress)).toEqual([1, 2, 3]);
      expect(progress.routed).toBe(0);
    }
  } finally {
    lease.release();
  }
});

test("calls running at once on one session each get only their own notifications", async () => {
  const server = McpServerSchema.parse({ type: "stdio", ...stdioFixture({ name: "local", toolNames: ["progress"] }) });
  const lease = await pool.acquire("local", server, { headers: EMPTY_HEADERS, initTimeoutMs: 30_000 });
  try {
    const { client, progress } = lease.session;
    const calls = [2, 3].map((steps) => {
      const seen: Progress[] = [];
      const registration = progress.register((p) => seen.push(p));
      return { seen, registration, result: client.callTool({ name: "progress", arguments: { steps, flush: true }, _meta: { progressToken: registration.token } }) };
    });
    for (const call of calls) {
      await call.result;
      call.registration.done();
    }
    expect(calls.map((call) => call.seen.map((p) => [p.progress, p.total]))).toEqual([
      [
        [1, 2],
        [2, 2],
      ],
      [
        [1, 3],
        [2, 3],
        [3, 3],
      ],
    ]);
    expect(progress.routed).toBe(0);
  } finally {
    lease.release();
  }
});
