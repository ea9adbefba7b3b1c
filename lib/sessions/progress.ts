import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ProgressNotificationSchema, type Progress } from "@modelcontextprotocol/sdk/types.js";

export type ProgressListener = (progress: Progress) => void;

export interface ProgressRegistration {
  readonly token: string;
  /** Forgets the token (what was read with the result has been delivered by then). */
  done(): void;
}

/**
 * Routes `notifications/progress` by token on one session. The SDK's own routing drops updates that
 * arrive in the same read as the result (it hands notifications to a later microtask but removes the
 * handler when the response is read), so calls use tokens of ours. Those notifications are dispatched in a microtask
 * queued while the read is parsed, before the one that resumes the call, so a call's token is forgotten as soon
 * as its result is in.
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

  /** A fresh token for one call; `done()` forgets it (what was read with the result has been delivered by then). */
  register(listener: ProgressListener): ProgressRegistration {
    const token = `harness-${++this.counter}`;
    this.listeners.set(token, listener);
    return { token, done: () => void this.listeners.delete(token) };
  }

  /** Tokens still routed (for tests and diagnostics). */
  get routed(): number {
    return this.listeners.size;
  }
}
