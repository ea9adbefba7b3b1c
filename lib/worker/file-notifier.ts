/**
 * A notifier that appends every delivery to a JSON-lines file instead of starting a run: for tests across
 * processes (the worker CLI uses it when `MCP_HARNESS_TEST_NOTIFY_FILE` is set) and for dry runs. Every run it
 * "starts" has succeeded. The run id is derived from the idempotency key, so a redelivery with the same key
 * answers the same run; it is still appended (marked `redelivery`), so a reader counts distinct keys.
 */
import { appendFile, open } from "node:fs/promises";
import type { NotificationRun, TaskDelivery, TaskNotifier } from "../tasks";

export const TEST_NOTIFY_FILE_VARIABLE = "MCP_HARNESS_TEST_NOTIFY_FILE";

/** One line of the file. */
export interface FileNotifierLine {
  key: string;
  runId: string;
  taskId: string;
  userId: string;
  threadId: string;
  dispatchVersion: number;
  dispatchAttempt: number;
  status: string;
  /** The key had been delivered before (by this or another process). */
  redelivery: boolean;
  pid: number;
}

const RUN_PREFIX = "file-run:";

export class FileTaskNotifier implements TaskNotifier {
  constructor(readonly path: string) {}

  async deliver(delivery: TaskDelivery, idempotencyKey: string): Promise<{ runId: string }> {
    const runId = `${RUN_PREFIX}${idempotencyKey}`;
    // The marker is created after the line is written: a crash in between repeats the line, never loses it.
    const redelivery = await this.#exists(idempotencyKey);
    const line: FileNotifierLine = {
      key: idempotencyKey,
      runId,
      taskId: delivery.taskId,
      userId: delivery.userId,
      threadId: delivery.threadId,
      dispatchVersion: delivery.dispatchVersion,
      dispatchAttempt: delivery.dispatchAttempt,
      status: delivery.event.status,
      redelivery,
      pid: process.pid,
    };
    await appendFile(this.path, `${JSON.stringify(line)}\n`);
    if (!redelivery) await this.#mark(idempotencyKey);
    return { runId };
  }

  async getRun(runId: string): Promise<NotificationRun | null> {
    return runId.startsWith(RUN_PREFIX) && (await this.#exists(runId.slice(RUN_PREFIX.length))) ? { status: "success" } : null;
  }

  #marker(key: string): string {
    return `${this.path}.${Buffer.from(key).toString("base64url")}.key`;
  }

  async #exists(key: string): Promise<boolean> {
    try {
      await (await open(this.#marker(key), "r")).close();
      return true;
    } catch {
      return false;
    }
  }

  async #mark(key: string): Promise<void> {
    try {
      await (await open(this.#marker(key), "wx")).close();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
}
