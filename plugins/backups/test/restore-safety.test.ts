/**
 * A container that writes (a subfolder of) its deployment folder against backups and restores, which the agent runs
 * as root: hostile archives (real gzip'd tar files, forged with a consistent manifest so the restore judges the
 * entries themselves) extracted into a real staging folder, and a real container (dockerd, bind mount of a
 * subfolder) that keeps swapping folders for links to an outside canary while a backup and then a restore run.
 * After each case nothing outside the deployment or staging folder was created or changed (canary files and
 * folders), nothing from outside is in an archive, and the restore either refuses the archive with a clear error or
 * leaves the entry out with a warning (each case says which).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { ArchiveError, verifyArchive } from '../src/archive/backup-archive.js';
import { cleanupDocker, runId, uniqueName, until, waitJob } from './helpers/env.js';
import { forgeArchive, type ForgedEntry } from './helpers/forge.js';

const work = mkdtempSync(join(tmpdir(), 'backups-safety-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Every file, folder and link below `root` with its content hash, mode and link text: what "unchanged" means. */
function snapshot(root: string, rel = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(join(root, rel)).sort()) {
    const r = rel ? `${rel}/${name}` : name;
    const st = lstatSync(join(root, r));
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isDirectory()) Object.assign(out, { [`${r}/`]: `dir ${mode}` }, snapshot(root, r));
    else if (st.isSymbolicLink()) out[r] = `-> ${readlinkSync(join(root, r))}`;
    else if (st.isFile())
      out[r] = `${mode} ${st.nlink} ${createHash('sha256')
        .update(readFileSync(join(root, r)))
        .digest('hex')}`;
    else out[r] = `special ${mode}`;
  }
  return out;
}

/** Whether anything (a dangling link included) is at `path`. */
function present(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/** An outside folder a hostile archive or container aims at, with its state before. */
function makeCanary(at: string) {
  mkdirSync(join(at, 'etc'), { recursive: true });
  writeFileSync(join(at, 'etc/passwd'), 'root:x:0:0:CANARY-SECRET:/root:/bin/sh\n', { mode: 0o644 });
  writeFileSync(join(at, 'secret.txt'), 'CANARY-SECRET\n', { mode: 0o600 });
  return { path: at, before: snapshot(at) };
}

describe('restoring hostile archives', () => {
  // <work>/canary is outside every case folder: <work>/case-N/stage is where a restore extracts.
  const canary = makeCanary(join(work, 'canary'));
  let n = 0;

  /** Extracts a forged archive into a fresh staging folder; returns the outcome and checks that nothing outside changed. */
  async function restoreForged(entries: ForgedEntry[]) {
    const dir = join(work, `case-${++n}`);
    mkdirSync(dir);
    const archive = join(dir, 'archive.tar.gz');
    writeFileSync(archive, forgeArchive(entries));
    const stage = join(dir, 'stage');
    const outcome = await verifyArchive(archive, { extractTo: stage }).then(
      (manifest) => ({ manifest, error: null }),
      (error: Error) => ({ manifest: null, error }),
    );
    expect(snapshot(canary.path)).toEqual(canary.before);
    // Nothing was created beside the staging folder (where a link out of it would lead first).
    expect(readdirSync(dir).sort()).toEqual(['archive.tar.gz', 'stage']);
    return { ...outcome, stage };
  }

  it('a chain of links whose text stays inside but which resolve outside: the escaping links are left out, with a warning', async () => {
    const { manifest, error, stage } = await restoreForged([
      { path: 'files/sub/', type: 'Directory' },
      { path: 'files/sub/x', type: 'SymbolicLink', linkpath: '..' }, // the staging folder itself: inside
      { path: 'files/sub/y', type: 'SymbolicLink', linkpath: 'x/..' }, // as text sub/, really the folder above staging
      { path: 'files/sub/z', type: 'SymbolicLink', linkpath: 'y/../canary' }, // as text sub/canary, really <work>/canary
      { path: 'files/sub/ok', type: 'SymbolicLink', linkpath: 'x/sub' }, // through x, stays inside
      { path: 'files/abs', type: 'SymbolicLink', linkpath: canary.path },
      { path: 'files/up', type: 'SymbolicLink', linkpath: '../../canary' },
    ]);
    expect(error).toBeNull();
    expect(snapshot(stage)).toEqual({ 'sub/': 'dir 755', 'sub/x': '-> ..', 'sub/ok': '-> x/sub' });
    const warnings = manifest!.warnings.join('\n');
    expect(warnings).toContain('symlink sub/y -> x/.. not restored: it resolves outside the deployment folder');
    expect(warnings).toContain('symlink sub/z -> y/../canary not restored: it resolves outside the deployment folder');
    expect(warnings).toContain(`symlink abs -> ${canary.path} not restored: it points outside the deployment folder`);
    expect(warnings).toContain('symlink up -> ../../canary not restored: it points outside the deployment folder');
  });

  it('an entry written through a link stored earlier in the archive: the archive is refused (node-tar refuses the entry)', async () => {
    // The chain again, then a file through its last link: it would overwrite the canary's passwd.
    const chain = await restoreForged([
      { path: 'files/sub/', type: 'Directory' },
      { path: 'files/sub/x', type: 'SymbolicLink', linkpath: '..' },
      { path: 'files/sub/y', type: 'SymbolicLink', linkpath: 'x/..' },
      { path: 'files/sub/z', type: 'SymbolicLink', linkpath: 'y/..' },
      { path: 'files/sub/z/canary/etc/passwd', type: 'File', body: 'pwned::0:0::/:/bin/sh\n' },
    ]);
    expect(chain.error).toBeInstanceOf(ArchiveError);
    expect(chain.error!.message).toMatch(
      /the archive is unsafe: 'files\/sub\/z\/canary\/etc\/passwd' would be written through the symbolic link 'files\/sub\/z'/,
    );
    // A plain link inside the folder, then a folder and a file through it.
    const plain = await restoreForged([
      { path: 'files/real/', type: 'Directory' },
      { path: 'files/l', type: 'SymbolicLink', linkpath: 'real' },
      { path: 'files/l/x', type: 'File', body: 'through the link' },
    ]);
    expect(plain.error!.message).toMatch(/'files\/l\/x' would be written through the symbolic link 'files\/l'/);
    expect(existsSync(join(plain.stage, 'real/x'))).toBe(false);
    // A link stored below a link: refused the same way (not put off like a link whose target goes through one).
    const linkBelow = await restoreForged([
      { path: 'files/real/', type: 'Directory' },
      { path: 'files/l', type: 'SymbolicLink', linkpath: 'real' },
      { path: 'files/l/in', type: 'SymbolicLink', linkpath: '.' },
    ]);
    expect(linkBelow.error!.message).toMatch(/'files\/l\/in' would be written through the symbolic link 'files\/l'/);
    expect(present(join(linkBelow.stage, 'real/in'))).toBe(false);
  });

  it('a hard link to a file outside (a passwd-like canary): the archive is refused', async () => {
    for (const linkpath of [join(canary.path, 'etc/passwd'), 'files/../../canary/etc/passwd', '../canary/etc/passwd']) {
      const { error, stage } = await restoreForged([
        { path: 'files/h', type: 'Link', linkpath },
        { path: 'files/h', type: 'File', body: 'pwned' }, // would write into the linked file
      ]);
      expect(error, linkpath).toBeInstanceOf(ArchiveError);
      expect(error!.message).toMatch(/hard link 'files\/h' -> '.*': a hard link may only point to a regular file stored before it in the archive/);
      expect(existsSync(join(stage, 'h'))).toBe(false);
    }
    // Through a link of the archive to a file of the archive: refused too (the file is stored under another name).
    const via = await restoreForged([
      { path: 'files/d/', type: 'Directory' },
      { path: 'files/d/f', type: 'File', body: 'inside' },
      { path: 'files/s', type: 'SymbolicLink', linkpath: 'd' },
      { path: 'files/h', type: 'Link', linkpath: 'files/s/f' },
    ]);
    expect(via.error!.message).toMatch(/hard link 'files\/h' -> 'files\/s\/f'/);
    // To a regular file stored earlier: restored as a hard link.
    const ok = await restoreForged([
      { path: 'files/a', type: 'File', body: 'shared' },
      { path: 'files/b', type: 'Link', linkpath: 'files/a' },
    ]);
    expect(ok.error).toBeNull();
    expect(statSync(join(ok.stage, 'b')).ino).toBe(statSync(join(ok.stage, 'a')).ino);
  });

  it('device nodes and FIFOs: left out, with a warning each', async () => {
    const { manifest, error, stage } = await restoreForged([
      { path: 'files/null', type: 'CharacterDevice' },
      { path: 'files/disk', type: 'BlockDevice' },
      { path: 'files/pipe', type: 'FIFO' },
      { path: 'files/kept', type: 'File', body: 'kept' },
    ]);
    expect(error).toBeNull();
    expect(Object.keys(snapshot(stage))).toEqual(['kept']);
    for (const name of ['null', 'disk', 'pipe']) expect(manifest!.warnings).toContain(`${name} not restored: devices and FIFOs are never restored`);
  });

  it('setuid, setgid and sticky bits: removed, with a warning', async () => {
    const { manifest, error, stage } = await restoreForged([
      { path: 'files/suid', type: 'File', mode: 0o4755, body: '#!/bin/sh\n' },
      { path: 'files/sgid/', type: 'Directory', mode: 0o2775 },
      { path: 'files/tmp/', type: 'Directory', mode: 0o1777 },
    ]);
    expect(error).toBeNull();
    for (const name of ['suid', 'sgid', 'tmp']) {
      expect(statSync(join(stage, name)).mode & 0o7000, name).toBe(0);
      expect(manifest!.warnings).toContain(`${name}: setuid, setgid and sticky bits removed`);
    }
    expect(statSync(join(stage, 'suid')).mode & 0o777).toBe(0o755 & ~process.umask());
  });

  it('names with ../ or absolute names: the archive is refused', async () => {
    for (const [path, why] of [
      ['files/../../canary/secret.txt', /unsafe path 'files\/..\/..\/canary\/secret.txt' in the archive: must not contain '..'/],
      ['files/a/../../../canary/secret.txt', /must not contain '..'/],
      ['files//canary/secret.txt', /must be relative|must not contain empty segments/],
      [join(canary.path, 'secret.txt'), /unexpected entry/],
      ['../canary/secret.txt', /unexpected entry/],
    ] as const) {
      const { error } = await restoreForged([{ path, type: 'File', body: 'pwned' }]);
      expect(error, path).toBeInstanceOf(ArchiveError);
      expect(error!.message, path).toMatch(why);
    }
  });

  it("keeps a folder's own links whose target goes through another of its links (node-tar judges those by order)", async () => {
    const { manifest, error, stage } = await restoreForged([
      { path: 'files/releases/', type: 'Directory' },
      { path: 'files/releases/2/', type: 'Directory' },
      { path: 'files/releases/2/app.conf', type: 'File', body: 'v2' },
      { path: 'files/current', type: 'SymbolicLink', linkpath: 'releases/2' },
      { path: 'files/config', type: 'SymbolicLink', linkpath: 'current/app.conf' },
    ]);
    expect(error).toBeNull();
    expect(manifest!.warnings).toEqual([]);
    expect(readlinkSync(join(stage, 'config'))).toBe('current/app.conf');
    expect(readFileSync(join(stage, 'config'), 'utf8')).toBe('v2');
  });
});

describe('a container swapping folders for links while a backup and then a restore run', () => {
  const app = uniqueName('race');
  const swapper = `b${runId}-swapper`;
  let agent: TestAgent;
  let folder: string;
  let canary: ReturnType<typeof makeCanary>;

  // Swaps /data/swap between a folder and a link to the canary (a host path: the link is only text in the
  // container) as fast as it can; before that it plants a chain of links, a setuid file and a FIFO.
  const swapLoop = (target: string) =>
    `while :; do rm -rf /data/swap; mkdir /data/swap; echo inside > /data/swap/f; rm -rf /data/swap; ln -s ${target} /data/swap; done`;
  const plant =
    'mkdir -p /data/chain && ln -s .. /data/chain/x && ln -s x/.. /data/chain/y && ln -s y/.. /data/chain/z; ' +
    'echo suid > /data/suid && chmod 4755 /data/suid; mkfifo /data/fifo; touch /data/ready; ';

  beforeAll(async () => {
    agent = await startAgent({ plugins: ['docker', 'deployments', 'backups'] });
    canary = makeCanary(join(agent.workDir, 'canary'));
    const compose = `services:
  app:
    image: agent-test/busybox:latest
    command: ["sh", "-c", ${JSON.stringify(plant + swapLoop(canary.path))}]
    stop_signal: SIGKILL
    volumes: ["./data:/data"]
    labels:
      agent.test: "1"
`;
    const created = await agent.api('POST', '/deployments', { body: { name: app, compose_content: compose, auto_start: true } });
    expect(created.status, created.text).toBe(201);
    folder = created.body.data.path;
    // The excluded folder a restore carries over from the current folder: a link leading out, one staying in, a
    // FIFO and a setuid file, next to what the swapping container below does there.
    mkdirSync(join(folder, 'cache'), { recursive: true });
    writeFileSync(join(folder, 'cache/kept.txt'), 'excluded, carried over');
    symlinkSync(canary.path, join(folder, 'cache/out'));
    symlinkSync('kept.txt', join(folder, 'cache/in'));
    execFileSync('mkfifo', [join(folder, 'cache/fifo')]);
    writeFileSync(join(folder, 'cache/suid'), 'x', { mode: 0o4755 });
    chmodSync(join(folder, 'cache/suid'), 0o4755);
    await until(async () => existsSync(join(folder, 'data/ready')), Boolean, 30_000);
  }, 120_000);

  afterAll(async () => {
    spawnSync('docker', ['rm', '-f', swapper]);
    await agent?.stop();
    cleanupDocker();
  });

  it('backs up nothing from outside and restores nothing to outside, the swapping container running throughout', async () => {
    const backups: any[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await agent.api('POST', '/backups', { body: { deployment_name: app, include_database: false, exclude_patterns: ['cache'] } });
      expect(res.status, res.text).toBe(202);
      const job = await waitJob(agent, res.body.data.job_id, 60_000);
      expect(job.status, job.error).toBe('completed');
      const record = (await agent.api('GET', `/backups/${job.result.backup_id}`)).body.data;
      const tarBytes = gunzipSync(readFileSync(join(agent.dataDir, 'plugins/backups/archives', `${record.id}.tar.gz`)));
      expect(tarBytes.includes('CANARY-SECRET')).toBe(false);
      expect(record.warnings).toContain('skipped data/fifo: FIFOs, sockets and devices are not backed up');
      backups.push(record);
    }
    expect(snapshot(canary.path)).toEqual(canary.before);

    // A second container, not part of the deployment (a restore does not stop it), swaps in the excluded folder the
    // restore carries over, and goes on in the previous folder the restore removes at its end.
    execFileSync('docker', [
      'run',
      '-d',
      '--name',
      swapper,
      '--label',
      'agent.test=1',
      '-v',
      `${join(folder, 'cache')}:/data`,
      'agent-test/busybox:latest',
      'sh',
      '-c',
      swapLoop(canary.path),
    ]);
    await until(async () => existsSync(join(folder, 'cache/swap')), Boolean, 30_000);

    const res = await agent.api('POST', `/backups/${backups.at(-1).id}/restore`, { body: { auto_start: false } });
    expect(res.status, res.text).toBe(202);
    const job = await waitJob(agent, res.body.data.job_id, 90_000);
    expect(job.status, job.error).toBe('completed');
    const warnings: string[] = job.result.warnings;
    // The chain a container planted: the link leaving the folder is left out; those staying inside are restored.
    expect(warnings).toContain('symlink data/chain/z -> y/.. not restored: it resolves outside the deployment folder');
    expect(readlinkSync(join(folder, 'data/chain/y'))).toBe('x/..');
    expect(present(join(folder, 'data/chain/z'))).toBe(false);
    expect(warnings).toContain('data/suid: setuid, setgid and sticky bits removed');
    expect(statSync(join(folder, 'data/suid')).mode & 0o7000).toBe(0);
    expect(present(join(folder, 'data/fifo'))).toBe(false);
    expect(readFileSync(join(folder, 'cache/kept.txt'), 'utf8')).toBe('excluded, carried over');
    expect(readlinkSync(join(folder, 'cache/in'))).toBe('kept.txt');
    expect(warnings).toContain(`symlink cache/out -> ${canary.path} not carried over: it resolves outside the deployment folder`);
    expect(present(join(folder, 'cache/out'))).toBe(false);
    expect(warnings).toContain('cache/fifo was not carried over: FIFOs, sockets and devices are never restored');
    expect(present(join(folder, 'cache/fifo'))).toBe(false);
    expect(warnings).toContain('cache/suid: setuid, setgid and sticky bits were not carried over');
    expect(statSync(join(folder, 'cache/suid')).mode & 0o7777).toBe(0o755);
    spawnSync('docker', ['rm', '-f', swapper]);

    // Nothing outside changed, and every link of the restored folder leads inside it (or nowhere).
    expect(snapshot(canary.path)).toEqual(canary.before);
    const real = realpathSync(folder);
    const links = Object.entries(snapshot(folder)).filter(([, v]) => v.startsWith('-> '));
    expect(links.length).toBeGreaterThan(0);
    for (const [rel] of links) {
      let resolved: string;
      try {
        resolved = realpathSync(join(folder, rel));
      } catch {
        continue; // dangling: leads nowhere
      }
      expect(resolved === real || resolved.startsWith(`${real}/`), `${rel} -> ${resolved}`).toBe(true);
    }
    // The staging folder is gone; the replaced folder too, unless the container outside the deployment kept writing
    // into it while it was removed: then the restore says so (the folder is left, never followed into).
    const leftovers = readdirSync(join(folder, '..')).filter((name) => name.startsWith('.restore-'));
    expect(leftovers.every((name) => name.endsWith('-previous'))).toBe(true);
    for (const name of leftovers) {
      expect(warnings.join('\n')).toMatch(new RegExp(`the previous folder \\S*${name} could not be removed .*: something still writes into it`));
      rmSync(join(folder, '..', name), { recursive: true });
    }
  });
});
