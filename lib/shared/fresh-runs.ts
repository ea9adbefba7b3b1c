/**
 * `run` made shareable: each call gets a run that started after it was called, and callers that ask while one runs
 * share the one after it. Closing hundreds of sessions at once then reads /proc a few times, not once per session,
 * and no caller gets an answer older than its question.
 */
export function freshRuns<T>(run: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined;
  let next: Promise<T> | undefined;
  const fresh = (): Promise<T> => {
    if (!running) {
      const started = run();
      running = started;
      const done = (): void => {
        if (running === started) running = undefined;
      };
      started.then(done, done);
      return started;
    }
    next ??= running
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => {
        next = undefined;
        return fresh();
      });
    return next;
  };
  return fresh;
}
