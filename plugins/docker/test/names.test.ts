/**
 * Names are owned: a project's networks, volumes, containers and built images carry only names it derives, and a
 * name another project (or no project) holds on the engine, or builds or runs, is refused — with the real compose
 * CLI (v1 on this machine) and the real engine, and on models of compose v2's canonical shape for v2's spellings.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostSafetyViolation } from '@agent/plugin-docker/api';
import { detectCompose } from '../src/compose/cli.js';
import { ComposeGuard } from '../src/compose/guard.js';
import { checkModel } from '../src/compose/policy.js';
import { realEngine } from './guard-engine.js';

const run = randomBytes(3).toString('hex');
const log = { debug() {}, info() {}, warn() {}, error() {} };
const p = (what: string) => `nm${run}${what}`;
const docker = (...args: string[]) => execa('docker', args);

describe('names are owned, against the real engine', () => {
  let guard: ComposeGuard;
  let root: string;
  const made: string[][] = [];

  beforeAll(async () => {
    const command = await detectCompose('auto');
    if (!command) throw new Error('compose is needed for this test');
    root = mkdtempSync(join(tmpdir(), 'agent-names-'));
    guard = new ComposeGuard({ root: join(root, 'private'), dockerHost: null, command: async () => command, engine: realEngine(), log });
  });
  afterAll(async () => {
    for (const args of made.reverse()) await execa('docker', args, { reject: false });
    rmSync(root, { recursive: true, force: true });
  });

  const folder = (name: string) => {
    const dir = join(root, name);
    mkdirSync(dir, { recursive: true });
    return dir;
  };
  const refusal = async (project: string, content: string, dir = folder(project)) => {
    const err = (await guard.check({ project, dir, content }).then(
      () => null,
      (e: unknown) => e,
    )) as { code?: string; extra?: { violations?: HostSafetyViolation[] } } | null;
    return err;
  };
  const svc = 'services:\n  app:\n    image: agent-test/busybox:latest\n';

  it('refuses a network or volume of its derived name that belongs to another project, or to none', async () => {
    const a = p('a');
    await docker('network', 'create', '--label', 'agent.test=1', '--label', 'com.docker.compose.project=someoneelse', `${a}_default`);
    made.push(['network', 'rm', `${a}_default`]);
    const net = await refusal(a, svc);
    expect(net?.code).toBe('HOST_SAFETY');
    expect(net?.extra?.violations).toEqual(
      expect.arrayContaining([expect.objectContaining({ key: 'networks.default', value: `${a}_default`, exception: `networks.external:${a}_default` })]),
    );

    const b = p('b');
    await docker('volume', 'create', '--label', 'agent.test=1', `${b}_data`);
    made.push(['volume', 'rm', '-f', `${b}_data`]);
    const vol = await refusal(b, `${svc}    volumes: ["data:/d"]\nvolumes:\n  data: {}\n`);
    expect(vol?.extra?.violations).toEqual(expect.arrayContaining([expect.objectContaining({ key: 'volumes.data', value: `${b}_data` })]));
    expect(JSON.stringify(vol)).toContain('no compose project');

    // Its own objects (by label) are its own.
    const c = p('c');
    await docker('network', 'create', '--label', 'agent.test=1', '--label', `com.docker.compose.project=${c}`, `${c}_default`);
    made.push(['network', 'rm', `${c}_default`]);
    await expect(guard.check({ project: c, dir: folder(c), content: svc })).resolves.toMatchObject({ project: c });
  });

  it('refuses derived container names another project holds, in the v1 and the v2 spelling', async () => {
    for (const [what, name] of [
      ['v1', `${p('d')}_app_1`],
      ['v2', `${p('e')}-app-1`],
    ] as const) {
      await docker(
        'create',
        '--name',
        name,
        '--label',
        'agent.test=1',
        '--label',
        'com.docker.compose.project=someoneelse',
        'agent-test/busybox:latest',
        'true',
      );
      made.push(['rm', '-f', name]);
      const project = what === 'v1' ? p('d') : p('e');
      const err = await refusal(project, svc);
      expect(err?.extra?.violations, what).toEqual(expect.arrayContaining([expect.objectContaining({ key: 'container_name', value: name })]));
    }
  });

  it('keeps an image a project builds or runs away from the builds of the others', async () => {
    const builder = p('f');
    const dir = folder(builder);
    writeFileSync(join(dir, 'Dockerfile'), 'FROM agent-test/busybox:latest\n');
    const image = `shared-${run}:1`;
    await guard.check({ project: builder, dir, content: `services:\n  app:\n    build: .\n    image: ${image}\n` });

    // Another project may neither run nor build that name while the first builds it.
    const runner = await refusal(p('g'), `services:\n  app:\n    image: ${image}\n`);
    expect(runner?.extra?.violations).toEqual(expect.arrayContaining([expect.objectContaining({ key: 'image', value: image })]));
    const dir2 = folder(p('h'));
    writeFileSync(join(dir2, 'Dockerfile'), 'FROM agent-test/busybox:latest\n');
    const rebuilder = await refusal(p('h'), `services:\n  app:\n    build: .\n    image: ${image}\n`, dir2);
    expect(rebuilder?.extra?.violations).toEqual(expect.arrayContaining([expect.objectContaining({ key: 'build', value: image })]));

    // A name a container of another project runs cannot be built over either (the next start would run it).
    const used = `used-${run}:1`;
    await docker('tag', 'agent-test/busybox:latest', used);
    made.push(['rmi', used]);
    await docker('create', '--name', `${p('user')}-1`, '--label', 'agent.test=1', '--label', 'com.docker.compose.project=someoneelse', used, 'true');
    made.push(['rm', '-f', `${p('user')}-1`]);
    const dir3 = folder(p('i'));
    writeFileSync(join(dir3, 'Dockerfile'), 'FROM scratch\n');
    const over = await refusal(p('i'), `services:\n  app:\n    build: .\n    image: ${used}\n`, dir3);
    expect(over?.extra?.violations).toEqual(expect.arrayContaining([expect.objectContaining({ key: 'build', value: used })]));
    expect(JSON.stringify(over)).toContain("project 'someoneelse'");
    // The agent's own image names are never a tenant's to build.
    const agentName = await refusal(p('m'), 'services:\n  app:\n    build: .\n    image: agent/objstore:0.1.0\n', dir3);
    expect(agentName?.extra?.violations).toEqual(expect.arrayContaining([expect.objectContaining({ exception: 'build.image:agent/objstore:0.1.0' })]));

    // A build without an image gets the project's own name, which nobody else may take.
    const own = await guard.check({ project: p('j'), dir: folder(p('j')), content: 'services:\n  web:\n    build: .\n' });
    expect((own.model.services as any).web.image).toBe(`${p('j')}_web`);
    const taker = await refusal(p('k'), `services:\n  app:\n    image: ${p('j')}_web\n`);
    expect(taker?.extra?.violations).toEqual(expect.arrayContaining([expect.objectContaining({ key: 'image', value: `${p('j')}_web` })]));
  });

  it('accepts the exact derived names and nothing else', async () => {
    const q = p('l');
    await expect(
      guard.check({ project: q, dir: folder(q), content: `${svc}    volumes: ["data:/d"]\nvolumes:\n  data:\n    name: ${q}_data\n` }),
    ).resolves.toMatchObject({ project: q });
    const dash = await refusal(q, `${svc}    volumes: ["data:/d"]\nvolumes:\n  data:\n    name: ${q}-data\n`);
    expect(dash?.extra?.violations).toEqual(expect.arrayContaining([expect.objectContaining({ key: 'volumes.data.name' })]));
  });
});

describe('names on compose v2 canonical models', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-names2-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const check = (model: Record<string, unknown>) => checkModel({ name: 'web', ...model }, { project: 'web', dir, exceptions: new Set() });

  it('v2 writes every name out: only <project>_<key> passes', () => {
    const ok = check({
      services: { app: { image: 'x', networks: { default: null }, volumes: [{ type: 'volume', source: 'data', target: '/d' }] } },
      networks: { default: { name: 'web_default' } },
      volumes: { data: { name: 'web_data' } },
    });
    expect(ok.violations).toEqual([]);
    expect(ok.ownNames).toEqual(
      expect.arrayContaining([
        { kind: 'network', key: 'default', name: 'web_default' },
        { kind: 'volume', key: 'data', name: 'web_data' },
      ]),
    );
    // `web-app_default` is the default network of a project `web-app`; `web_app_default` of `web_app`'s.
    for (const name of ['web-default', 'web-app_default', 'web_app_default', 'agent-infra-proxy']) {
      expect(check({ services: { app: { image: 'x' } }, networks: { default: { name } } }).violations.map((v) => v.key)).toContain('networks.default.name');
    }
  });

  it('names the image of a v2 build the project way, and refuses foreign build namespaces', () => {
    const built = check({ services: { api: { build: { context: dir } } } });
    expect(built.builtImages).toEqual([{ service: 'api', tags: ['web_api'], derived: true }]);
    expect(check({ services: { api: { build: { context: dir }, image: 'webx_api' } } }).violations.map((v) => v.exception)).toContain('build.image:webx_api');
    expect(check({ services: { api: { image: 'other_api:2' } } }).violations.map((v) => v.exception)).toContain('image:other_api:2');
    expect(check({ services: { api: { image: 'web_api:2' } } }).violations).toEqual([]);
  });
});
