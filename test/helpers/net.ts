/** Small helpers every suite needs: a free loopback port, and polling until something holds. */
import { createServer } from 'node:net';

/** A free TCP port on loopback (bound and released; another process could take it, which is unlikely). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Calls `fn` every `everyMs` until it returns something truthy; throws (with the last error) after `timeoutMs`. */
export async function waitFor<T>(fn: () => Promise<T | null | undefined | false>, what: string, timeoutMs = 15_000, everyMs = 100): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message ?? String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
