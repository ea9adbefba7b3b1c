import * as nodePath from "node:path";

/**
 * The secrets sent to the stdio sessions that share one thread workspace: each (server, user) of a thread has a
 * child of its own, but they all write into one folder, and every call there lists (and may quote) what any of them
 * wrote, a file named with what another user's call sent its child included. Each session's calls are scrubbed of
 * all of them.
 *
 * Held as the union of its sessions' own memories (each bounded by `SESSION_SECRETS_LIMIT`), so it is bounded as
 * they are. A session that leaves (its child and what it started gone) takes its secrets out once the calls that ran
 * on the workspace as it left are over: one of them may still list a file it wrote. Not once no call at all runs: on a
 * thread many users share, calls may overlap for weeks, and every user's secrets would pile up. Dropped when no
 * session uses the folder and no call runs there. Process-wide, so the sessions of a pool retired by a reload and of its successor
 * share it too. For the same reasons it also keeps what the removal of a temporary thread's temp files asks of the
 * thread's sessions as a whole (`keptThreadRun`, `since`, `calls`).
 */
export class WorkspaceSecrets {
  /** Each secret, with how many member sessions were sent it. */
  private readonly holders = new Map<string, number>();
  /** `holders`' secrets as a list, until they change. */
  private list: readonly string[] | undefined;
  private members = 0;

  get sessions(): number {
    return this.members;
  }
  /**
   * Some member session served a run that is not a stateless one's (see `SessionScope.temporary`) while the record
   * lived: the thread is kept, and its temp files are not a temporary thread's (see `removeThreadSkeleton`).
   */
  keptThreadRun = false;
  /** When the first of the current member sessions joined (ms since the epoch): what is older there is no work of theirs. */
  readonly since = Date.now();
  /** Calls running on member sessions (leases held). */
  private busy = 0;
  /** Counts the members that left while calls ran: a call started in epoch `e` ran as those of epochs before `e` left. */
  private epoch = 0;
  /** Running calls by the epoch they started in; insertion order is epoch order, so the first key is the oldest. */
  private readonly running = new Map<number, number>();

  /** Calls running on member sessions now. */
  get calls(): number {
    return this.busy;
  }
  /** What members that left while calls ran were sent, in epoch order; taken out once no call of that epoch or older runs. */
  private departed: { readonly epoch: number; readonly values: readonly string[] }[] = [];

  private constructor(private readonly folder: string) {}

  /** A new member session of the workspace `folder` (its record is created with the first one). */
  static join(folder: string): WorkspaceSecrets {
    const key = nodePath.resolve(folder);
    let shared = byFolder.get(key);
    if (shared === undefined) {
      shared = new WorkspaceSecrets(key);
      byFolder.set(key, shared);
    }
    shared.members += 1;
    return shared;
  }

  /** A member was sent `value` for the first time. */
  add(value: string): void {
    const held = this.holders.get(value);
    this.holders.set(value, (held ?? 0) + 1);
    if (held === undefined) this.list = undefined;
  }

  /** Every secret the workspace's sessions were sent: the same array until one is added or taken out. */
  values(): readonly string[] {
    return (this.list ??= [...this.holders.keys()]);
  }

  /** A call starts on a member session; hand what it returns to `letGo` when the call is over. */
  hold(): number {
    this.busy += 1;
    const epoch = this.epoch;
    this.running.set(epoch, (this.running.get(epoch) ?? 0) + 1);
    return epoch;
  }

  /** A call on a member session is over; `epoch` is what its `hold()` returned. */
  letGo(epoch: number): void {
    this.busy -= 1;
    const left = (this.running.get(epoch) ?? 1) - 1;
    if (left > 0) this.running.set(epoch, left);
    else this.running.delete(epoch);
    const oldest = this.running.keys().next().value;
    let done = 0;
    while (done < this.departed.length && (oldest === undefined || this.departed[done].epoch < oldest)) done += 1;
    for (const { values } of this.departed.splice(0, done)) this.takeOut(values);
    this.dropIfUnused();
  }

  /** A member session is gone (its child and what it started ended), with what it was sent. */
  leave(values: Iterable<string>): void {
    this.members -= 1;
    if (this.busy > 0) {
      this.departed.push({ epoch: this.epoch, values: [...values] });
      this.epoch += 1;
    } else this.takeOut(values);
    this.dropIfUnused();
  }

  private takeOut(values: Iterable<string>): void {
    for (const value of values) {
      const held = this.holders.get(value);
      if (held === undefined) continue;
      if (held > 1) this.holders.set(value, held - 1);
      else {
        this.holders.delete(value);
        this.list = undefined;
      }
    }
  }

  private dropIfUnused(): void {
    if (this.members === 0 && this.busy === 0 && byFolder.get(this.folder) === this) byFolder.delete(this.folder);
  }
}

const byFolder = new Map<string, WorkspaceSecrets>();

/** Whether sessions of the workspace `folder` share secrets now (for tests and diagnostics). */
export function sharesWorkspaceSecrets(folder: string): boolean {
  return byFolder.has(nodePath.resolve(folder));
}

/** How many sessions of the workspace `folder` have not left it yet (for tests and diagnostics). */
export function workspaceSessionCount(folder: string): number {
  return byFolder.get(nodePath.resolve(folder))?.sessions ?? 0;
}
