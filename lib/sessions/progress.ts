import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ProgressNotificationSchema, type Progress } from "@modelcontextprotocol/sdk/types.js";

export type ProgressListener = (progress: Progress) => void;

/**
 * Routes `notifications/progress` by token on one session. The SDK's own routing drops updates that
 * arrive in the same read as the result (it hands notifications to a later microtask but removes the
 * handler when the response is read), so calls use tokens of ours, kept until the next macrotask.
 */
export class ProgressRouter {
  private readonly listeners = new Map<string, ProgressListener>();
  private counter = 0;

  constructor(client: Client) {
    client.setNotificationHandler(ProgressNotificationSchema, (notification) => {
      const { progressToken, ...progress } = notification.params;
      this.listeners.get(String(progressToken))?.(progress);
    });
  }

  /** A fresh token for one call; `done()` forgets it after notifications already read are delivered. */
  register(listener: ProgressListener): { token: string; done(): void } {
    const token = `harness-${++this.counter}`;
    this.listeners.set(token, listener);
    return { token, done: () => void setImmediate(() => this.listeners.delete(token)) };
  }
}
