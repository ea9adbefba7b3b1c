import { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv-provider.js";
import type { McpServerConfig } from "../config";
import type { Logger } from "../shared/logger";
import { headerSecrets } from "../shared/header-secrets";
import { Redactor } from "../shared/redact";
import { createTransport } from "./transport";
import { isConnectionClosed, noteExpiredWhileStarting } from "./expired";
import { Deadline, DeadlineExceededError, withDeadline } from "../shared/deadline";
import { processExists } from "../shared/process";
import { MAX_TIMER_MS, setClampedTimeout } from "../shared/timers";
import { WorkspaceScanner } from "./changes";
import { AFTER_EXIT_READ_MS, exited, hasExited, onChildStart, whenGone } from "./child";
import { endOrphanedSessionsOnce, endTaggedProcesses, isRunningNow, newSessionTag, taggedProcesses, type ProcessRef } from "./session-processes";
import { ProgressRouter } from "./progress";
import { exitedBeforeStart, startStep, withCwdCause } from "./start-failure";
import { unsupportedProtocol } from "./protocol-version";
import { realFolderPath } from "../shared/data-dir";
import { DEFAULT_SCOPE, type SessionScope } from "./scope";
import { ensureThreadPaths, stdioLaunch, threadFolderName, threadPaths, type ThreadPaths } from "./workspace";
import { removeThreadSkeleton, threadFolderRemoval } from "./thread-folders";
import { sweepThreadFoldersOnce } from "./thread-sweep";
import { ThreadHeartbeat } from "./thread-heartbeat";
import { WorkspaceSecrets, workspaceSessionCount } from "./workspace-secrets";

export interface McpSession {
  readonly serverName: string;
  readonly key: string;
  readonly client: Client;
  readonly progress: ProgressRouter;
  /** stdio: the scope the child serves and its thread's folders (its cwd unless the config sets one). */
  readonly scope?: SessionScope;
  readonly paths?: ThreadPaths;
  /** stdio with a thread workspace: its snapshots before and after each call, for the call's change list. */
  readonly scanner?: WorkspaceScanner;
  /** stdio: the child's process id. */
  readonly pid?: number;
  /**
   * stdio: notes that the child holds the durable task `remoteId` while it is `pending` (pollable), or no longer. The
   * LRU bound closes a child holding pending tasks only after every other one: a server keeping its jobs in the process
   * does not know them in a new child. `issued`: the id is this child's answer to a submit sent on it (see `handedOut`).
   * A submit's answer (`issued`) holds the id once more each time (a server may answer two submits with one id) and,
   * told it is not pending (no row tracks it), gives back only that hold; a poll's answer holds it only if not held yet
   * and, told it is not pending, ends every hold of it. Whether this call took a hold of it.
   */
  holdTask?(remoteId: string, pending: boolean, issued?: boolean): boolean;
  /**
   * stdio: whether this child may have handed out `remoteId` itself: "task" once it answered a submit with that id
   * (whether or not that task is still pending, or was stored at all), "submit" while a submit sent on it has not told
   * yet which id it got (see `holdSubmit`). A server numbering its jobs per process answers about its own job of that id
   * then, not another process's.
   */
  handedOut?(remoteId: string): "task" | "submit" | undefined;
  /**
   * stdio: a call that may leave the child holding a durable task (a task's submit) is about to be sent on it. Until
   * the function returned is called (once the answer's task is held through `holdTask`, or there is none), the child
   * is kept as one holding a pending task is: a reload keeps it for the next generation, the bound closes it last, the
   * idle count of a temporary thread's child does not close it. Its lease alone would not: the call is over (the child
   * idle) before the caller reads the answer.
   */
  holdSubmit?(): () => void;
  /**
   * stdio: a random id of this child process, never reused: a server may number its jobs per process, so a job id
   * names one job only together with the process that issued it.
   */
  readonly incarnation?: string;
  /**
   * Adds a call's secrets to those the session remembers and returns all of them: a stdio child may print or
   * answer with what an earlier call sent it at any time, so they are scrubbed from its log lines and from the
   * results of its later calls. None is forgotten: past `SESSION_SECRETS_LIMIT` distinct values the session leaves the
   * pool (closed after its running calls) and a new child serves the scope's next call. With a thread workspace, what
   * every session of that workspace was sent is returned (see `WorkspaceSecrets`): one user's child may name a file
   * there with a secret while another user's call on the thread lists it.
   */
  rememberSecrets(values: readonly string[]): readonly string[];
}

export interface SessionLease {
  readonly session: McpSession;
  release(): void;
}

export interface AcquireOptions {
  headers: Readonly<Record<string, string>>;
  /** Milliseconds for connect + initialize; `null` = no bound. */
  initTimeoutMs: number | null;
  /**
   * Stops this caller's wait. A creation other callers share goes on under its own timeout; one every waiter gave
   * up on is abandoned, its child process closed.
   */
  signal?: AbortSignal;
  /** stdio: whose child to use (default: the "default" user and thread). HTTP/SSE sessions are keyed by headers. */
  scope?: SessionScope;
}

interface Entry {
  readonly key: string;
  readonly serverName: string;
  /**
   * The pool the entry belongs to now: a stdio child holding pending durable tasks moves to the next generation's pool
   * on a reload (see `adoptTaskHolders`), and what outlives a call (its lease, the child's end) goes through this.
   */
  owner: SessionPool;
  /** stdio: the config the child was started with (a successor adopts it only for the same connection). */
  readonly server?: McpServerConfig;
  /** HTTP/SSE sessions close after being idle; stdio sessions are long-lived, but for a temporary thread's (see `idleTemporary`). */
  readonly closesWhenIdle: boolean;
  /** Secrets calls on this session carried; see `McpSession.rememberSecrets`. */
  readonly secrets: Set<string>;
  /** `secrets` as a list, until it changes. */
  secretList?: readonly string[];
  /** stdio with a data dir: the thread's folders (the child's cwd unless the config sets one). */
  readonly paths?: ThreadPaths;
  /** What the sessions sharing `paths`' workspace were sent, until this session is gone. */
  workspace?: WorkspaceSecrets;
  /**
   * stdio: every call so far came from a stateless run of the LangGraph server, whose thread the server deletes after
   * the run (`SessionScope.temporary`): such a session is the first the bound closes.
   */
  temporary?: boolean;
  /**
   * stdio with a data dir: settles once the preparation of the thread's folders is over, also one its start gave up on
   * (a file system call cannot be taken back).
   */
  prepared?: Promise<void>;
  /** stdio: set once the child is spawned (its end, not the creation's, then ends the session). */
  childStarted?: boolean;
  /** stdio: the child closed its stdout while it still ran (read from /proc as the output ended). */
  outputClosedRunning?: boolean;
  /** Aborts a creation nobody waits for any more. */
  readonly creation: AbortController;
  /** What callers wait for: `ready`, or the reason the entry was closed while it connected (see `closeOnce`). */
  waitable: Promise<McpSession>;
  /** Ends the wait of every caller of a creation that is being closed (the creation itself may run on a while). */
  abandon: (reason: unknown) => void;
  /**
   * Streamable HTTP: the transport, set as the creation starts. The server keeps a session it created until told
   * (DELETE), also one whose id the client never read; the id tells whether the server answered the initialize.
   */
  httpTransport?: StreamableHTTPClientTransport;
  /** Set right after the entry is created; the connect needs the entry's identity. */
  ready: Promise<McpSession>;
  session?: McpSession;
  inFlight: number;
  closing: boolean;
  /** HTTP/SSE, and stdio of a temporary thread: closes the session once it has been idle for the pool's bound. */
  idleTimer?: NodeJS.Timeout;
  /** stdio: whether the child has exited (set once connected). */
  exited?: () => boolean;
  /** stdio: the tag every process of this session carries, so what the child started ends with it. */
  readonly tag?: string;
  /** stdio: remote ids of the pending durable tasks the child holds, each with its count of holds (see `McpSession.holdTask`). */
  tasks?: Map<string, number>;
  /** stdio: submits whose task is not held yet, nor known to be none (see `McpSession.holdSubmit`). */
  submits?: number;
  /**
   * stdio: the ids the child issued itself, answering a submit (see `McpSession.handedOut`). Kept for the child's life,
   * not only while its task is pending: the child still answers about its own job of that id once the task ended (or
   * was never stored), and that answer is never another task's.
   */
  issued?: Set<string>;
  /** Set once the session's leftover processes are being ended (after its child is gone). */
  leftoversEnded?: Promise<void>;
  /** stdio: the session's processes as found just before it was closed, while its child still ran. */
  members?: readonly ProcessRef[];
  /** Set by the first `closeEntry`: later ones wait for it instead of closing again. */
  closed?: Promise<void>;
}

export interface SessionPoolOptions {
  /**
   * An HTTP/SSE session nobody used for this long is closed (each distinct header set, e.g. each user's
   * credentials or a rotated OAuth token, has a session of its own). `null` keeps them until the pool closes.
   */
  httpIdleMs?: number | null;
  /**
   * Live HTTP/SSE sessions per server (default 64), least recently used first out: a new header set that
   * would exceed the cap closes the server's least recently used idle sessions (upstream DELETE and GET
   * stream included). A session is never closed under a running call, so while all of them are busy the
   * server may go over the cap; the surplus is closed as their calls finish.
   */
  maxHttpSessionsPerServer?: number;
  /** Longest stdio message read (default 64 MiB); a longer one fails its call and keeps the session. */
  stdioMaxMessageBytes?: number;
  /** A server's own secrets, scrubbed from what it writes that reaches a log line (stdio stderr, close failures). */
  secretsFor?: (serverName: string) => readonly string[];
  /**
   * Live stdio children across all servers (default 256), one per (server, user, thread): a new scope beyond the
   * bound closes the least recently used child, at once when idle, after its running calls otherwise; one holding a
   * pending durable task only when every other one does too (see `evictStdio`).
   */
  maxStdioSessions?: number;
  /**
   * The data dir holding thread workspaces: a stdio child runs in `<dataDir>/threads/<thread>/user-data/workspace`
   * with TMPDIR/TMP/TEMP in its `.mcp/tmp`, unless the config sets `cwd` or those variables. Without it children run
   * where the config says (or in the host's cwd). Worked on by its real path (see `realFolderPath`).
   */
  dataDir?: string;
  /**
   * A stdio session of a temporary thread (`SessionScope.temporary`: a stateless run's, which the server deleted once
   * the run ended) nobody used for this long is closed (default 300 s; `null`: only the bound, a reload or `close()`
   * end it). Never while a call of its thread runs (on any child), nor while the child holds a pending durable task
   * (see `holdTask`) or a submit's (`holdSubmit`), nor once a run that is not temporary used it (a task's status or
   * cancel call is no run: see `SessionScope.background`).
   */
  temporaryStdioIdleMs?: number | null;
  /** How long closing an HTTP session waits for the server to answer its DELETE (default 2 s). */
  sessionDeleteTimeoutMs?: number;
  /**
   * The clock (epoch ms) the sweep of thread folders a killed host left compares change times with, and the heartbeat
   * of live sessions' folders sets them from (`ThreadHeartbeat`); for tests.
   */
  now?: () => number;
}

export const DEFAULT_HTTP_SESSION_IDLE_MS = 300_000;
export const DEFAULT_TEMPORARY_STDIO_IDLE_MS = 300_000;
export const DEFAULT_MAX_HTTP_SESSIONS_PER_SERVER = 64;
export const DEFAULT_MAX_STDIO_SESSIONS = 256;
/** Distinct secrets one stdio session is sent before it is replaced (it remembers them all until then). */
export const SESSION_SECRETS_LIMIT = 256;
export const DEFAULT_SESSION_DELETE_TIMEOUT_MS = 2_000;

export const CLIENT_INFO = { name: "langgraph-mcp-harness", version: "0.1.0" } as const;

// Each SDK Client would otherwise build its own Ajv instance, a few milliseconds of CPU per session.
let sharedValidator: AjvJsonSchemaValidator | undefined;
function jsonSchemaValidator(): AjvJsonSchemaValidator {
  sharedValidator ??= new AjvJsonSchemaValidator();
  return sharedValidator;
}

/**
 * Connected MCP sessions of one toolkit generation, keyed by server and by a fingerprint of the final
 * headers, so the same credentials reuse one initialized session and different ones never share.
 * Creation is de-duplicated; a session whose transport closes is dropped only if the pool entry is still
 * that session. HTTP/SSE sessions are capped per server (LRU) and close when idle. `retire()` refuses new
 * acquisitions and closes each session once its calls finish.
 */
export class SessionPool {
  /** In least-recently-acquired order: an acquisition moves its entry to the end. */
  private readonly entries = new Map<string, Entry>();
  /** Live HTTP/SSE entries per server. */
  private readonly httpCounts = new Map<string, number>();
  private readonly httpIdleMs: number | null;
  private readonly temporaryIdleMs: number | null;
  private readonly secretsFor: (serverName: string) => readonly string[];
  private readonly maxHttpSessions: number;
  private readonly maxStdioSessions: number;
  private readonly dataDir: string | undefined;
  private stdioCount = 0;
  /** The sweep for processes of sessions a killed host left (`endOrphanedSessionsOnce`), begun with the first stdio session. */
  private orphanSweep: Promise<void> | undefined;
  /**
   * The sweep of the empty thread folders a killed host left (`sweepThreadFoldersOnce`), begun after the orphan sweep
   * (whose processes may still work there); no call waits for it, `close()` stops it and waits for it.
   */
  private threadSweep: Promise<void> | undefined;
  private threadSweepRunning = false;
  private readonly stopThreadSweep = new AbortController();
  private readonly now: (() => number) | undefined;
  /** Keeps the thread folders of this pool's live stdio sessions young for another host's sweep (see `ThreadHeartbeat`). */
  private readonly heartbeat: ThreadHeartbeat;
  /** Sessions that left the pool (evicted, invalidated) but still run calls; closed after them, or by `close()`. */
  private readonly draining = new Set<Entry>();
  /** Sessions being closed: `close()` waits for them, so nothing a pool opened outlives it. */
  private readonly closings = new Set<Promise<void>>();
  private readonly stdioMaxMessageBytes: number | undefined;
  private readonly deleteTimeoutMs: number;
  private retired = false;
  private closed = false;

  constructor(
    private readonly logger: Logger,
    options: SessionPoolOptions = {},
  ) {
    this.httpIdleMs = options.httpIdleMs === undefined ? DEFAULT_HTTP_SESSION_IDLE_MS : options.httpIdleMs;
    this.temporaryIdleMs = options.temporaryStdioIdleMs === undefined ? DEFAULT_TEMPORARY_STDIO_IDLE_MS : options.temporaryStdioIdleMs;
    this.secretsFor = options.secretsFor ?? (() => []);
    this.maxHttpSessions = options.maxHttpSessionsPerServer ?? DEFAULT_MAX_HTTP_SESSIONS_PER_SERVER;
    this.maxStdioSessions = options.maxStdioSessions ?? DEFAULT_MAX_STDIO_SESSIONS;
    this.dataDir = options.dataDir === undefined ? undefined : realFolderPath(options.dataDir);
    this.stdioMaxMessageBytes = options.stdioMaxMessageBytes;
    this.deleteTimeoutMs = options.sessionDeleteTimeoutMs ?? DEFAULT_SESSION_DELETE_TIMEOUT_MS;
    this.now = options.now;
    this.heartbeat = new ThreadHeartbeat(() => this.liveThreads(), options.now);
  }

  get isRetired(): boolean {
    return this.retired;
  }

  /** Closed (its toolkit closed): calls still running on its sessions fail because of that, not of their server. */
  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * Whether the sweep of thread folders this pool began still runs: a retired pool doing it is kept for `close()`
   * (no later pool of the process runs it again).
   */
  get sweeping(): boolean {
    return this.threadSweepRunning;
  }

  /** Sessions (and creations) this pool still holds, those draining after their calls and those closing included. */
  get live(): number {
    return this.entries.size + this.draining.size + this.closings.size;
  }

  async acquire(serverName: string, server: McpServerConfig, opts: AcquireOptions): Promise<SessionLease> {
    if (this.retired) throw new Error("MCP session pool was retired; reload the tools");
    // A cancelled caller starts nothing (and so evicts nobody).
    opts.signal?.throwIfAborted();
    const key = sessionKey(serverName, server, opts.headers, opts.scope ?? DEFAULT_SCOPE);
    let entry = this.entries.get(key);
    if (entry?.exited?.()) {
      // The child is gone but its pipes have not reported it yet: a new child serves this call.
      this.forget(entry);
      entry = undefined;
    }
    if (entry) {
      this.markUsed(entry, opts.scope);
    } else {
      // Room is made (a stdio child evicted, an idle HTTP/SSE session closed) only once the new session is up, in
      // `connect`: a creation that fails or is cancelled costs no other scope or header set its session.
      entry = this.createEntry(key, serverName, server, opts);
      this.remember(entry);
    }
    entry.inFlight += 1;
    let session = entry.session;
    if (!session) {
      try {
        // The creation is shared, so one caller's abort only stops that caller's wait.
        session = await withDeadline(() => entry.waitable, null, opts.signal);
      } catch (err) {
        this.release(entry);
        // Every waiter gave up: the creation is abandoned and its child closed, not kept half-started, also when the
        // connection came up in the moment between this caller's abort and the creation's end.
        if (!entry.session && entry.inFlight === 0) void this.closeEntry(entry, err);
        throw err;
      }
    }
    return this.lease(entry, session);
  }

  /**
   * `acquire()` without waiting: a lease on the session already connected for this key, or `undefined` when the
   * caller has to `acquire()` (none yet, still connecting, its child gone, or the pool retired). Saves the usual
   * call its promises.
   */
  tryAcquire(serverName: string, server: McpServerConfig, opts: AcquireOptions): SessionLease | undefined {
    if (this.retired) return undefined;
    const key = sessionKey(serverName, server, opts.headers, opts.scope ?? DEFAULT_SCOPE);
    const entry = this.entries.get(key);
    if (!entry?.session || entry.exited?.()) return undefined;
    this.markUsed(entry, opts.scope);
    entry.inFlight += 1;
    return this.lease(entry, entry.session);
  }

  /**
   * A call acquires `entry`: it is the newest, and no longer temporary once a run that is not uses it (a call outside
   * any run, a durable task's poll, is no such run).
   */
  private markUsed(entry: Entry, scope: SessionScope | undefined): void {
    this.markNewest(entry);
    if (entry.temporary && !scope?.temporary && !scope?.background) {
      entry.temporary = false;
      if (entry.workspace) entry.workspace.keptThreadRun = true;
      clearTimeout(entry.idleTimer);
      entry.idleTimer = undefined;
    }
  }

  /** Moves `entry` to the most recently used end of the pool (eviction takes from the other end). */
  private markNewest(entry: Entry): void {
    this.entries.delete(entry.key);
    this.entries.set(entry.key, entry);
  }

  private lease(entry: Entry, session: McpSession): SessionLease {
    let released = false;
    // Until the call is over, a session of its workspace that leaves keeps its secrets there (see WorkspaceSecrets).
    const workspace = entry.workspace;
    const epoch = workspace?.hold();
    return {
      session,
      release: () => {
        if (released) return;
        released = true;
        if (epoch !== undefined) workspace?.letGo(epoch);
        entry.owner.release(entry);
      },
    };
  }

  private release(entry: Entry): void {
    entry.inFlight -= 1;
    if (entry.inFlight > 0) return;
    if (entry.closing) {
      void this.closeEntry(entry);
      return;
    }
    if (!entry.closesWhenIdle) {
      if (entry.temporary) this.idleTemporary(entry);
      return;
    }
    this.trim(entry.serverName);
    if (this.httpIdleMs !== null && this.entries.get(entry.key) === entry) {
      // One that fires while a call runs does nothing.
      this.armIdleTimer(entry, this.httpIdleMs, () => {
        if (entry.inFlight === 0 && this.entries.get(entry.key) === entry) void this.closeEntry(entry);
      });
    }
  }

  /** Starts `entry`'s idle timer, or restarts the one it has: one per session (unref'd), restarted on each release. */
  private armIdleTimer(entry: Entry, idleMs: number, expire: (timer: NodeJS.Timeout) => void): void {
    if (entry.idleTimer) {
      entry.idleTimer.refresh();
      return;
    }
    const timer = setClampedTimeout(() => expire(timer), idleMs);
    timer.unref();
    entry.idleTimer = timer;
  }

  /**
   * Starts, or restarts, the idle count of a connected stdio session of a temporary thread that just became idle: the
   * server deleted its thread once the run ended, so the child (a node or python process, often hundreds of MB) would
   * otherwise wait for the bound. At the end of the count it closes only if it is still idle, still temporary, no call
   * of its thread runs on another child (else the count starts again) and it holds no pending durable task: the bound,
   * under pressure, may close such a child last of all, but time alone never does (a server keeping its jobs in the
   * process would not know them in a new child); the count restarts when its last pending task ends.
   */
  private idleTemporary(entry: Entry): void {
    const idleMs = this.temporaryIdleMs;
    if (idleMs === null || !entry.session || entry.closing || this.entries.get(entry.key) !== entry) return;
    this.armIdleTimer(entry, idleMs, (timer) => {
      if (entry.inFlight > 0 || !entry.temporary || holds(entry) || this.entries.get(entry.key) !== entry) return;
      // A call of its thread running on another child (another server's: a long one of the same run) tells the run
      // is still going and may come back to this one: the count starts again.
      if ((entry.workspace?.calls ?? 0) > 0) {
        timer.refresh();
        return;
      }
      this.logger.debug(
        `closing the stdio MCP session of server '${entry.serverName}' of a stateless run's thread, idle for ` +
          `${idleMs / 1000}s (temporaryStdioIdleSeconds)`,
      );
      this.drain(entry);
    });
  }

  /**
   * Closes the least recently used stdio children while there are more than the bound. Idle ones of stateless runs'
   * temporary threads go first (the server deleted their thread once the run ended, so none will call them again), then
   * the other idle ones, then those in the middle of a call (a browser on a long task), closed after their calls (they
   * leave the pool at once, so their scope's next call starts a new child), and last those holding pending durable
   * tasks: a server that keeps its jobs in the process does not know them in a new child.
   */
  private evictStdio(): void {
    if (this.stdioCount <= this.maxStdioSessions) return;
    // Starts still under way are neither counted nor evicted: one that then fails or is cancelled must cost no other
    // scope its child (each makes room for itself once it is up).
    let connected = 0;
    for (const entry of this.entries.values()) if (!entry.closesWhenIdle && entry.session) connected += 1;
    for (let rank = 0; rank <= LAST_EVICTION_RANK; rank += 1) {
      // Deleting the entry being visited (drain) does not disturb a Map's iteration.
      for (const entry of this.entries.values()) {
        if (connected <= this.maxStdioSessions) return;
        if (entry.closesWhenIdle || !entry.session || evictionRank(entry) > rank) continue;
        const tasks = entry.tasks?.size ?? 0;
        const submits = entry.submits ?? 0;
        if (tasks > 0 || submits > 0) {
          const under = submits > 0 ? ` and any of the ${submits} submit(s) under way on it` : "";
          this.logger.warn(
            `closing the least recently used stdio MCP session of server '${entry.serverName}' (bound ${this.maxStdioSessions}, ` +
              `every other session is busy or holds durable tasks too): ${tasks} pending durable task(s) it accepted${under} will be ` +
              "polled in a new process, which may not know them; " +
              "raise maxStdioSessions to keep them",
          );
        } else {
          this.logger.debug(`closing the least recently used stdio MCP session of server '${entry.serverName}' (bound ${this.maxStdioSessions})`);
        }
        this.drain(entry);
        connected -= 1;
      }
    }
  }

  /**
   * Drops a session the server no longer knows (HTTP 404 or 410 on its session id), if the pool still holds that very
   * session, and closes it; the next acquisition initializes a new one.
   */
  invalidate(session: McpSession): void {
    const entry = this.entries.get(session.key);
    if (entry?.session !== session) return;
    this.drain(entry);
  }

  /**
   * The server answered 404 (or 410) on the event stream of `entry`'s session (see `watchForgottenSession`): the session
   * leaves the pool before a call is sent on it, so the next call of its header set starts a new one instead of failing.
   */
  private forgotten(entry: Entry, status: number): void {
    if (!entry.session || this.entries.get(entry.key) !== entry) return;
    this.logger.debug(
      `MCP server '${entry.serverName}' no longer knows a session (HTTP ${status} on its event stream); the next call starts a new one`,
    );
    this.drain(entry);
  }

  /** Takes `entry` out of the pool and closes it: now when idle, after its last call otherwise. */
  private drain(entry: Entry): void {
    this.forget(entry);
    entry.closing = true;
    if (entry.inFlight === 0) void this.closeEntry(entry);
    else this.draining.add(entry);
  }

  /** Closes a server's least recently used idle HTTP/SSE sessions while it has more than the cap. */
  private trim(serverName: string): void {
    if ((this.httpCounts.get(serverName) ?? 0) <= this.maxHttpSessions) return;
    // Creations still under way are neither counted nor closed: one that then fails or is cancelled must cost no other
    // header set its session (each makes room for itself once it is up).
    let excess = -this.maxHttpSessions;
    for (const entry of this.entries.values()) if (entry.serverName === serverName && entry.closesWhenIdle && entry.session) excess += 1;
    for (const entry of this.entries.values()) {
      if (excess <= 0) break;
      if (entry.serverName !== serverName || !entry.closesWhenIdle || !entry.session || entry.inFlight > 0) continue;
      excess -= 1;
      this.logger.debug(`closing the least recently used MCP session of server '${serverName}' (cap ${this.maxHttpSessions})`);
      void this.closeEntry(entry);
    }
  }

  private remember(entry: Entry): void {
    this.entries.set(entry.key, entry);
    if (entry.closesWhenIdle) this.httpCounts.set(entry.serverName, (this.httpCounts.get(entry.serverName) ?? 0) + 1);
    else this.stdioCount += 1;
  }

  /**
   * Drops `entry` from the pool if the pool still holds that very entry under its key. Its idle timer goes in any case:
   * one closes only the session the pool holds, and it would keep a child that crashed (and its client) until it fired.
   */
  private forget(entry: Entry): void {
    clearTimeout(entry.idleTimer);
    entry.idleTimer = undefined;
    if (this.entries.get(entry.key) !== entry) return;
    this.entries.delete(entry.key);
    if (entry.closesWhenIdle) this.httpCounts.set(entry.serverName, (this.httpCounts.get(entry.serverName) ?? 1) - 1);
    else this.stdioCount -= 1;
  }

  private createEntry(key: string, serverName: string, server: McpServerConfig, opts: AcquireOptions): Entry {
    const stdio = server.type === "stdio";
    const paths = stdio && this.dataDir !== undefined ? threadPaths(this.dataDir, (opts.scope ?? DEFAULT_SCOPE).threadId) : undefined;
    const entry = {
      key,
      serverName,
      owner: this as SessionPool,
      ...(stdio ? { server } : {}),
      closesWhenIdle: !stdio,
      ...(stdio ? { tag: newSessionTag() } : {}),
      ...(paths ? { paths, workspace: WorkspaceSecrets.join(paths.workspace) } : {}),
      ...(stdio && opts.scope?.temporary ? { temporary: true } : {}),
      inFlight: 0,
      closing: false,
      secrets: new Set(),
      creation: new AbortController(),
    } as Entry;
    if (entry.workspace && !entry.temporary) entry.workspace.keptThreadRun = true;
    if (paths) this.heartbeat.start();
    for (const value of headerSecrets(opts.headers)) this.noteSent(entry, value);
    // A child is given its server's own secrets as it starts (in its env), before any call: it may name a file with them.
    if (stdio) for (const value of this.secretsFor(serverName)) this.noteSent(entry, value);
    entry.ready = this.connect(entry, server, opts);
    entry.waitable = new Promise<McpSession>((resolve, reject) => {
      entry.abandon = reject;
      entry.ready.then(resolve, reject);
    });
    // Callers observe a rejection through acquire(); this keeps an unobserved failure quiet.
    entry.waitable.catch(() => undefined);
    return entry;
  }

  /** Adds `value` to what the session of `entry` was sent, and to its workspace's secrets when it is new to it. */
  private noteSent(entry: Entry, value: string): void {
    if (entry.secrets.has(value)) return;
    entry.secrets.add(value);
    entry.secretList = undefined;
    entry.workspace?.add(value);
  }

  /**
   * The creation of `entry`'s session. stdio: `session_init_timeout` bounds the start as a whole, what comes before the
   * spawn included (the thread's folders, the sweep of a killed host's processes): a file system that does not answer
   * (a stalled mount under the data dir) would hold it past any bound. SSE: the connect. Streamable HTTP: see
   * `connectWithin`.
   */
  private async connect(entry: Entry, server: McpServerConfig, opts: AcquireOptions): Promise<McpSession> {
    const start = new Deadline({ timeoutMs: server.type === "http" ? null : opts.initTimeoutMs }, entry.creation.signal);
    try {
      return await this.connectWithin(entry, server, opts, start);
    } finally {
      start.dispose();
    }
  }

  /**
   * What a stdio child waits for before its spawn, under `start`: its thread's folders (after a removal of them under
   * way) and the sweep of the processes a killed host left. A step `start` ends fails the start naming it; the
   * preparation, which cannot be taken back, runs on, and only the removal of the folders waits for it (`closeOnce`).
   * Returns why the private temp folder is not used (see `ensureThreadPaths`), or `null`.
   */
  private async beforeSpawn(entry: Entry, start: Deadline): Promise<string | null> {
    const paths = entry.paths;
    let tmpProblem: string | null = null;
    if (paths) {
      // A session of the thread that just left may be removing its empty folder: it is created again after that.
      const removal = threadFolderRemoval(paths);
      const preparing = removal ? removal.then(() => ensureThreadPaths(paths)) : ensureThreadPaths(paths);
      entry.prepared = preparing.then(
        () => undefined,
        () => undefined,
      );
      try {
        tmpProblem = await startStep(preparing, start, "thread workspace");
      } catch (err) {
        if (err instanceof DeadlineExceededError || start.reason !== undefined) throw err;
        throw new Error(`could not prepare the thread workspace of MCP server '${entry.serverName}': ${(err as NodeJS.ErrnoException).code ?? "error"}`);
      }
    }
    // A server may need what the processes a killed host left hold (a lock, a port, a browser's profile): it starts once
    // the sweep has ended them.
    if (this.orphanSweep) await startStep(this.orphanSweep, start, "orphan sweep");
    return tmpProblem;
  }

  private async connectWithin(entry: Entry, server: McpServerConfig, opts: AcquireOptions, start: Deadline): Promise<McpSession> {
    const { key, serverName } = entry;
    const stdio = server.type === "stdio";
    if (stdio) this.startSweeps();
    const scope = stdio ? (opts.scope ?? DEFAULT_SCOPE) : undefined;
    const paths = entry.paths;
    const client = new Client(CLIENT_INFO, { capabilities: {}, jsonSchemaValidator: jsonSchemaValidator() });
    const progress = new ProgressRouter(client);
    let tmpProblem: string | null = null;
    if (stdio) {
      try {
        tmpProblem = await this.beforeSpawn(entry, start);
      } catch (err) {
        this.forget(entry);
        throw err;
      }
    }
    if (tmpProblem !== null && scope) {
      this.logger.warn(
        `the private temp folder (.mcp/tmp) of thread workspace '${threadFolderName(scope.threadId)}' could not be prepared ` +
          `(${tmpProblem}); MCP server '${serverName}' runs there with the host's temp folder`,
      );
    }
    const transport = createTransport(serverName, server, {
      headers: opts.headers,
      logger: this.logger,
      redact: { text: (text) => entry.owner.redactor(entry).text(text), cutOff: (text, from) => entry.owner.redactor(entry).cutOff(text, from) },
      stdioMaxMessageBytes: this.stdioMaxMessageBytes,
      launch: stdio ? stdioLaunch(server, paths, tmpProblem === null) : undefined,
      sessionTag: entry.tag,
      onForgotten: (status) => this.forgotten(entry, status),
    });
    client.onclose = () => {
      entry.owner.forget(entry);
      // The child is gone, however it ended: what it started goes too (a browser it drove outlives its crash).
      void entry.owner.endLeftovers(entry);
    };
    let child: ChildProcess | undefined;
    if (stdio) {
      onChildStart(transport, (started) => {
        child = started;
        entry.childStarted = true;
        // A child that exits while a grandchild holds its stdout: its calls fail now, not at their timeout.
        whenGone(started, (cut) => {
          if (cut) {
            this.logger.warn(
              `the stdio MCP server '${serverName}' exited while a process it started still writes to its stdout; ` +
                `its output was cut ${cut.reason === "bytes" ? `after ${cut.bytes} bytes` : `after ${AFTER_EXIT_READ_MS} ms`} past the exit`,
            );
          }
          transport.onclose?.();
        });
        // A child that closed its stdout and runs on can never answer again, nor one whose stdin failed (EPIPE: it closed
        // its end and runs on) be sent a request: its calls fail now, and it is closed.
        const cutOff = (): void => {
          if (hasExited(started)) return;
          transport.onclose?.();
          void transport.close().catch(() => undefined);
        };
        started.stdout?.once("end", () => {
          // A child that exited has closed its output too: one still running then closed it itself.
          if (!hasExited(started) && started.pid !== undefined && isRunningNow(started.pid) === true) entry.outputClosedRunning = true;
          cutOff();
        });
        started.stdin?.once("error", cutOff);
      });
    }
    if (transport instanceof StreamableHTTPClientTransport) {
      entry.httpTransport = transport;
      // Any close of a session the server gave an id ends it there first (DELETE, bounded), the SDK's own included: it
      // closes the transport as an initialization fails, and a DELETE sent after that close would be aborted unsent.
      const close = transport.close.bind(transport);
      let closing: Promise<void> | undefined;
      transport.close = () => (closing ??= this.terminate(transport).then(close));
    }
    const tag = entry.tag;
    if (tag !== undefined) {
      // Its descendants without the tag are found through the child, so only while it runs: listed before any close
      // ends its stdin, ours or the SDK's own (a failed initialize closes the transport without waiting).
      const close = transport.close.bind(transport);
      let listed: Promise<void> | undefined;
      transport.close = () => {
        listed ??= child && !hasExited(child) ? taggedProcesses(tag, child.pid).then((found) => void (entry.members = found), () => undefined) : Promise.resolve();
        return listed.then(close);
      };
    }
    // stdio and SSE: `start` bounds the connect (stdio: what came before too). Streamable HTTP: at `session_init_timeout`
    // the callers hear of it and the entry is closed, which gives the initialization a grace to finish (see
    // `closeOnce`): a server that created the session meanwhile is told (DELETE).
    const deadlineMs = opts.initTimeoutMs;
    const expiry =
      entry.httpTransport && deadlineMs !== null
        ? setClampedTimeout(() => void this.closeEntry(entry, new DeadlineExceededError(deadlineMs)), deadlineMs)
        : undefined;
    try {
      await withDeadline(
        (signal) => {
          const connecting = client.connect(transport, { signal, timeout: MAX_TIMER_MS });
          // Wired by the client as it starts connecting: reported once, whether by the pipes' close or the child's exit.
          const onclose = transport.onclose;
          let reported = false;
          transport.onclose = () => {
            if (reported) return;
            reported = true;
            onclose?.();
          };
          return connecting;
        },
        null,
        start.signal,
      );
    } catch (err) {
      this.forget(entry);
      noteExpiredWhileStarting(err, transport);
      if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
        // A server that gave the session an id before its initialization failed keeps it until told; the caller
        // hears of the failure now, close() waits for the DELETE (the transport's close sends it).
        void this.track(client.close().catch(() => undefined));
        throw unsupportedProtocol(serverName, err) ?? err;
      }
      if (stdio && err === start.reason) {
        // The start ran out (or was abandoned): the callers hear of it now, at the bound. The child is closed behind
        // it, close() waiting: that closing lists what it started in /proc, which a file system that does not answer
        // would hold past any bound.
        void this.track(this.closeUnstarted(client, child, entry));
        throw err;
      }
      await client.close().catch(() => undefined);
      // The SDK began closing the child itself when initialize failed, without waiting for it: close() waits for it
      // and for what it started.
      const gone = child && exited(child);
      if (gone) this.track(gone.then(() => this.endLeftovers(entry)));
      // The SDK says only "Connection closed" of a child that ended during the handshake: how it ended is told instead.
      if (child && gone && isConnectionClosed(err) && !entry.creation.signal.aborted && !this.closed) throw await exitedBeforeStart(serverName, child, gone, entry.outputClosedRunning === true);
      // Node blames the command for a configured cwd that is missing: the folder is looked at now that the spawn failed.
      throw unsupportedProtocol(serverName, err) ?? (stdio ? await withCwdCause(serverName, server.cwd, err) : err);
    } finally {
      clearTimeout(expiry);
    }
    const session: McpSession = {
      serverName,
      key,
      client,
      progress,
      ...(scope ? { scope } : {}),
      ...(paths ? { paths, scanner: new WorkspaceScanner(paths.workspace) } : {}),
      ...(stdioPid(transport) !== undefined ? { pid: stdioPid(transport) } : {}),
      ...(entry.tag !== undefined
        ? {
            holdTask: (remoteId: string, pending: boolean, issued?: boolean) => entry.owner.holdTask(entry, remoteId, pending, issued === true),
            handedOut: (remoteId: string) => (entry.issued?.has(remoteId) ? "task" : (entry.submits ?? 0) > 0 ? "submit" : undefined),
            holdSubmit: () => entry.owner.holdSubmit(entry),
            incarnation: randomUUID(),
          }
        : {}),
      rememberSecrets: (values) => {
        const owner = entry.owner;
        for (const value of values) {
          if (entry.secrets.delete(value)) entry.secrets.add(value);
          else owner.noteSent(entry, value);
        }
        if (entry.secrets.size > SESSION_SECRETS_LIMIT && owner.entries.get(entry.key) === entry) {
          // Forgetting a secret would let the child echo it unscrubbed later: the child is replaced instead.
          const where = scope ? ` of thread workspace '${threadFolderName(scope.threadId)}'` : "";
          this.logger.info(
            `the stdio session${where} of MCP server '${serverName}' was sent more than ${SESSION_SECRETS_LIMIT} distinct ` +
              "secrets; a new one serves its next calls once its running calls are done",
          );
          owner.drain(entry);
        }
        return owner.remembered(entry);
      },
    };
    entry.exited = childExited(transport, session.pid);
    entry.session = session;
    if (this.retired) {
      entry.closing = true;
      if (entry.inFlight === 0) void this.closeEntry(entry);
    } else if (stdio) {
      // The new session is the most recently used: the bound makes room among the others.
      if (this.entries.get(entry.key) === entry) this.markNewest(entry);
      this.evictStdio();
    } else if (this.entries.get(entry.key) === entry) {
      this.trim(serverName);
    }
    return session;
  }

  /** Closes the client of a stdio start that failed, then (once its child is gone) what the child started. */
  private async closeUnstarted(client: Client, child: ChildProcess | undefined, entry: Entry): Promise<void> {
    await client.close().catch(() => undefined);
    if (child) await exited(child).then(() => this.endLeftovers(entry));
  }

  /**
   * With the first stdio session: the sweep of the processes a killed host left, then (they may still work in its
   * thread folders) that of the empty folders it left. A session waits for the first only.
   */
  private startSweeps(): void {
    const orphans = (this.orphanSweep ??= endOrphanedSessionsOnce(this.logger));
    const dataDir = this.dataDir;
    if (dataDir === undefined || this.threadSweep !== undefined) return;
    const options = { signal: this.stopThreadSweep.signal, ...(this.now ? { now: this.now } : {}) };
    this.threadSweepRunning = true;
    this.threadSweep = orphans
      .then(() => sweepThreadFoldersOnce(dataDir, this.logger, options))
      .catch(() => undefined)
      .finally(() => {
        this.threadSweepRunning = false;
      });
  }

  /** The thread paths of the stdio sessions of this pool whose child may still run (one per session, duplicates too). */
  private *liveThreads(): Generator<ThreadPaths> {
    for (const entries of [this.entries.values(), this.draining.values()]) {
      for (const entry of entries) if (entry.paths && entry.workspace && !entry.exited?.()) yield entry.paths;
    }
  }

  /** See `McpSession.holdTask`. */
  private holdTask(entry: Entry, remoteId: string, pending: boolean, issued: boolean): boolean {
    if (issued) (entry.issued ??= new Set()).add(remoteId);
    const tasks = (entry.tasks ??= new Map());
    const held = tasks.get(remoteId) ?? 0;
    if (!pending) {
      if (held === 0) return false;
      // A submit whose task no row tracks gives back its own hold: another submit answered with that id may have its
      // row stored. The task's end, polled, ends them all.
      if (issued && held > 1) {
        tasks.set(remoteId, held - 1);
      } else {
        tasks.delete(remoteId);
        this.heldNoMore(entry);
      }
      return false;
    }
    if (held > 0 && !issued) return false;
    tasks.set(remoteId, held + 1);
    if (held > 0) return true;
    // Taken by a child already chosen to close (by the bound before the task existed, or a reload): it cannot be kept.
    if (entry.closing) {
      this.logger.warn(
        `a durable task of MCP server '${entry.serverName}' was accepted by a stdio session that is already closing ` +
          `(the session bound, ${this.maxStdioSessions}, or a reload): it will be polled in a new process, which may not know it`,
      );
    }
    return true;
  }

  /** See `McpSession.holdSubmit`: the returned function ends this submit's hold (once, however often called). */
  private holdSubmit(entry: Entry): () => void {
    entry.submits = (entry.submits ?? 0) + 1;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      entry.submits! -= 1;
      entry.owner.heldNoMore(entry);
    };
  }

  /** `entry` let go of a task or a submit: what holding them postponed happens once it holds none. */
  private heldNoMore(entry: Entry): void {
    if (holds(entry)) return;
    // Kept past its pool's retirement only for its tasks (see `retire`): it goes now that none is left.
    if (this.retired && !entry.closing) this.drain(entry);
    else if (entry.temporary && entry.inFlight === 0) this.idleTemporary(entry);
  }

  /**
   * No new acquisitions; idle sessions close now, busy ones when their last call finishes. A stdio child holding pending
   * durable tasks is kept for the next generation's pool to adopt (`adoptTaskHolders`): a server keeping its jobs in
   * the process would not know them in a new child. Until adopted it serves no call; `close()` closes it.
   */
  retire(): void {
    this.retired = true;
    for (const entry of this.entries.values()) {
      if (holdsTasks(entry)) continue;
      entry.closing = true;
      if (entry.inFlight === 0) void this.closeEntry(entry);
    }
    // Busy sessions close after their calls: their folders are kept young until then (the next tick finds none left).
    if (this.entries.size === 0 && this.draining.size === 0) this.heartbeat.stop();
  }

  /**
   * Takes over from the retired pool `from` its stdio children holding pending durable tasks whose server `sameServer`
   * says is started the same way in this pool's generation; the others close (after their running calls). A child
   * adopted counts towards this pool's bound as any other, and is the last it closes.
   */
  adoptTaskHolders(from: SessionPool, sameServer: (serverName: string, launched: McpServerConfig) => boolean): void {
    if (from === this || !from.retired || this.retired) return;
    for (const entry of [...from.entries.values()]) {
      if (!holdsTasks(entry)) continue;
      if (entry.server === undefined || entry.exited?.() || this.entries.has(entry.key) || !sameServer(entry.serverName, entry.server)) {
        from.drain(entry);
        continue;
      }
      from.forget(entry);
      entry.owner = this;
      this.remember(entry);
      if (entry.paths) this.heartbeat.start();
    }
    this.evictStdio();
  }

  /**
   * Closes the sessions discovery uses of one server now (after its discovery failed, so a half-open session is not
   * reused): its HTTP/SSE ones and its stdio child of the default scope. The children threads' calls and tasks' polls
   * run in are kept (a toolkit retrying refused tools lists again on the same pool). A session with calls running (a
   * task's poll on a pool kept across such retries) leaves the pool now and closes once they have their answers.
   */
  async closeServer(serverName: string): Promise<void> {
    const discovery = stdioKey(serverName, DEFAULT_SCOPE);
    const closing: Promise<void>[] = [];
    for (const entry of [...this.entries.values()]) {
      if (entry.serverName !== serverName || !(entry.closesWhenIdle || entry.key === discovery)) continue;
      if (entry.session && entry.inFlight > 0) this.drain(entry);
      else closing.push(this.closeEntry(entry));
    }
    await Promise.all(closing);
  }

  /** Closes every session now, busy or not. */
  async close(): Promise<void> {
    this.retired = true;
    this.closed = true;
    this.stopThreadSweep.abort();
    this.heartbeat.stop();
    await Promise.all([...this.entries.values(), ...this.draining].map((entry) => this.closeEntry(entry)));
    // A closing may start another (a child's exit ends what it started): wait until none is left.
    while (this.closings.size > 0) await Promise.all([...this.closings]);
    await this.orphanSweep;
    await this.threadSweep;
  }

  /** Closes `entry` once: its session, or its creation (aborted with `reason`) and whatever child it started. */
  private closeEntry(entry: Entry, reason: unknown = new Error("MCP session closed while connecting")): Promise<void> {
    if (!entry.closed) entry.closed = this.track(this.closeOnce(entry, reason));
    return entry.closed;
  }

  /** A closing that `close()` waits for. */
  private track(closing: Promise<void>): Promise<void> {
    this.closings.add(closing);
    void closing.finally(() => this.closings.delete(closing)).catch(() => undefined);
    return closing;
  }

  private async closeOnce(entry: Entry, reason: unknown): Promise<void> {
    this.forget(entry);
    this.draining.delete(entry);
    entry.closing = true;
    let grace: NodeJS.Timeout | undefined;
    if (!entry.session) {
      entry.abandon(reason);
      // The server may have created the session already while its answer, with the id, is still on the way: the
      // initialization gets a short grace to finish, so the session can be ended (DELETE) instead of left open.
      // Once the id is known, the creation stops at once: its failure ends the session (the transport's close).
      if (entry.httpTransport && entry.httpTransport.sessionId === undefined) {
        grace = setClampedTimeout(() => entry.creation.abort(reason), this.deleteTimeoutMs);
      } else {
        entry.creation.abort(reason);
      }
    }
    const session = await entry.ready.catch(() => undefined);
    clearTimeout(grace);
    if (!session) {
      // A child that was spawned leaves once it and what it started are gone (see `connect`); a start that never spawned
      // one, once its thread's folders are no longer being prepared: a removal of them meanwhile would race that
      // preparation. Not waited for here: a hung file system must not hold the closing of a start it made fail.
      if (!entry.childStarted) void this.track((entry.prepared ?? Promise.resolve()).then(() => this.leaveWorkspace(entry)));
      return;
    }
    try {
      // Streamable HTTP: the transport's close ends the server's session first (DELETE).
      await session.client.close();
    } catch (err) {
      const reason = this.redactor(entry).text((err as Error)?.message ?? String(err));
      this.logger.debug(`closing MCP session of server '${session.serverName}' failed: ${reason}`);
    }
    await this.endLeftovers(entry);
  }

  /** Ends a server-side session (HTTP DELETE). A server that never answers must not hold close(): it is bounded. */
  private async terminate(transport: StreamableHTTPClientTransport): Promise<void> {
    await withDeadline(() => transport.terminateSession(), this.deleteTimeoutMs).catch(() => undefined);
  }

  /** Ends whatever a stdio session's child started that still runs, once per session; `close()` waits for it. */
  private endLeftovers(entry: Entry): Promise<void> {
    if (entry.tag === undefined) return Promise.resolve();
    entry.leftoversEnded ??= this.track(endTaggedProcesses(entry.tag, entry.members).finally(() => this.leaveWorkspace(entry)).then(() => undefined));
    return entry.leftoversEnded;
  }

  /**
   * Once nothing of the session runs any more, it stops adding what it was sent to its workspace's secrets; the last
   * session of the thread in this process to leave removes the thread's folder if it is still the empty skeleton the
   * harness created (see `removeThreadSkeleton`), so threads that are gone (a stateless run's, one deleted through the
   * API) leave no folder behind unless their tools wrote something there.
   */
  private leaveWorkspace(entry: Entry): void {
    const workspace = entry.workspace;
    if (workspace === undefined) return;
    entry.workspace = undefined;
    // A temporary thread's temp files belong to processes that are gone (the removal checks none works there), and
    // nobody will come back for them: they go too, so that its skeleton can. Not those of a thread a kept thread's run
    // used through another of its sessions (another server's) meanwhile, whichever of them leaves last, nor what was
    // there before its sessions (a kept thread's run's, earlier).
    const tempFilesSince = entry.temporary === true && !workspace.keptThreadRun ? workspace.since : undefined;
    workspace.leave(entry.secrets);
    const paths = entry.paths;
    if (paths === undefined) return;
    void this.track(removeThreadSkeleton(paths, () => workspaceSessionCount(paths.workspace) === 0, tempFilesSince).then(() => undefined));
  }

  /** What the session of `entry` remembers: its workspace's secrets, else its own (the same array until it changes). */
  private remembered(entry: Entry): readonly string[] {
    return entry.workspace?.values() ?? (entry.secretList ??= [...entry.secrets]);
  }

  private redactor(entry: Entry): Redactor {
    const own = this.secretsFor(entry.serverName);
    // A child may print what another session of its workspace wrote there (a listing of its folder).
    const remembered = this.remembered(entry);
    return Redactor.of(remembered.length === 0 ? own : [...own, ...remembered]);
  }

  /** For tests and diagnostics. */
  size(): number {
    return this.entries.size;
  }
}

/**
 * Eviction order among the LRU candidates: 0 idle of a temporary thread, 1 idle, 2 busy, 3 idle holding pending
 * durable tasks (or a submit's, see `McpSession.holdSubmit`), 4 busy holding them.
 */
function evictionRank(entry: Entry): number {
  if (holds(entry)) return entry.inFlight > 0 ? 4 : 3;
  if (entry.inFlight > 0) return 2;
  return entry.temporary ? 0 : 1;
}

const LAST_EVICTION_RANK = 4;

/** Whether `entry` holds pending durable tasks, or submits that may leave it holding one. */
function holds(entry: Entry): boolean {
  return (entry.tasks?.size ?? 0) > 0 || (entry.submits ?? 0) > 0;
}

/** A connected stdio session still open that holds pending durable tasks (or a submit's, see `holds`). */
function holdsTasks(entry: Entry): boolean {
  return !entry.closesWhenIdle && entry.session !== undefined && !entry.closing && holds(entry);
}

const fingerprints = new WeakMap<Readonly<Record<string, string>>, string>();

/**
 * The canonical form of a header set (lower-case names, sorted), memoized per headers object. It is only a
 * map key held in memory, next to the headers themselves; a hash of it cost more than the rest of the call path
 * for per-user headers, which are a new object on every call.
 */
function headersFingerprint(headers: Readonly<Record<string, string>>): string {
  let fingerprint = fingerprints.get(headers);
  if (fingerprint === undefined) {
    fingerprint = Object.entries(headers)
      .map(([k, v]) => `${k.toLowerCase()}\u0000${v}`)
      .sort()
      .join("\u0000\u0000");
    fingerprints.set(headers, fingerprint);
  }
  return fingerprint;
}

function sessionKey(serverName: string, server: McpServerConfig, headers: Readonly<Record<string, string>>, scope: SessionScope): string {
  if (server.type === "stdio") return stdioKey(serverName, scope);
  return `${serverName}\u0000${headersFingerprint(headers)}`;
}

function stdioKey(serverName: string, scope: SessionScope): string {
  return `${serverName}\u0000stdio\u0000${scope.key}`;
}

/**
 * Whether a stdio child has exited. Reading the SDK transport's child process (a private field of SDK 1.x) costs no
 * system call on every acquisition; it tells the same as `kill(pid, 0)`, since Node records the exit in the same
 * callback that reaps the child, and a reused pid cannot fool it. Without that field: `kill(pid, 0)`.
 */
function childExited(transport: unknown, pid: number | undefined): (() => boolean) | undefined {
  const child = (transport as { _process?: unknown })._process;
  if (child instanceof ChildProcess) return () => hasExited(child);
  return pid === undefined ? undefined : () => !processExists(pid);
}

function stdioPid(transport: unknown): number | undefined {
  const pid = (transport as { pid?: unknown }).pid;
  return typeof pid === "number" ? pid : undefined;
}
