import type { ToolRuntime } from "@langchain/core/tools";
import { runSecrets } from "../shared/identity";
import type { HeaderMap } from "../shared/headers";
import type { McpToolInterceptor } from "../shared/interceptor";
import { headerSecrets } from "../shared/header-secrets";
import { recordSecrets, Redactor } from "../shared/redact";

/**
 * The secrets known for one call: the server's own (static headers, values that came from `$VAR`, OAuth
 * client secrets), the run's `context.secrets`, and every header set any interceptor layer saw or passed on.
 * Whatever the call hands back (result, ToolMessage, error text, progress message) is scrubbed with them.
 */
export class CallSecrets {
  private readonly fixed: readonly string[];
  private readonly headerSets = new Set<HeaderMap>();
  /** Secrets an earlier call left with the session this one runs on (stdio), or a task's submit left with its scope. */
  private remembered: readonly string[] = [];
  /** The list last noted (compared by identity: a session hands out the same array until it changes). */
  private noted: readonly string[] = [];
  /** Both derived from the header sets noted so far; dropped when another one is noted. */
  private known: readonly string[] | undefined;
  private memo: Redactor | undefined;

  /** `remembered`: secrets from before this call that it does not carry (see `noteRemembered`). */
  constructor(serverSecrets: readonly string[], runtime: ToolRuntime | undefined, remembered: readonly string[] = []) {
    const perRun = recordSecrets(runSecrets(runtime));
    this.fixed = perRun.length === 0 ? serverSecrets : [...serverSecrets, ...perRun];
    this.remembered = remembered;
  }

  noteHeaders(headers: HeaderMap): void {
    if (this.headerSets.has(headers)) return;
    this.headerSets.add(headers);
    this.known = undefined;
    this.memo = undefined;
  }

  /**
   * Secrets from before this call that its answer may echo; they join the redactor, not `values()`. Never fewer: a
   * thread workspace's memory lets go of a session that left once no call runs there, but what this call was told
   * may still be named in what it returns.
   */
  noteRemembered(values: readonly string[]): void {
    if (values === this.noted) return;
    this.noted = values;
    this.memo = undefined;
    if (this.remembered.length === 0) {
      this.remembered = values;
      return;
    }
    const kept = new Set(values);
    const dropped = this.remembered.filter((value) => !kept.has(value));
    this.remembered = dropped.length === 0 ? values : [...values, ...dropped];
  }

  /** Every secret this call carried: the server's, the run's and those of the headers noted. */
  values(): readonly string[] {
    this.known ??= this.headerSets.size === 0 ? this.fixed : [...this.fixed, ...headerSecrets(...this.headerSets)];
    return this.known;
  }

  /** What this call carried and what it was told to remember: what `redactor()` scrubs. */
  all(): readonly string[] {
    return this.remembered.length === 0 ? this.values() : [...this.values(), ...this.remembered];
  }

  /** Scrubs what this call carried and what it was told to remember. */
  redactor(): Redactor {
    this.memo ??= Redactor.of(this.all());
    return this.memo;
  }

  /** `interceptor`, noting the headers of the request it receives and of the one it passes on. */
  watch(interceptor: McpToolInterceptor): McpToolInterceptor {
    return (request, next) => {
      this.noteHeaders(request.headers);
      return interceptor(request, (passed) => {
        this.noteHeaders(passed.headers);
        return next(passed);
      });
    };
  }
}
