import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import WebSocket from 'ws';
import type { TestAgent } from '../../../test/helpers/agent.js';

export const runId = randomBytes(3).toString('hex');
/** Unique deployment names per run (other suites and helpers share the engine). */
export const uniqueName = (what: string) => `t${runId}-${what}`;

export async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 30_000, stepMs = 150): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** Removes every container and network of the test projects of this run. */
export async function cleanupDocker(prefix = `t${runId}-`): Promise<void> {
  const { stdout } = await execa('docker', [
    'ps',
    '-a',
    '--filter',
    'label=agent.test=1',
    '--filter',
    `label=com.docker.compose.project`,
    '--format',
    '{{.ID}} {{.Label "com.docker.compose.project"}}',
  ]);
  const ids = stdout
    .split('\n')
    .filter((l) => l.split(' ')[1]?.startsWith(prefix))
    .map((l) => l.split(' ')[0]!);
  if (ids.length) await execa('docker', ['rm', '-f', ...ids], { reject: false });
  const nets = await execa('docker', ['network', 'ls', '--format', '{{.Name}}']);
  const mine = nets.stdout.split('\n').filter((n) => n.startsWith(prefix));
  if (mine.length) await execa('docker', ['network', 'rm', ...mine], { reject: false });
  const vols = await execa('docker', ['volume', 'ls', '--format', '{{.Name}}']);
  const myVols = vols.stdout.split('\n').filter((n) => n.startsWith(prefix));
  if (myVols.length) await execa('docker', ['volume', 'rm', '-f', ...myVols], { reject: false });
}

/**
 * Removes the services of this run's swarm stacks (labelled agent.test=1 like every test object), then what
 * `cleanupDocker` removes: whatever a test left behind.
 */
export async function cleanupStacks(): Promise<void> {
  const { stdout } = await execa('docker', ['service', 'ls', '--filter', 'label=agent.test=1', '--format', '{{.ID}} {{.Name}}'], { reject: false });
  const ids = stdout
    .split('\n')
    .filter((l) => l.split(' ')[1]?.startsWith(`t${runId}-`))
    .map((l) => l.split(' ')[0]!);
  if (ids.length) await execa('docker', ['service', 'rm', ...ids], { reject: false });
  await new Promise((r) => setTimeout(r, 1000));
  await cleanupDocker();
}

/** A two-service compose file: a web server on a random loopback port and a worker that logs every 200 ms. */
export const webCompose = (marker = 'v1') => `services:
  web:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "echo web-started-${marker}; exec httpd -f -v -p 80 -h /www"]
    ports:
      - "127.0.0.1::80"
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
  worker:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "i=0; while true; do echo tick-${marker}-$$i; i=$$((i+1)); sleep 0.2; done"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

/** One service of `busyboxStack`. */
export interface StackService {
  /** agent-test/busybox:latest unless given. */
  image?: string;
  /** busybox httpd serving /www on port 80 in the foreground unless given. */
  command?: string[];
  environment?: Record<string, string>;
  /**
   * SIGKILL unless given: busybox httpd as PID 1 ignores SIGTERM, so each task Swarm replaces, rolls back or moves
   * would wait out the 10 s grace period first.
   */
  stopSignal?: string;
  /** The health check's test, run every second: one failure makes the task unhealthy, so a bad update fails fast. */
  healthcheck?: string[] | undefined;
  /** Secrets the service mounts (the file declares them in `busyboxStack`'s `tail`). */
  secrets?: string[];
  /** deploy.replicas, 1 unless given. */
  replicas?: number;
  /** deploy.placement.constraints. */
  placement?: string[] | undefined;
}

/**
 * The compose text of a swarm stack of busybox services, each labelled agent.test=1 on its containers and on its
 * service (what cleanupStacks and cleanupDocker look for). `tail` is appended as it is: more keys of the last
 * service (indented by 4) or top-level sections (networks, secrets).
 */
export function busyboxStack(services: Record<string, StackService>, tail = ''): string {
  const list = (items: string[]) => `[${items.map((i) => JSON.stringify(i)).join(', ')}]`;
  const blocks = Object.entries(services).map(([name, s]) => {
    const lines = [
      `  ${name}:`,
      `    image: ${s.image ?? 'agent-test/busybox:latest'}`,
      `    command: ${list(s.command ?? ['sh', '-c', 'exec httpd -f -v -p 80 -h /www'])}`,
    ];
    if (s.environment) lines.push('    environment:', ...Object.entries(s.environment).map(([k, v]) => `      ${k}: ${v}`));
    lines.push(`    stop_signal: ${s.stopSignal ?? 'SIGKILL'}`);
    if (s.healthcheck) lines.push('    healthcheck:', `      test: ${list(s.healthcheck)}`, '      interval: 1s', '      timeout: 1s', '      retries: 1');
    if (s.secrets) lines.push('    secrets:', ...s.secrets.map((x) => `      - ${x}`));
    lines.push('    labels:', '      agent.test: "1"', '    deploy:', `      replicas: ${s.replicas ?? 1}`);
    if (s.placement) lines.push('      placement:', `        constraints: ${list(s.placement)}`);
    lines.push('      labels:', '        agent.test: "1"');
    return `${lines.join('\n')}\n`;
  });
  return `services:\n${blocks.join('')}${tail}`;
}

/** Opens a log stream, sends the token, and collects messages (`lines()`: the log lines among them). */
export function openStream(agent: TestAgent, path: string, query: Record<string, string> = {}, token = agent.token) {
  const url = new URL(`/api${path}`, agent.url.replace('http', 'ws'));
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  const ws = new WebSocket(url);
  const messages: any[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  ws.on('open', () => ws.send(token));
  ws.on('message', (data) => messages.push(JSON.parse(data.toString())));
  return { ws, messages, closed, lines: () => messages.filter((m) => m.type === 'line') };
}
