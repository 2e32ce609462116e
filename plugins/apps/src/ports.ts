/** Loopback ports for app processes: one free to give an app, and waiting until the app listens on it. */
import { createServer, connect } from 'node:net';

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolvePort(port));
    });
  });
}

/** True once something accepts connections on the port; false after the timeout or as soon as `alive` says no. */
export function waitForPort(port: number, timeoutMs: number, alive: () => boolean): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((done) => {
    const attempt = () => {
      if (!alive()) return done(false);
      const sock = connect(port, '127.0.0.1');
      sock.once('connect', () => {
        sock.destroy();
        done(true);
      });
      sock.once('error', () => {
        sock.destroy();
        if (Date.now() > deadline) done(false);
        else setTimeout(attempt, 50);
      });
    };
    attempt();
  });
}
