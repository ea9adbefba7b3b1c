import { ToolMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { ToolRuntime } from "@langchain/core/tools";
import { isCommand, isGraphBubbleUp } from "@langchain/langgraph";
import { ErrorCode, McpError, type CallToolResult, type Progress } from "@modelcontextprotocol/sdk/types.js";
import type { McpServerConfig } from "../config";
import { assertSendableHeader, collapseHeaderCase, EMPTY_HEADERS, type HeaderMap } from "../shared/headers";
import type { Redactor } from "../shared/redact";
import { CallSecrets } from "./call-secrets";
import { scrubOutcome } from "./scrub-outcome";
import { initTimeoutMs } from "./discovery";
import { DeadlineExceededError, secondsText } from "../shared/deadline";
import { CallDeadline } from "./call-deadline";
import { isOwnText, McpToolCallError, messageWithCause, ownText, systemErrorText, ToolkitClosedError } from "../shared/errors";
import { MAX_TIMER_MS } from "../shared/timers";
import { composeInterceptors, McpToolCallRequest, type McpCallOutcome, type McpToolInterceptor } from "../shared/interceptor";
import type { McpToolRecord } from "./metadata";
import type { OutputSchemas } from "./output-schemas";
// The modules themselves, not the sessions barrel: each name read through a re-export is a getter call.
import { changedFiles, MAX_SNAPSHOT_ENTRIES, type WorkspaceScanner, type WorkspaceSnapshot } from "../sessions/changes";
import {
  expiredStatus,
  isConnectionClosed,
  isDroppedConnection,
  isExpiredSession,
  isExpiredWhileStarting,
  isGatewayProcessFailed,
  isRefusedConnection,
} from "../sessions/expired";
import { isLostCall } from "../sessions/lost-calls";
import { hostArguments, nameRealCwdEchoes, restoreNamedPaths, withNamedPaths, type HostArguments } from "../sessions/argument-paths";
import { isUnauthorized } from "../shared/unauthorized";
import { mayTranslatePaths, pathReferences, translateResultPaths, userDataRoot, virtualWorkspaceChanges, type PathContext } from "../sessions/paths";
import type { AcquireOptions, McpSession, SessionPool } from "../sessions/pool";
import type { ProgressRegistration } from "../sessions/progress";
import { runScope, type SessionScope } from "../sessions/scope";
import { startFailureText, StartStepTimeoutError } from "../sessions/start-failure";
import { boundText, escapeControls } from "../shared/text";
import { nestsDeeperThan } from "../shared/plain-object";
import { boundConvertedResult, convertCallToolResult, DEFAULT_MAX_RESULT_CHARS, type ConvertedResult } from "./results";
import { resolveToolRuntime, toolCallIdOf } from "./runtime";

export interface McpProgressEvent {
  type: "mcp_progress";
  toolCallId: string | undefined;
  server: string;
  tool: string;
  progress: number;
  total: number | undefined;
  message: string | undefined;
}

export interface CallTarget {
  pool: SessionPool;
  server: McpServerConfig;
  /** The stdio session to use when the call names one (a durable task's own scope); otherwise the run's. */
  scope?: SessionScope;
  /**
   * Where the call goes instead when `pool` was retired (the tools reloaded) before it was sent: the new generation's
   * pool and config of the server, `undefined` when the server is gone or connects differently now, "unloadable" when
   * the new configuration could not be loaded; it throws `ToolkitClosedError` once the toolkit is closed.
   */
  successor?: () => Promise<{ pool: SessionPool; server: McpServerConfig; outputs?: OutputSchemas } | "unloadable" | undefined>;
  /** The output schemas the server's tools declared when listed, checked against each result. */
  outputs?: OutputSchemas;
  /** Told the session the call is sent on, before it is sent; `false` keeps it from being sent there (the call fails). */
  onSession?: (session: McpSession) => boolean | void;
}

export interface CallPathOptions {
  /** Credential layers, then custom interceptors; outermost first. */
  interceptors: readonly McpToolInterceptor[];
  /** Headers the call starts from (static headers for HTTP/SSE). */
  headers: HeaderMap;
  /** The server's own secrets (static header values, `$VAR` values, OAuth client secrets), for redaction. */
  secrets: readonly string[];
  /**
   * More secrets to scrub from what the call returns, which it does not carry (what a durable task's submit carried, or
   * its user's credential, in a status call): scrubbed, but not among the secrets the call reports it carried.
   */
  remembered?: readonly string[];
  /** Bound on a result that reaches a ToolMessage (default `DEFAULT_MAX_RESULT_CHARS`). */
  maxResultChars?: number;
}

const CALL_ERROR_MAX_CHARS = 1000;

/**
 * The session each attempt's answer came from, keyed by that answer as the interceptors get it (and as a direct call
 * returns it): an interceptor may send a call more than once, and its attempts may reach different stdio children
 * (one died between them).
 */
const answeredOn = new WeakMap<object, McpSession>();

/** The session whose answer `outcome` is; undefined when an interceptor returned an outcome of its own. */
export function answeringSession(outcome: McpCallOutcome): McpSession | undefined {
  return answeredOn.get(outcome);
}

const sendable = new WeakMap<HeaderMap, HeaderMap>();

/**
 * The request's final headers, one spelling per header and every pair sendable. Credential layers validate
 * what they set, so a header failing here came from an interceptor. Memoized per (frozen) headers object.
 */
function sendableHeaders(serverName: string, headers: HeaderMap): HeaderMap {
  let checked = sendable.get(headers);
  if (checked === undefined) {
    checked = collapseHeaderCase(headers);
    for (const [name, value] of Object.entries(checked)) assertSendableHeader(serverName, name, value, "interceptor");
    sendable.set(headers, checked);
  }
  return checked;
}

/** A call's own deadline (SPEC §2.1): `tool_call_timeout` restarted by each progress notification, capped by `max_total_timeout`. */
export function callDeadlineLimits(server: McpServerConfig): { timeoutMs: number | null; maxTotalMs: number | null } {
  return {
    timeoutMs: server.tool_call_timeout === null ? null : server.tool_call_timeout * 1000,
    maxTotalMs: server.max_total_timeout == null ? null : server.max_total_timeout * 1000,
  };
}

/**
 * How a call that failed once it may have reached the server ends its text: the harness never sends it again, and a
 * retrying interceptor's attempts are counted, so the model is not told "not sent again" of a call sent twice.
 */
function notResentText(sends: number): string {
  const sent = sends > 1 ? `The call was sent ${sends} times (an interceptor sent it again) and not after this failure` : "The call was not sent again";
  return `${sent}; a new session serves the next call.`;
}

function expiredText(record: McpToolRecord, status: 400 | 404 | 410, sends: number): string {
  return (
    `MCP tool '${record.rawName}' on server '${record.server}' failed: the server no longer knows this MCP session ` +
    `(HTTP ${status}: it expired or the server restarted). ${notResentText(sends)}`
  );
}

function lostText(record: McpToolRecord, sends: number): string {
  return (
    `MCP tool '${record.rawName}' on server '${record.server}' failed: the server ended the call's response stream without ` +
    `an answer (it restarted, expired the session or dropped the call). ${notResentText(sends)}`
  );
}

function droppedText(record: McpToolRecord, sends: number): string {
  return (
    `MCP tool '${record.rawName}' on server '${record.server}' failed: the server closed the connection before it answered ` +
    `(it restarted or dropped the call). ${notResentText(sends)}`
  );
}

function closedText(record: McpToolRecord, stdio: boolean, sends: number): string {
  const how = stdio ? "its process ended or closed its output" : "it ended the session's event stream";
  return (
    `MCP tool '${record.rawName}' on server '${record.server}' failed: the connection to the server closed before it answered ` +
    `(${how}). ${notResentText(sends)}`
  );
}

/** supergateway's -32603 "MCP server process failed" (see `isGatewayProcessFailed`): its text is fixed, quoted as it is. */
function processFailedText(record: McpToolRecord, sends: number): string {
  return (
    `MCP tool '${record.rawName}' on server '${record.server}' failed: the server's process failed during the call (its gateway ` +
    `answered "MCP server process failed" and dropped the session). ${notResentText(sends)}`
  );
}

const VIOLATION_MAX_CHARS = 300;

/**
 * A result that breaks its tool's output schema. The validator's reason quotes the result's keys as JSON pointers
 * (`~1` for `/`, `~0` for `~`): read back before scrubbing, so a key quoting a secret is matched, and bounded after.
 */
function violationText(record: McpToolRecord, reason: string, redactor: Redactor): string {
  const keys = reason.replace(/~1/g, "/").replace(/~0/g, "~");
  return `MCP tool '${record.rawName}' on server '${record.server}' failed: ${boundText(redactor.text(keys), VIOLATION_MAX_CHARS)}`;
}

function otherServerText(record: McpToolRecord): string {
  return `MCP tool '${record.rawName}' on server '${record.server}' was not called: an interceptor passed on a request for another server`;
}

function reconfiguredText(record: McpToolRecord): string {
  return (
    `MCP tool '${record.rawName}' on server '${record.server}' was not called: the server's configuration changed while ` +
    "the call was being prepared; call it again"
  );
}

/** A call refused because the configuration, changed since its tool was made, cannot be loaded now. */
export function unloadableText(record: Pick<McpToolRecord, "rawName">): string {
  return `MCP tool '${record.rawName}' was not called: the MCP configuration could not be loaded (see the logs)`;
}

/** How deep arrays and objects may nest in a result (below JSON.stringify's and our walkers' recursion limits). */
export const MAX_RESULT_DEPTH = 512;

function tooDeepText(record: McpToolRecord): string {
  return `MCP tool '${record.rawName}' on server '${record.server}' failed: its result nests deeper than ${MAX_RESULT_DEPTH} levels and was not read`;
}

function initTimeoutText(record: McpToolRecord, err: DeadlineExceededError): string {
  const seconds = secondsText(err.timeoutMs);
  const step = err instanceof StartStepTimeoutError ? `: ${err.stepText}` : "";
  return `MCP tool '${record.rawName}' on server '${record.server}' was not called: its MCP session did not start within ${seconds}s (session_init_timeout)${step}`;
}

function timeoutText(record: McpToolRecord, err: DeadlineExceededError): string {
  const seconds = secondsText(err.timeoutMs);
  const reason =
    err.kind === "maxTotal"
      ? `timed out after ${seconds}s in total (max_total_timeout, which progress does not extend)`
      : `timed out after ${seconds}s without a result or progress (tool_call_timeout)`;
  return `MCP tool '${record.rawName}' on server '${record.server}' failed: ${reason}`;
}

/**
 * The `tools/call` itself, under the call's deadline. The SDK request stops at once when the deadline's signal
 * aborts, so the deadline needs no promise of its own; the reason it stopped replaces the SDK's wrapped error. The
 * answer restarts the deadline's count: what remains (the walk, the interceptors after `next`) gets a full one.
 *
 * Everything is set up before the request is written: work done after the write, before the event loop blocks,
 * delayed a stdio answer by about twice its own time (the redactor's ~6 µs cost ~12 µs there; bench/stdio-phases.ts).
 */
async function callWithDeadline(
  session: McpSession,
  request: McpToolCallRequest,
  headers: HeaderMap,
  stdio: boolean,
  record: McpToolRecord,
  runtime: ToolRuntime | undefined,
  secrets: CallSecrets,
  deadline: CallDeadline,
  hosted: HostArguments | undefined,
): Promise<CallToolResult> {
  const writer = runtime?.writer ?? undefined;
  let progress: ProgressRegistration | undefined;
  if (writer || deadline.counts) {
    const toolCallId = toolCallIdOf(runtime);
    progress = session.progress.register((p: Progress) => {
      deadline.extend();
      if (!writer) return;
      if (stdio) noteRememberedNow(session, secrets);
      const redactor = secrets.redactor();
      const numbers = { progress: p.progress, total: p.total };
      // A number whose digits hold a secret (a PIN) has no redacted form that is still a number: the event is not passed on.
      if (redactor.deep(numbers) !== numbers) return;
      writer({
        type: "mcp_progress",
        toolCallId,
        server: record.server,
        tool: record.rawName,
        progress: p.progress,
        total: p.total,
        message: p.message === undefined ? undefined : redactor.text(hosted ? restoreNamedPaths(p.message, hosted.named) : p.message),
      } satisfies McpProgressEvent);
    });
  }
  const params: { name: string; arguments: Record<string, unknown>; _meta?: Record<string, unknown> } = {
    name: request.toolName,
    arguments: { ...(hosted?.args ?? request.args) },
  };
  const withHeaders = stdio && Object.keys(headers).length > 0;
  if (progress || withHeaders || Object.keys(request.meta).length > 0) {
    const meta: Record<string, unknown> = { ...request.meta };
    if (withHeaders) meta.headers = { ...headers };
    if (progress) meta.progressToken = progress.token;
    params._meta = meta;
  }
  // The redactor is ready before anything the server sends back (log lines, progress, the result) can be read.
  if (stdio) secrets.noteRemembered(session.rememberSecrets(secrets.values()));
  secrets.redactor();
  const signal = deadline.beginSend();
  try {
    const result = (await session.client.callTool(params, undefined, { signal, timeout: MAX_TIMER_MS })) as CallToolResult;
    deadline.answer();
    return result;
  } catch (err) {
    throw deadline.reason ?? err;
  } finally {
    deadline.endSend(signal);
    progress?.done();
    // Another call on this child, started meanwhile, may have sent it secrets this answer (or error) quotes.
    if (stdio) noteRememberedNow(session, secrets);
  }
}

const NOTHING_NEW: readonly string[] = [];

/** What the session remembers now, for the call's redactor (a list that only changes when a secret is added). */
function noteRememberedNow(session: McpSession, secrets: CallSecrets): void {
  secrets.noteRemembered(session.rememberSecrets(NOTHING_NEW));
}

/**
 * The innermost handler: one `tools/call` on a pooled session. HTTP/SSE sessions are keyed by the final
 * headers, so each header set travels on every request of its own session; stdio calls carry headers an
 * interceptor set as `_meta.headers`.
 *
 * The call runs under our own deadline, not the SDK's: the SDK gets the longest timer (so its silent
 * 60 s default never applies), and our progress router, which owns the progress tokens, restarts the
 * deadline on each notification for this call (the SDK's `resetTimeoutOnProgress` only sees its own tokens).
 */
function sendToServer(
  target: CallTarget,
  record: McpToolRecord,
  runtime: ToolRuntime | undefined,
  signal: AbortSignal | undefined,
  secrets: CallSecrets,
  workspace: CallWorkspace,
  deadline: CallDeadline,
  protocolFields: readonly string[],
) {
  return async (request: McpToolCallRequest): Promise<CallToolResult> => {
    // An attempt after the call's deadline ran out (an interceptor retrying, or still running after the call ended).
    const stopped = deadline.reason;
    if (stopped !== undefined) throw stopped instanceof DeadlineExceededError ? ownText(new McpToolCallError(timeoutText(record, stopped))) : stopped;
    // The pool keys sessions by this name: another server's would be given this server's session (or child) for good.
    if (request.serverName !== record.server) throw ownText(new McpToolCallError(otherServerText(record)));
    let { server, pool, outputs } = target;
    if (pool.isRetired && target.successor) {
      // The tools reloaded while the interceptors ran: nothing was sent yet, so the call may go to the new sessions.
      deadline.beginStart();
      const next = await target.successor().finally(() => deadline.endStart());
      if (next === "unloadable") throw ownText(new McpToolCallError(unloadableText(record)));
      if (!next) throw ownText(new McpToolCallError(reconfiguredText(record)));
      ({ server, pool, outputs } = next);
    }
    secrets.noteHeaders(request.headers);
    const headers = sendableHeaders(request.serverName, request.headers);
    secrets.noteHeaders(headers);
    const stdio = server.type === "stdio";
    const acquiring: AcquireOptions = {
      headers: stdio ? EMPTY_HEADERS : headers,
      initTimeoutMs: null,
      scope: stdio ? (target.scope ?? runScope(runtime)) : undefined,
    };
    let lease = pool.tryAcquire(request.serverName, server, acquiring);
    if (lease === undefined) {
      acquiring.initTimeoutMs = initTimeoutMs(server);
      acquiring.signal = signal;
      deadline.beginStart();
      try {
        lease = await pool.acquire(request.serverName, server, acquiring).catch((err: unknown) => {
          // The server forgot the new session before its handshake ended: nothing of the call was sent, so it starts
          // once more (as discovery does), under a bound of its own.
          if (!isExpiredWhileStarting(err) || signal?.aborted) throw err;
          return pool.acquire(request.serverName, server, acquiring);
        });
      } catch (err) {
        if (pool.isClosed && !signal?.aborted) throw new ToolkitClosedError();
        if (err instanceof DeadlineExceededError && !signal?.aborted) throw ownText(new McpToolCallError(initTimeoutText(record, err)));
        throw err;
      } finally {
        deadline.endStart();
      }
      if (pool.isRetired && target.successor) {
        // The tools reloaded while the session started: nothing was sent yet, so the call goes where it would have
        // gone had the reload come first (the retired pool closes the new session once released).
        lease.release();
        return sendToServer({ ...target, pool, server }, record, runtime, signal, secrets, workspace, deadline, protocolFields)(request);
      }
    }
    if (target.onSession?.(lease.session) === false) {
      lease.release();
      throw new McpToolCallError(`the call to '${record.rawName}' was not sent: the caller refused its session`);
    }
    const { paths, scanner } = lease.session;
    // The child's working folder: the thread workspace unless the config sets its own.
    const cwd = paths ? server.cwd || paths.workspace : undefined;
    let hosted: HostArguments | undefined;
    try {
      // An interceptor may send the call more than once (a retry): its changes count from the first attempt's walk.
      if (scanner && workspace.before === undefined) workspace.before = await listableSnapshot(scanner, deadline, workspace);
      if (paths && cwd !== undefined) {
        hosted = hostArguments(request.args, paths.userData, cwd);
        // The child resolves a URL it takes for a relative path against the real path of its cwd.
        if (hosted) await nameRealCwdEchoes(hosted, cwd, paths.userData);
      }
      // The walk off the event loop may outlast the child: the call fails as the ones it had already been sent do.
      if (!lease.session.client.transport) throw new McpError(ErrorCode.ConnectionClosed, "Connection closed");
      const before = workspace.before ?? null;
      const answer = await callWithDeadline(lease.session, request, headers, stdio, record, runtime, secrets, deadline, hosted);
      const broken = outputs?.violation(request.toolName, answer);
      if (broken !== undefined) throw ownText(new McpToolCallError(violationText(record, broken, secrets.redactor())));
      // The host paths this attempt was given, as the model wrote them, file or not: before the interceptors see the
      // answer (they saw the arguments as written) and before its translation, which may be cut.
      const result = hosted ? withNamedPaths(answer, hosted.named, protocolFields) : answer;
      if (paths && scanner) {
        const changed = changedFiles(before, await listableSnapshot(scanner, deadline, workspace));
        // Resolved here only when the call changed files (translation resolves it otherwise).
        const root = changed.length > 0 ? await userDataRoot(paths.userData) : undefined;
        workspace.context = {
          userData: paths.userData,
          root,
          cwd: cwd ?? paths.workspace,
          // Not listed when the thread's folders are not its own any more (see userDataRoot).
          changed: root === null ? [] : changed,
          // Read when the paths are translated: by then every header the chain passed on is known. A call sent on this
          // child since the answer (while the walk above ran off the event loop) may have named a file with its secrets.
          scrub: (text) => {
            noteRememberedNow(lease.session, secrets);
            return secrets.redactor().text(text);
          },
        };
      }
      answeredOn.set(result, lease.session);
      return result;
    } catch (err) {
      // A server's JSON-RPC error (`cannot open <path>`) quotes the host paths as a result would.
      if (hosted && err instanceof McpError && !isOwnText(err)) err.message = restoreNamedPaths(err.message, hosted.named);
      // The toolkit closed under the call: not the server's doing, and no next call will be served.
      if (pool.isClosed && !signal?.aborted) throw new ToolkitClosedError();
      // Our deadline, not an outer one that aborted the run.
      if (err instanceof DeadlineExceededError && !signal?.aborted) throw ownText(new McpToolCallError(timeoutText(record, err)));
      if (!stdio && isExpiredSession(err, lease.session.client.transport)) {
        // The server does not know this session any more: a new one serves the next call; this one is not re-sent.
        pool.invalidate(lease.session);
        throw ownText(new McpToolCallError(expiredText(record, expiredStatus(err), deadline.sends)));
      }
      if (isConnectionClosed(err)) {
        // Not the toolkit's close (above): the child exited, or the server ended an SSE session's stream. The pool
        // dropped the session as it closed; dropped here too should its close not have been reported yet.
        pool.invalidate(lease.session);
        throw ownText(new McpToolCallError(closedText(record, stdio, deadline.sends)));
      }
      if (!stdio && isLostCall(err)) {
        // Most likely the server restarted: the next call starts a new session rather than meet the 404 first.
        pool.invalidate(lease.session);
        throw ownText(new McpToolCallError(lostText(record, deadline.sends)));
      }
      if (!stdio && isGatewayProcessFailed(err, lease.session.client.transport)) {
        // The gateway's stdio process died and the gateway dropped the session with it: the next call starts a new
        // session rather than meet the 404 first.
        pool.invalidate(lease.session);
        throw ownText(new McpToolCallError(processFailedText(record, deadline.sends)));
      }
      if (!stdio && isUnauthorized(err)) {
        // Its credentials were refused (a revoked token): no call with them will go through, so the session is ended
        // rather than left holding a place under the session cap until it idles out.
        pool.invalidate(lease.session);
        throw err;
      }
      if (!stdio && isDroppedConnection(err)) {
        // As a lost call: the next call starts a new session rather than meet the 404 first.
        pool.invalidate(lease.session);
        throw ownText(new McpToolCallError(droppedText(record, deadline.sends)));
      }
      if (!stdio && isRefusedConnection(err)) {
        // The server is down, and its sessions with it: the call fails as it is (it was not sent), and the next call
        // starts a new session rather than meet the 404 of the server that comes back.
        pool.invalidate(lease.session);
      }
      throw err;
    } finally {
      lease.release();
    }
  };
}

/**
 * The text of a failed call. Ours (names and keys only) as it is; anything else scrubbed of the call's secrets:
 * a tool error as it is, any other error (an SDK error quoting a server's response body, an interceptor's
 * error quoting the request) bounded and prefixed; a child that could not be spawned by its error code.
 */
function failureText(err: unknown, record: McpToolRecord, redactor: Redactor): string {
  if (isOwnText(err)) return (err as Error).message;
  if (err instanceof McpToolCallError) return redactor.text(err.message);
  // An SDK error can quote the server's response body (a proxy's HTML error page): line breaks and terminal controls
  // are shown escaped, so the model reads one line, as discovery's warning shows it.
  const reason = startFailureText(record.server, err) ?? systemErrorText(err) ?? escapeControls(redactor.text(messageWithCause(err)));
  return `MCP tool '${record.rawName}' on server '${record.server}' failed: ${boundText(reason, CALL_ERROR_MAX_CHARS)}`;
}

/**
 * Turns a result the chain produced (already scrubbed, its paths translated) into what the tool returns: a
 * ToolMessage in a tool node, else content. Bounded after scrubbing, so a cut never leaves part of a secret that
 * redaction would not match.
 */
function toToolOutput(
  result: CallToolResult,
  visibleName: string,
  toolCallId: string | undefined,
  maxResultChars: number,
  workspace: CallWorkspace,
): unknown {
  const converted = boundConvertedResult(withWorkspaceChanges(convertCallToolResult(result), workspace.context), maxResultChars);
  const unlisted = workspace.walkCut ? WALK_CUT_NOTE : workspace.tooLarge ? TOO_LARGE_NOTE : undefined;
  if (unlisted !== undefined) addNote(converted, unlisted);
  if (workspace.pathsCut) addNote(converted, PATHS_CUT_NOTE);
  const content = converted.content;
  if (toolCallId === undefined) {
    if (converted.isError) throw new McpToolCallError(typeof content === "string" ? content : "MCP tool error");
    return content;
  }
  return new ToolMessage({
    content,
    artifact: converted.artifact,
    status: converted.isError ? "error" : "success",
    tool_call_id: toolCallId,
    name: visibleName,
  });
}

function addNote(converted: ConvertedResult, text: string): void {
  const note = converted.artifact?.note;
  converted.artifact = { ...converted.artifact, note: note === undefined ? text : `${note}; ${text}` };
}

/** What the innermost handler saw of a stdio call's thread workspace, for the result's paths and change list. */
export interface CallWorkspace {
  context?: PathContext;
  /** The workspace before the call's first attempt (`null`: too large to list, or the walk was cut). */
  before?: WorkspaceSnapshot;
  /** A walk before or after the call did not finish within `tool_call_timeout`: the changes are not listed. */
  walkCut?: boolean;
  /** The workspace had more than `MAX_SNAPSHOT_ENTRIES` entries before or after the call: the changes are not listed. */
  tooLarge?: boolean;
  /** The result's path translation did not finish within `tool_call_timeout`: its paths are shown as the server sent them. */
  pathsCut?: boolean;
}

const WALK_CUT_NOTE = "workspace_changes not listed: the workspace walk did not finish within tool_call_timeout";
const TOO_LARGE_NOTE = `workspace_changes not listed: the workspace has more than ${MAX_SNAPSHOT_ENTRIES} entries`;
const PATHS_CUT_NOTE = "paths not translated: the file system did not answer within tool_call_timeout";

/**
 * The workspace now, for the call's change list; `null` when it cannot be listed, the reason noted on `workspace` (a
 * walk cut by the deadline, after which no other is tried, or more entries than a snapshot holds).
 */
async function listableSnapshot(scanner: WorkspaceScanner, deadline: CallDeadline, workspace: CallWorkspace): Promise<WorkspaceSnapshot> {
  if (workspace.walkCut) return null;
  const walked = scanner.snapshotInPlace() ?? (await cutByDeadline(scanner.snapshotLarge(), deadline));
  if (walked === undefined) workspace.walkCut = true;
  else if (walked === null) workspace.tooLarge = true;
  return walked ?? null;
}

/**
 * File-system work off the event loop (a walk, a path translation) that the call's deadline may cut: `undefined` when
 * it did (the work goes on unseen, as a file system call cannot be taken back). A slow file system (a hung network
 * mount) costs the listing or the translation, not the call.
 */
function cutByDeadline<T>(work: Promise<T>, deadline: CallDeadline): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const cut = () => resolve(undefined);
    deadline.walking(cut);
    work.then(
      (done) => {
        deadline.walked(cut);
        resolve(done);
      },
      (err: unknown) => {
        deadline.walked(cut);
        reject(err);
      },
    );
  });
}

/**
 * A stdio result with the file references of its thread workspace shown as `/mnt/user-data/…` (SPEC §5.1). The
 * top-level `structuredContent` keys in `protocolFields` (a task's id) are left as the server sent them.
 */
function withTranslatedPaths(
  result: CallToolResult,
  workspace: CallWorkspace,
  protocolFields: readonly string[],
): Promise<CallToolResult> | CallToolResult {
  const context = workspace.context;
  if (!context) return result;
  // Found once, for both: the usual result, naming no path, skips the file system and a promise.
  const references = pathReferences(result, protocolFields);
  return mayTranslatePaths(result, context, protocolFields, references) ? translateResultPaths(result, context, protocolFields, references) : result;
}

/**
 * A path translation the call's deadline may cut, as it cuts a walk: when `tool_call_timeout` runs out first, the result
 * stays `untranslated` (noted on `workspace`; the file system call goes on unseen); when the call ends first (its
 * `max_total_timeout`, the run's cancellation), the deadline's reason is thrown.
 */
async function translatedWithin(
  translating: Promise<CallToolResult>,
  untranslated: CallToolResult,
  deadline: CallDeadline,
  workspace: CallWorkspace,
): Promise<CallToolResult> {
  const translated = await cutByDeadline(translating, deadline);
  if (deadline.hasStopped) throw deadline.reason;
  if (translated !== undefined) return translated;
  workspace.pathsCut = true;
  return untranslated;
}

function withWorkspaceChanges(converted: ConvertedResult, context: PathContext | undefined): ConvertedResult {
  if (!context || context.changed.length === 0) return converted;
  return { ...converted, artifact: { ...converted.artifact, workspace_changes: virtualWorkspaceChanges(context) } };
}

/** An error ToolMessage for a call that never reached the chain. */
export function toolErrorOutput(message: string, visibleName: string, config: RunnableConfig | undefined): unknown {
  return errorOutput(message, visibleName, toolCallIdOf(resolveToolRuntime(config)));
}

function errorOutput(message: string, visibleName: string, toolCallId: string | undefined): unknown {
  if (toolCallId === undefined) throw new McpToolCallError(message);
  return new ToolMessage({ content: message, status: "error", tool_call_id: toolCallId, name: visibleName });
}

/**
 * One tool call of a harness tool. Failures the model can act on become error ToolMessages with this
 * project's own text; LangGraph interrupts/commands and run cancellation propagate.
 */
export async function runToolCall(
  target: CallTarget,
  record: McpToolRecord,
  visibleName: string,
  args: Record<string, unknown>,
  config: RunnableConfig | undefined,
  opts: CallPathOptions,
): Promise<unknown> {
  const runtime = resolveToolRuntime(config);
  const toolCallId = toolCallIdOf(runtime);
  try {
    const workspace: CallWorkspace = {};
    const outcome = await runDirectCall(target, record, args, runtime, runtime?.signal, opts, workspace);
    // An interceptor's ToolMessage or Command is the tool's output as it is.
    if (isCommand(outcome) || ToolMessage.isInstance(outcome)) return outcome;
    return toToolOutput(outcome, visibleName, toolCallId, opts.maxResultChars ?? DEFAULT_MAX_RESULT_CHARS, workspace);
  } catch (err) {
    if (isGraphBubbleUp(err) || runtime?.signal?.aborted || err instanceof ToolkitClosedError) throw err;
    const message = isOwnText(err) ? (err as Error).message : failureText(err, record, new CallSecrets(opts.secrets, runtime, opts.remembered).redactor());
    return errorOutput(message, visibleName, toolCallId);
  }
}

/**
 * One call through the interceptor chain, also used outside a tool node (durable tasks). Returns the chain's
 * outcome with its stdio paths translated (but under the top-level `structuredContent` keys in `protocolFields`),
 * then scrubbed of every secret known for the call (or, with `unscrubbed`, as it is, handing that caller those
 * secrets): scrubbed after translation, so a virtual path next to the text around it (a link's target name, then the
 * JSON escape the reference ran into) cannot make up a secret that neither held alone. Failures throw an `McpToolCallError` with the vetted,
 * scrubbed text a tool shows; interrupts propagate, and so does the abort reason of a cancelled run.
 */
export async function runDirectCall(
  target: CallTarget,
  record: McpToolRecord,
  args: Record<string, unknown>,
  runtime: ToolRuntime | undefined,
  signal: AbortSignal | undefined,
  opts: CallPathOptions,
  workspace: CallWorkspace = {},
  carried?: (values: readonly string[]) => void,
  unscrubbed?: (secrets: readonly string[]) => void,
  protocolFields: readonly string[] = [],
): Promise<McpCallOutcome> {
  const secrets = new CallSecrets(opts.secrets, runtime, opts.remembered);
  const request = new McpToolCallRequest({
    serverName: record.server,
    toolName: record.rawName,
    args,
    headers: opts.headers,
    runtime,
  });
  let deadline: CallDeadline | undefined;
  try {
    // One promise, settled by the chain or by the call's deadline (or the run's cancellation), whichever comes first:
    // an interceptor that never settles cannot hold the tool node, and what it does later goes nowhere.
    let outcome = await new Promise<McpCallOutcome>((resolve, reject) => {
      const bound = (deadline = new CallDeadline(callDeadlineLimits(target.server), signal, reject));
      if (bound.hasStopped) return;
      const chain = composeInterceptors(
        opts.interceptors.map((interceptor) => secrets.watch(interceptor)),
        sendToServer(target, record, runtime, signal, secrets, workspace, bound, protocolFields),
      );
      Promise.resolve(chain(request)).then(resolve, reject);
    });
    // An interceptor's ToolMessage or Command is not a result: not translated.
    if (!isCommand(outcome) && !ToolMessage.isInstance(outcome)) {
      // Every walk of a result (redaction, paths, conversion, a checkpoint's serializer) recurses: bounded here, once.
      if (nestsDeeperThan(outcome, MAX_RESULT_DEPTH)) throw ownText(new McpToolCallError(tooDeepText(record)));
      const answered = outcome;
      const translating = withTranslatedPaths(outcome, workspace, protocolFields);
      // The file system may hang (a stalled mount): the call's deadline bounds the translation too.
      outcome = translating instanceof Promise ? await translatedWithin(translating, outcome, deadline!, workspace) : translating;
      const answering = answeredOn.get(answered);
      if (answering && outcome !== answered) answeredOn.set(outcome, answering);
    }
    if (!unscrubbed) return scrubOutcome(outcome, secrets.redactor());
    unscrubbed(secrets.all());
    return outcome;
  } catch (err) {
    if (isGraphBubbleUp(err) || err instanceof ToolkitClosedError) throw err;
    // A cancelled run ends with its own reason: an error that raced the abort may quote what the call carried.
    if (signal?.aborted) throw signal.reason;
    // The deadline ran out while no request was in flight (an interceptor, before or after `next`).
    if (err instanceof DeadlineExceededError) throw ownText(new McpToolCallError(timeoutText(record, err)));
    throw ownText(new McpToolCallError(failureText(err, record, secrets.redactor())));
  } finally {
    deadline?.end();
    // Also after a failure: the request may have reached the server.
    carried?.(secrets.values());
  }
}
