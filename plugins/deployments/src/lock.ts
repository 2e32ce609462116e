/** One mutation at a time per deployment (create/update/start/stop/delete never interleave on a folder). */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  /**
   * Runs `fn` once the changes queued before it on `key` ended. With `signal` (a job that may be cancelled while it
   * waits), an abort stops the wait at once: the turn, when it comes, is skipped.
   */
  run<T>(key: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const next = previous
      .catch(() => undefined)
      .then(() => {
        signal?.throwIfAborted();
        return fn();
      });
    const tail = next.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    if (!signal) return next;
    let stop!: () => void;
    const aborted = new Promise<never>((_, reject) => {
      stop = () => reject(signal.reason);
      if (signal.aborted) stop();
      else signal.addEventListener('abort', stop, { once: true });
    });
    return Promise.race([next, aborted]).finally(() => signal.removeEventListener('abort', stop));
  }
}
