/**
 * agentctl with the deployments plugin on the real docker engine (test/env starts dockerd and builds
 * agent-test/busybox): a deployment created from a skeleton-filled file, listed, its logs followed over the
 * websocket, and stopped through a plan — which ends the follow.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify as toYaml, parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startAgent, type TestAgent } from '../../test/helpers/agent.js';
import { cliHome, waitFor, type CliHome } from './helpers/cli.js';

const run = promisify(execFile);
const name = `t${randomBytes(3).toString('hex')}-cli`;

const compose = `services:
  worker:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "i=0; while true; do echo tick-$$i-$$GREETING; i=$$((i+1)); sleep 0.2; done"]
    environment:
      GREETING: \${GREETING}
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

/** Removes what the compose project of this file left behind (containers, network). */
async function cleanupDocker(): Promise<void> {
  const { stdout } = await run('docker', ['ps', '-aq', '--filter', 'label=agent.test=1', '--filter', `label=com.docker.compose.project=${name}`]);
  const ids = stdout.split('\n').filter(Boolean);
  if (ids.length) await run('docker', ['rm', '-f', ...ids]).catch(() => undefined);
  const nets = await run('docker', ['network', 'ls', '-q', '--filter', `name=${name}`]);
  const netIds = nets.stdout.split('\n').filter(Boolean);
  if (netIds.length) await run('docker', ['network', 'rm', ...netIds]).catch(() => undefined);
}

describe('agentctl with deployments', () => {
  let agent: TestAgent;
  let home: CliHome;

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments'] });
    home = cliHome();
    const login = await home.run(['login', '--url', agent.url, '--username', 'admin'], { input: `${ADMIN_PASSWORD}\n` });
    expect(login.code, login.stderr).toBe(0);
  });
  afterAll(async () => {
    await agent?.api('DELETE', `/deployments/${name}`, { query: { remove_files: true } }).catch(() => undefined);
    await agent?.stop();
    await cleanupDocker();
    home?.remove();
  });

  it('creates a deployment from a skeleton-filled file and lists it', async () => {
    const help = await home.run(['deployments', 'create', '--help']);
    expect(help.stdout).toMatch(/Method and path\s+POST \/api\/deployments/);
    expect(help.stdout).toMatch(/Permission\s+deployments:write/);
    expect(help.stdout).toMatch(/^\s+env_vars\s+array of object, optional/m);
    expect(help.stdout).toMatch(/^\s+key\s+string, required/m);
    expect(help.stdout).toMatch(/^\s+auto_start\s+boolean, optional, default false/m);

    // The YAML skeleton, filled in the way a person would: keep the structure, replace the placeholders.
    const skeleton = await home.run(['deployments', 'create', '--skeleton', '--yaml']);
    expect(skeleton.code).toBe(0);
    expect(skeleton.stdout).toMatch(/^name: .*# required · string · pattern/m);
    const body = parseYaml(skeleton.stdout) as Record<string, any>;
    expect(Object.keys(body)).toEqual(expect.arrayContaining(['name', 'compose_content', 'env_vars', 'auto_start']));
    body.name = name;
    body.compose_content = compose;
    body.env_vars = [{ key: 'GREETING', value: 'hello-from-cli' }];
    body.auto_start = true;
    for (const [key, value] of Object.entries(body)) if (typeof value === 'string' && value.startsWith('<optional')) delete body[key];
    const file = join(home.dir, 'deployment.yaml');
    writeFileSync(file, toYaml(body));

    // Checked before sending: a typo in the filled file names the field and suggests the right one.
    const typo = join(home.dir, 'typo.json');
    writeFileSync(typo, JSON.stringify({ ...body, autostart: true }));
    const refused = await home.run(['deployments', 'create', '--data', `@${typo}`]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("body: unknown field 'autostart' — did you mean 'auto_start'?");

    const created = await home.run(['deployments', 'create', '--data', `@${file}`]);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(new RegExp(`^name\\s+${name}$`, 'm'));
    expect(created.stdout).toMatch(/^status\s+running$/m);
    expect(created.stdout).toContain(`deployment ${name} created and started`);

    const list = await home.run(['deployments', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^NAME\s+PATH\s+STATUS/);
    expect(list.stdout).toMatch(new RegExp(`^${name}\\s+\\S+\\s+running\\s+`, 'm'));

    const logs = await waitFor(async () => {
      const r = await home.run(['deployments', 'logs', name, '--tail', '5']);
      return /^worker \| tick-\d+-hello-from-cli$/m.test(r.stdout) ? r : null;
    }, 'log lines of the worker');
    expect(logs.code).toBe(0);
  });

  it('follows the logs over the websocket until a planned stop ends them', async () => {
    const follow = home.start(['deployments', 'logs', name, '--follow', '--tail', '1']);
    await waitFor(() => (follow.output().stdout.match(/^worker \| tick-\d+-hello-from-cli$/gm) ?? []).length >= 3, 'three followed lines');
    expect(follow.output().stderr).toContain(`following /api/deployments/${name}/logs/stream`);
    // The lines keep coming: the follow is live, not a one-off read.
    const seen = (follow.output().stdout.match(/tick-(\d+)/g) ?? []).map((t) => Number(t.slice(5)));
    expect(seen).toEqual([...seen].sort((a, b) => a - b));

    const plan = await home.run(['deployments', 'stop', name, '--plan']);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toMatch(new RegExp(`deployments\\.stop on deployment ${name}`));
    const id = /agentctl plans apply ([0-9a-f-]{36})/.exec(plan.stdout)![1]!;
    const applied = await home.run(['plans', 'apply', id]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(`Plan ${id} applied (deployments.stop).`);

    // The containers stopped: the agent ends the stream, and the follow exits on its own with 0.
    expect(await follow.exited).toBe(0);
    expect(follow.output().stderr).toContain('-- end of stream: the containers stopped');
    const list = await home.run(['deployments', 'list', '--json']);
    expect(JSON.parse(list.stdout).data.find((d: { name: string }) => d.name === name).status).not.toBe('running');
  });

  it('stops a follow with Ctrl-C', async () => {
    const start = await home.run(['deployments', 'start', name]);
    expect(start.code, start.stderr).toBe(0);
    const follow = home.start(['deployments', 'logs', name, '--follow', '--tail', '0']);
    await waitFor(() => /^worker \| tick-\d+-hello-from-cli$/m.test(follow.output().stdout), 'a followed line');
    follow.child.kill('SIGINT');
    expect(await follow.exited).toBe(0);
  });
});
