/**
 * agentctl following background jobs on the real engine: image pulls from a real registry (Debian's
 * docker-registry with htpasswd, as the credentials plugin's tests run it) through a loopback proxy that passes
 * 6 MB/s, so a 24 MB image takes a few seconds and its progress can be watched. Plain lines when stderr is a pipe,
 * a bar with control codes on a terminal (`script` gives the CLI a pseudo-terminal), the final job in `-o json`,
 * Ctrl-C that stops following but not the pull, `--follow` on the job's reader, `--detach`, and a failed pull. Then
 * jobs of the jobs plugin (its test fixture starts them: output lines, progress, a real `sleep` process), followed
 * over the plugin's websocket stream: every line once and in order, a failure, Ctrl-C and the cancel it names.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createConnection, createServer, type Server } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { ADMIN_PASSWORD, REPO_ROOT, startAgent, type TestAgent } from '../../test/helpers/agent.js';
import { startRegistry, type TestRegistry } from '../../plugins/credentials/test/registry.js';
import { CLI, cliHome, waitFor, type CliHome } from './helpers/cli.js';

const run = promisify(execFile);
const suffix = randomBytes(3).toString('hex');

/** Forwards a loopback port to `target`, passing at most `rate` bytes per second towards the client. */
async function throttledProxy(target: string, rate: number): Promise<{ host: string; close(): void }> {
  const [targetHost, targetPort] = target.split(':') as [string, string];
  const server: Server = createServer((client) => {
    const upstream = createConnection(Number(targetPort), targetHost);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      upstream.pause();
      client.write(chunk);
      setTimeout(() => upstream.resume(), (chunk.length / rate) * 1000);
    });
    upstream.on('end', () => client.end());
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    upstream.on('error', close);
    client.on('error', close);
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { host: `127.0.0.1:${(server.address() as { port: number }).port}`, close: () => server.close() };
}

// eslint-disable-next-line no-control-regex -- terminal control codes start with ESC
const CONTROL = /\u001b|\r/;

describe('agentctl following jobs', () => {
  let agent: TestAgent;
  let home: CliHome;
  let registry: TestRegistry;
  let proxy: { host: string; close(): void };
  let image: string;
  const rmi = () => run('docker', ['rmi', '-f', image]).catch(() => undefined);
  const present = () =>
    run('docker', ['image', 'inspect', image]).then(
      () => true,
      () => false,
    );

  beforeAll(async () => {
    registry = await startRegistry();
    // Two layers of random bytes (24 MB that no compression makes smaller) above the local test image, new for this
    // run (no build cache: a cached layer would stay on the engine and the pull would have nothing to download).
    const local = `agent-test/cli-jobs-${suffix}:1`;
    const build = spawn('docker', ['build', '--no-cache', '-q', '-t', local, '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
    build.stdin.end(`FROM agent-test/busybox:latest\nRUN head -c 16000000 /dev/urandom > /blob1-${suffix}\nRUN head -c 8000000 /dev/urandom > /blob2\n`);
    expect(await new Promise((r) => build.once('close', r))).toBe(0);
    await registry.docker(['login', registry.host, '-u', registry.username, '-p', registry.password]);
    await registry.docker(['tag', local, `${registry.host}/agent-test/cli-jobs:1`]);
    await registry.docker(['push', `${registry.host}/agent-test/cli-jobs:1`]);
    await registry.docker(['rmi', local, `${registry.host}/agent-test/cli-jobs:1`]);
    // Gone from the engine, layers included: pulls below download them.
    await expect(run('docker', ['image', 'inspect', local])).rejects.toThrow();
    proxy = await throttledProxy(registry.host, 6_000_000);
    image = `${proxy.host}/agent-test/cli-jobs:1`;

    agent = await startAgent({ plugins: ['docker', 'credentials'] });
    // The registry behind the proxy needs its password: the credentials plugin hands it to the pull.
    expect((await agent.api('POST', '/registries', { body: { slug: 'local', name: 'Local test registry', host: proxy.host } })).status).toBe(201);
    const cred = await agent.api('POST', '/credentials', {
      body: { name: 'local-puller', type: 'registry', registry: 'local', credentials: { username: registry.username, password: registry.password } },
    });
    expect(cred.status, cred.text).toBe(201);
    home = cliHome();
    const login = await home.run(['login', '--url', agent.url, '--username', 'admin', '--password-stdin'], { input: `${ADMIN_PASSWORD}\n` });
    expect(login.code, login.stderr).toBe(0);
  }, 180_000);

  afterAll(async () => {
    if (image) await rmi();
    await agent?.stop();
    proxy?.close();
    await registry?.stop();
    home?.remove();
  });

  it('follows a pull to its end in plain lines: output, percentage with ETA, the result', async () => {
    await rmi();
    const res = await home.run(['images', 'pull', '-f', `image=${image}`]);
    expect(res.code, res.stderr).toBe(0);
    // stderr is a pipe here: lines only, no cursor moves, no carriage returns, no colours.
    expect(res.stderr).not.toMatch(CONTROL);
    expect(res.stderr).toContain('Following job');
    // The engine's own lines, as the agent's job keeps them.
    expect(res.stderr).toMatch(/^[0-9a-f]{12}: Pull complete$/m);
    // Progress as the bytes came, with an estimate of the time left, and the end.
    const progress = res.stderr.split('\n').filter((l) => l.startsWith(`image.pull ${image}: `));
    expect(
      progress.some((l) => /: [1-9]\d?% \(\d+(\.\d)? MB of \d+(\.\d)? MB, \d\/\d layers\), ETA \d+s$/.test(l)),
      res.stderr,
    ).toBe(true);
    expect(progress.at(-1)).toMatch(/: 100% \(\d+(\.\d)? MB of \d+(\.\d)? MB, 3\/3 layers\)$/);
    expect(res.stdout).toMatch(/^job_id\s+\S+$/m);
    expect(res.stdout).toContain(`✓ image.pull ${image} succeeded`);
    expect(await present()).toBe(true);
  });

  it('prints the finished job with -o json, and fails (exit 1) with a pull that fails', async () => {
    const again = await home.run(['images', 'pull', '-f', `image=${image}`, '-o', 'json']);
    expect(again.code, again.stderr).toBe(0);
    const job = JSON.parse(again.stdout).data;
    expect(job).toMatchObject({ type: 'image.pull', image, status: 'succeeded', authenticated: true, error: null, progress: { percent: 100 } });

    const missing = `${proxy.host}/agent-test/not-there:1`;
    const failed = await home.run(['images', 'pull', '-f', `image=${missing}`]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(new RegExp(`✗ image\\.pull ${missing.replace(/[.]/g, '\\.')} failed: .+`));
  });

  it('draws a bar on a terminal', async () => {
    await rmi();
    // `script` runs the CLI on a pseudo-terminal, as a person's shell would.
    const command = [process.execPath, CLI, 'images', 'pull', '-f', `image=${image}`].map((a) => `'${a}'`).join(' ');
    const child = spawn('script', ['-qefc', `stty cols 120 rows 40; ${command}`, '/dev/null'], { env: { ...home.env, TERM: 'xterm' } });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    expect(await new Promise((r) => child.once('close', r)), out).toBe(0);
    expect(out).toMatch(/\u001b\[/); // cursor control
    expect(out).toMatch(new RegExp(`image\\.pull \\S+ █+ 100%`)); // the bar, full at the end
    expect(out).toContain(`✓ image.pull ${image} succeeded`);
  });

  it('Ctrl-C stops following, not the pull; the job can be followed again, or not followed at all', async () => {
    await rmi();
    const started = home.start(['images', 'pull', '-f', `image=${image}`]);
    await waitFor(() => /: \d+%/.test(started.output().stderr), 'a first progress line');
    started.child.kill('SIGINT');
    expect(await started.exited).toBe(130);
    const { stdout, stderr } = started.output();
    const id = /^job_id\s+(\S+)$/m.exec(stdout)![1]!;
    expect(stderr).toContain(`Stopped following: job ${id} goes on in the agent (Ctrl-C does not cancel it).`);
    expect(stderr).toContain(`Follow it again: agentctl images pull-status ${id} --follow`);
    // The pull went on meanwhile, and following it again ends when it does.
    const followed = await home.run(['images', 'pull-status', id, '--follow']);
    expect(followed.code, followed.stderr).toBe(0);
    expect(followed.stdout).toContain(`✓ image.pull ${image} succeeded`);
    expect((await agent.api('GET', `/images/pulls/${id}`)).body.data.status).toBe('succeeded');

    const detached = await home.run(['images', 'pull', '-f', `image=${image}`, '--detach']);
    expect(detached.code).toBe(0);
    const detachedId = /^job_id\s+(\S+)$/m.exec(detached.stdout)![1]!;
    expect(detached.stdout).toContain(`The job goes on in the agent. Follow it: agentctl images pull-status ${detachedId} --follow`);
    expect(detached.stderr).not.toContain('Following job');
    // Ended before the image is removed after the tests (a pull still running would bring it back).
    await waitFor(async () => (await agent.api('GET', `/images/pulls/${detachedId}`)).body.data.status !== 'running', 'the detached pull');
  });
});

describe('agentctl following jobs of the jobs plugin (its stream)', () => {
  let agent: TestAgent;
  let home: CliHome;
  const probe = (...fields: string[]) => [
    'job-probe',
    'probe-jobs',
    '-f',
    'marker=0',
    '-f',
    'fail=false',
    '-f',
    'sleep=0',
    '-f',
    'lines=0',
    ...fields.flatMap((f) => ['-f', f]),
  ];

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['jobs', join(REPO_ROOT, 'plugins/jobs/test/fixtures/job-probe')] });
    home = cliHome();
    const login = await home.run(['login', '--url', agent.url, '--username', 'admin', '--password-stdin'], { input: `${ADMIN_PASSWORD}\n` });
    expect(login.code, login.stderr).toBe(0);
  });
  afterAll(async () => {
    await agent?.stop();
    home?.remove();
  });

  it('prints every output line once and in order, the progress, and the result', async () => {
    const res = await home.run(probe('lines=300', 'sleep=1'));
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).not.toMatch(CONTROL);
    const lines = res.stderr.split('\n').filter((l) => /^line \d+$/.test(l));
    expect(lines).toEqual(Array.from({ length: 300 }, (_, i) => `line ${i + 1}`));
    expect(res.stderr).toMatch(/^probe 300 lines, sleep 1: 100% \(300\/300\)$/m);
    expect(res.stdout).toMatch(/^✓ probe 300 lines, sleep 1 succeeded in \d+s$/m);
    expect(res.stdout).toMatch(/^printed\s+300$/m);

    const failed = await home.run(probe('lines=2', 'fail=true'));
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/^✗ probe 2 lines, sleep 0 failed in \d+s: the probe failed as asked \(JOB_FAILED\)$/m);
  });

  it('Ctrl-C leaves the job running and names the command that cancels it', async () => {
    const started = home.start(probe('lines=3', 'sleep=30'));
    await waitFor(() => started.output().stderr.includes('line 3'), 'the output of the job');
    started.child.kill('SIGINT');
    expect(await started.exited).toBe(130);
    const id = /^job_id\s+(\S+)$/m.exec(started.output().stdout)![1]!;
    expect(started.output().stderr).toContain(`Follow it again: agentctl jobs get ${id} --follow`);
    expect(started.output().stderr).toContain(`Cancel it: agentctl jobs cancel ${id}`);
    expect((await agent.api('GET', `/jobs/${id}`)).body.data.status).toBe('running');
    const cancelled = await home.run(['jobs', 'cancel', id, '-o', 'jsonpath={.data.status}']);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.stdout).toBe('cancelled\n');
    // Following an ended job prints how it ended, at once.
    const after = await home.run(['jobs', 'get', id, '--follow']);
    expect(after.code).toBe(1);
    expect(after.stderr).toMatch(/✗ probe 3 lines, sleep 30 cancelled/);
  });
});
