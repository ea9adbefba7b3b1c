/**
 * What task submits carried (the run's request-scoped secrets among them), remembered in this process per
 * (server, user, thread): status and cancel calls carry server-level credentials only, yet a job server may echo
 * what it was sent at submit in a later answer, so that scope's answers are scrubbed of these too. What status and
 * cancel calls carried (an OAuth token, rotated since) is remembered per server and scrubbed from its answers. Memory only,
 * never stored: after a restart, or in a worker process that took no submit, the server-level secrets (and a stdio
 * session's own memory) are what is known.
 */
export const SUBMIT_SECRETS_MAX_SCOPES = 4096;
/** Values kept per scope: a thread with hundreds of pending tasks, each submitted with fresh tokens, keeps them all. */
export const SUBMIT_SECRETS_MAX_PER_SCOPE = 1024;
/** Values kept in all (a few MiB at most): past it, whole scopes go, the least recently used first. */
export const SUBMIT_SECRETS_MAX_VALUES = 65_536;

export class SubmitSecretsMemory {
  readonly #scopes = new Map<string, { values: Set<string>; list?: readonly string[] }>();
  #total = 0;

  constructor(
    private readonly maxScopes = SUBMIT_SECRETS_MAX_SCOPES,
    private readonly maxPerScope = SUBMIT_SECRETS_MAX_PER_SCOPE,
    private readonly maxValues = SUBMIT_SECRETS_MAX_VALUES,
  ) {}

  static key(serverName: string, userId: string, threadId: string): string {
    return JSON.stringify([serverName, userId, threadId]);
  }

  /**
   * The scope of what a server's status and cancel calls carried: server-level credentials only, the same for every
   * user and thread (never one of the scopes of `key`).
   */
  static serverKey(serverName: string): string {
    return JSON.stringify([serverName]);
  }

  remember(key: string, values: readonly string[]): void {
    if (values.length === 0) return;
    let scope = this.#scopes.get(key);
    if (scope) this.#scopes.delete(key);
    else scope = { values: new Set() };
    this.#scopes.set(key, scope); // most recently used last
    this.#total -= scope.values.size;
    for (const value of values) {
      scope.values.delete(value);
      scope.values.add(value);
    }
    while (scope.values.size > this.maxPerScope) scope.values.delete(scope.values.values().next().value as string);
    this.#total += scope.values.size;
    scope.list = undefined;
    while (this.#scopes.size > this.maxScopes || (this.#total > this.maxValues && this.#scopes.size > 1)) {
      const oldest = this.#scopes.keys().next().value as string;
      this.#total -= this.#scopes.get(oldest)!.values.size;
      this.#scopes.delete(oldest);
    }
  }

  recall(key: string): readonly string[] {
    const scope = this.#scopes.get(key);
    if (!scope) return [];
    return (scope.list ??= [...scope.values]);
  }

  /** Scopes remembered (for tests and diagnostics). */
  get size(): number {
    return this.#scopes.size;
  }
}
