/**
 * Runs app plugins as child processes on loopback ports and keeps them up: a crashed app is restarted with
 * exponential backoff (1 s doubling to 30 s, reset after a minute of uptime). Each app gets a per-run secret to
 * verify the principal header, and a token of its own system principal to call the agent back. An app never outlives
 * the agent: its stdin is a pipe only the agent holds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { mkdirSync } from 'node:fs';
import type { AppDirectory, AppPlugin, AppState, Logger } from '@agent/sdk';
import { freePort, waitForPort } from './ports.js';
import { forwardStream } from './output.js';

interface ManagedApp {
  state: AppState;
  child: ChildProcess | null;
  backoffMs: number;
  startedAt: number;
  timer: NodeJS.Timeout | null;
  spawn: () => void;
}

/**
 * The agent's heap sizing (`--max-semi-space-size=1 --heap-growing-percent=20` from `npm start`, the service unit
 * and the tests; scripts/lib.mjs says why), passed on to every app it starts. An app is a small long-lived service
 * like the agent; started without the first flag, V8 lets its semi-spaces grow to 16 MiB each, which costs the
 * observability app about as much resident memory as it costs the agent (~13 MB) for no measurable gain. Only these
 * flags are passed on: other options of the agent's (`--inspect`, an old-space budget) are about the agent itself.
 * The agent's environment (its malloc setting included) is the app's too.
 */
const APP_NODE_FLAGS = process.execArgv.filter((arg) => arg.startsWith('--max-semi-space-size=') || arg.startsWith('--heap-growing-percent='));

export class AppHost implements AppDirectory {
  private readonly apps = new Map<string, ManagedApp>();
  private stopping = false;

  constructor(
    private readonly log: Logger,
    private readonly dataDir: string,
    private readonly agentUrl: () => string,
    private readonly issueToken: (name: string) => Promise<string>,
  ) {}

  state(name: string): AppState | undefined {
    return this.apps.get(name)?.state;
  }

  /** Starts a plugin's app and keeps it up until `stopAll`; returns before the process is up. */
  start({ plugin: name, packageDir, app, config }: AppPlugin): void {
    if (this.stopping) return;
    const appDataDir = join(this.dataDir, 'plugins', name, 'app');
    mkdirSync(appDataDir, { recursive: true, mode: 0o700 });
    const managed: ManagedApp = {
      state: { name, status: 'starting', pid: null, port: null, restarts: 0, last_exit: null, secret: randomBytes(32).toString('hex') },
      child: null,
      backoffMs: 1000,
      startedAt: 0,
      timer: null,
      spawn: () => undefined,
    };
    this.apps.set(name, managed);
    managed.spawn = () => {
      void (async () => {
        const port = await freePort();
        const token = await this.issueToken(name);
        if (this.stopping) return;
        const child = spawn(process.execPath, [...APP_NODE_FLAGS, join(packageDir, app.entry)], {
          cwd: packageDir,
          // stdin is the app's lifeline: the agent never writes to it, and the operating system closes it when the
          // agent ends, however it ends (a kill -9 included), so the app sees end-of-file and stops (`onAgentGone` in
          // the SDK).
          stdio: ['pipe', 'pipe', 'pipe'],
          env: {
            ...process.env,
            ...app.env,
            AGENT_APP_NAME: name,
            AGENT_APP_HOST: '127.0.0.1',
            AGENT_APP_PORT: String(port),
            AGENT_APP_SECRET: managed.state.secret,
            AGENT_APP_DATA_DIR: appDataDir,
            AGENT_APP_CONFIG: JSON.stringify(config),
            AGENT_URL: this.agentUrl(),
            AGENT_APP_TOKEN: token,
          },
        });
        child.stdin?.on('error', () => undefined);
        managed.child = child;
        managed.startedAt = Date.now();
        managed.state = { ...managed.state, status: 'starting', pid: child.pid ?? null, port };
        forwardStream(this.log, name, child.stdout, 'info');
        forwardStream(this.log, name, child.stderr, 'warn');
        child.on('exit', (code, signal) => {
          managed.child = null;
          managed.state = {
            ...managed.state,
            status: this.stopping ? 'stopped' : 'crashed',
            pid: null,
            last_exit: { code, signal, at: new Date().toISOString() },
          };
          if (this.stopping) return;
          if (Date.now() - managed.startedAt > 60_000) managed.backoffMs = 1000;
          this.log.warn('app exited; restarting', { app: name, code, signal, in_ms: managed.backoffMs });
          managed.timer = setTimeout(() => {
            managed.state.restarts++;
            managed.spawn();
          }, managed.backoffMs);
          managed.backoffMs = Math.min(managed.backoffMs * 2, 30_000);
        });
        const up = await waitForPort(port, 15_000, () => managed.child === child);
        if (up && managed.child === child) {
          managed.state = { ...managed.state, status: 'running' };
          this.log.info('app running', { app: name, port, pid: child.pid });
        } else if (managed.child === child) {
          this.log.error('app did not open its port in time; restarting', { app: name });
          child.kill('SIGKILL');
        }
      })().catch((err: unknown) => this.log.error('app spawn failed', { app: name, error: String(err) }));
    };
    managed.spawn();
  }

  /** Stops every app: SIGTERM, then SIGKILL after 5 s. */
  async stopAll(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      [...this.apps.values()].map(
        (m) =>
          new Promise<void>((done) => {
            if (m.timer) clearTimeout(m.timer);
            const child = m.child;
            if (!child) return done();
            const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
            child.once('exit', () => {
              clearTimeout(kill);
              done();
            });
            child.kill('SIGTERM');
          }),
      ),
    );
  }
}
