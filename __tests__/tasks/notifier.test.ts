/** The in-memory notifier that stands in for threads in the service tests: idempotent per key, scriptable. */
import { describe, expect, test } from "@jest/globals";
import { BusyThreadError, MemoryTaskNotifier, ThreadGoneError, type TaskDelivery } from "../../lib/tasks";
import { taskDelivery, type DeliveryOverrides } from "./deliveries";

const delivery = (overrides: DeliveryOverrides = {}): TaskDelivery =>
  taskDelivery({ userId: "alice", threadId: "thread-1", ...overrides, event: { task_name: "report", ...overrides.event } });

describe("MemoryTaskNotifier", () => {
  test("a second delivery with the same key returns the first run and records nothing new", async () => {
    const notifier = new MemoryTaskNotifier();
    const first = await notifier.deliver(delivery(), "mcp-task:mcp-task-1:1:0");
    expect(await notifier.deliver(delivery({ dispatchAttempt: 9 }), "mcp-task:mcp-task-1:1:0")).toEqual(first);
    const second = await notifier.deliver(delivery({ dispatchAttempt: 1 }), "mcp-task:mcp-task-1:1:1");
    expect(second.runId).not.toBe(first.runId);
    expect(notifier.deliveries.map((d) => [d.idempotencyKey, d.runId, d.delivery.dispatchAttempt])).toEqual([
      ["mcp-task:mcp-task-1:1:0", first.runId, 0],
      ["mcp-task:mcp-task-1:1:1", second.runId, 1],
    ]);
    expect(notifier.deliveriesOf("mcp-task-1")).toHaveLength(2);
    expect(notifier.deliveriesOf("other")).toEqual([]);
  });

  test("runs succeed by default; a test sets a run's status, or the status of runs to come; other users see nothing", async () => {
    const notifier = new MemoryTaskNotifier();
    const { runId } = await notifier.deliver(delivery(), "k1");
    expect(await notifier.getRun(runId, "alice")).toEqual({ status: "success" });
    expect(await notifier.getRun(runId, "bob")).toBeNull();
    expect(await notifier.getRun("run-missing", "alice")).toBeNull();
    notifier.setRunStatus(runId, "error", "model crashed");
    expect(await notifier.getRun(runId, "alice")).toEqual({ status: "error", error: "model crashed" });
    notifier.setNewRunStatus("running");
    const later = await notifier.deliver(delivery(), "k2");
    expect(await notifier.getRun(later.runId, "alice")).toEqual({ status: "running" });
    notifier.forgetRun(later.runId);
    expect(await notifier.getRun(later.runId, "alice")).toBeNull();
    expect(() => notifier.setRunStatus("run-missing", "success")).toThrow(RangeError);
  });

  test("busy, gone and failing threads refuse deliveries with the matching error, and recover when cleared", async () => {
    const notifier = new MemoryTaskNotifier();
    notifier.markBusy("thread-1");
    await expect(notifier.deliver(delivery(), "k")).rejects.toBeInstanceOf(BusyThreadError);
    notifier.markBusy("thread-1", false);
    notifier.markGone("thread-1");
    await expect(notifier.deliver(delivery(), "k")).rejects.toBeInstanceOf(ThreadGoneError);
    notifier.markGone("thread-1", false);
    notifier.failDeliveries("thread-1", "connection reset");
    await expect(notifier.deliver(delivery(), "k")).rejects.toThrow(new Error("connection reset"));
    await expect(notifier.deliver(delivery({ threadId: "thread-2" }), "k2")).resolves.toHaveProperty("runId");
    notifier.failDeliveries("thread-1", null);
    await expect(notifier.deliver(delivery(), "k")).resolves.toHaveProperty("runId");
    expect(notifier.deliveries.map((d) => d.delivery.threadId)).toEqual(["thread-2", "thread-1"]);
  });

  test("a recorded delivery is a copy: later changes by the caller do not alter it", async () => {
    const notifier = new MemoryTaskNotifier();
    const d = delivery();
    await notifier.deliver(d, "k");
    (d.event.result as { ok: boolean }).ok = false;
    expect(notifier.deliveries[0].delivery.event.result).toEqual({ ok: true });
  });
});
