/**
 * The demo's countdown job server (graphs/demo/jobs-server.ts) over the SDK's in-memory transport, on an injected
 * clock: job ids carry their own timing, so a second server process (a new child after an eviction) answers for
 * a job the first one started; cancels and unknown ids answer in the shape the ordinary-tools driver expects.
 */
import { describe, expect, test } from "@jest/globals";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { createJobsServer } from "../../graphs/demo/jobs-server";

async function connect(now: () => number): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await createJobsServer(now).connect(serverSide);
  const client = new Client({ name: "test", version: "0" });
  await client.connect(clientSide);
  return client;
}

const call = async (client: Client, name: string, args: Record<string, unknown>) =>
  (await client.callTool({ name, arguments: args })).structuredContent as Record<string, unknown>;

describe("demo countdown jobs", () => {
  test("running until its seconds have passed (with a poll hint), then completed; another server answers the same", async () => {
    let now = 1_700_000_000_000;
    const first = await connect(() => now);
    const started = await call(first, "start_countdown", { seconds: 5 });
    expect(started).toEqual({ task_id: expect.stringMatching(/^countdown-1700000000000-5-[0-9a-f]{8}$/), status: "running" });
    const id = started.task_id as string;
    now += 2_500;
    expect(await call(first, "countdown_status", { task_id: id })).toEqual({ task_id: id, status: "running", poll_after_seconds: 3 });
    now += 2_500;
    const second = await connect(() => now);
    expect(await call(second, "countdown_status", { task_id: id })).toEqual({
      task_id: id,
      status: "completed",
      result: { counted_seconds: 5, finished_at: new Date(1_700_000_005_000).toISOString() },
    });
    await Promise.all([first.close(), second.close()]);
  });

  test("cancel before the end is cancelled (and stays so); after the end it is completed; an unknown id is task_not_found", async () => {
    let now = 1_700_000_000_000;
    const client = await connect(() => now);
    const id = (await call(client, "start_countdown", { seconds: 3 })).task_id as string;
    expect(await call(client, "countdown_cancel", { task_id: id })).toEqual({ task_id: id, status: "cancelled" });
    now += 10_000;
    expect(await call(client, "countdown_status", { task_id: id })).toEqual({ task_id: id, status: "cancelled" });
    const late = (await call(client, "start_countdown", { seconds: 1 })).task_id as string;
    now += 1_000;
    expect(await call(client, "countdown_cancel", { task_id: late })).toEqual({ task_id: late, status: "completed" });
    expect(await call(client, "countdown_status", { task_id: "countdown-1-99999-zz" })).toMatchObject({ status: "failed", error_code: "task_not_found" });
    expect(await call(client, "countdown_status", { task_id: "countdown-1-601-0123abcd" })).toMatchObject({ status: "failed", error_code: "task_not_found" });
    await client.close();
  });
});
