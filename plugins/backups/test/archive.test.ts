/** The archive layer on its own: round trips, exclude globs, dumps in parts, corruption and unsafe paths. */
import { createHash, randomBytes } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync, gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { databaseDump, verifyArchive, writeBackupArchive, ArchiveError, DUMP_PART_SIZE, type DumpSource } from '../src/archive/backup-archive.js';
import { excludeMatcher, invalidExcludePattern } from '../src/archive/paths.js';
import { forgeArchive } from './helpers/forge.js';

const work = mkdtempSync(join(tmpdir(), 'backups-archive-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** path → sha256 of every regular file, plus symlink targets, below a folder. */
function tree(root: string, rel = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(join(root, rel)).sort()) {
    const r = rel ? `${rel}/${name}` : name;
    const st = lstatSync(join(root, r));
    if (st.isDirectory()) Object.assign(out, { [`${r}/`]: 'dir' }, tree(root, r));
    else if (st.isSymbolicLink()) out[r] = `-> ${readlinkSync(join(root, r))}`;
    else
      out[r] = createHash('sha256')
        .update(readFileSync(join(root, r)))
        .digest('hex');
  }
  return out;
}

const meta = (id: string) => ({
  id,
  deployment: 'app',
  created_at: new Date().toISOString(),
  description: '',
  compose_file: 'docker-compose.yml',
  env_file: '.env',
});

const dumpOf = (data: Buffer, service = 'db'): DumpSource => ({
  service,
  engine: 'postgres',
  databases: ['app'],
  open: async () => ({
    stdout: (async function* () {
      for (let i = 0; i < data.length; i += 100_000) yield data.subarray(i, i + 100_000);
    })(),
    finish: async () => undefined,
  }),
});

describe('backup archive', () => {
  const src = join(work, 'src');
  mkdirSync(join(src, 'data/cache'), { recursive: true });
  mkdirSync(join(src, 'logs'), { recursive: true });
  writeFileSync(join(src, 'docker-compose.yml'), 'services: {}\n');
  writeFileSync(join(src, '.env'), 'A=1\n');
  writeFileSync(join(src, 'data/big.bin'), randomBytes(3 * 1024 * 1024 + 17));
  writeFileSync(join(src, 'data/cache/tmp.bin'), 'cache');
  writeFileSync(join(src, 'logs/app.log'), 'log');
  writeFileSync(join(src, 'data/keep.log'), 'kept? no: *.log excludes at any depth');
  writeFileSync(join(src, `${'n'.repeat(120)}.txt`), 'long name');
  mkdirSync(join(src, 'deep/'.repeat(30)), { recursive: true });
  writeFileSync(join(src, 'deep/'.repeat(30), 'x.txt'), 'deep');
  writeFileSync(join(src, 'empty'), '');
  symlinkSync('data/big.bin', join(src, 'link-in'));
  symlinkSync('/etc/passwd', join(src, 'link-out'));

  it('round-trips files and a dump in parts, byte for byte, honouring exclude globs', async () => {
    const dump = randomBytes(DUMP_PART_SIZE * 2 + 1234);
    const out = join(work, 'a.tar.gz');
    const written = await writeBackupArchive({
      folder: src,
      includeFiles: true,
      exclude: ['*.log', 'data/cache'],
      dumps: [dumpOf(dump)],
      meta: meta('a'),
      output: out,
    });
    expect(existsSync(`${out}.partial`)).toBe(false);
    expect(statSync(out).size).toBe(written.size);
    const db = written.manifest.components.find((c) => c.type === 'database')!;
    expect(db).toMatchObject({ parts: 2, size: dump.length, sha256: createHash('sha256').update(dump).digest('hex') });

    const dest = join(work, 'restored');
    const manifest = await verifyArchive(out, { extractTo: dest });
    const expected = tree(src);
    for (const k of Object.keys(expected)) if (k.endsWith('.log') || k.startsWith('data/cache')) delete expected[k];
    delete expected['link-out'];
    expect(tree(dest)).toEqual(expected);
    expect(manifest.warnings.join()).toContain('link-out');

    const chunks: Buffer[] = [];
    for await (const c of databaseDump(out, db as never)) chunks.push(c);
    expect(Buffer.concat(chunks).equals(dump)).toBe(true);
  });

  it('rejects a corrupted archive before extracting anything usable', async () => {
    const out = join(work, 'b.tar.gz');
    await writeBackupArchive({ folder: src, includeFiles: true, exclude: [], dumps: [], meta: meta('b'), output: out });
    const bytes = readFileSync(out);
    bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
    writeFileSync(out, bytes);
    await expect(verifyArchive(out)).rejects.toBeInstanceOf(ArchiveError);
    // A truncated archive too.
    writeFileSync(out, bytes.subarray(0, bytes.length - 100));
    await expect(verifyArchive(out)).rejects.toBeInstanceOf(ArchiveError);
  });

  it('refuses what is no tar at all (uploads can be anything) without an unhandled rejection', async () => {
    // Vitest fails the run on an unhandled rejection; in the agent, one ends the process.
    const out = join(work, 'not-tar.tar.gz');
    for (const bytes of [gzipSync(Buffer.from('just text')), gzipSync(Buffer.alloc(0)), Buffer.alloc(0), randomBytes(4096)]) {
      writeFileSync(out, bytes);
      await expect(verifyArchive(out)).rejects.toBeInstanceOf(ArchiveError);
    }
  });

  it('detects a changed component even when the gzip stream is valid', async () => {
    const out = join(work, 'c.tar.gz');
    await writeBackupArchive({ folder: src, includeFiles: true, exclude: [], dumps: [], meta: meta('c'), output: out });
    const tar = gunzipSync(readFileSync(out));
    const at = tar.indexOf('long name');
    tar.write('LONG NAME', at);
    writeFileSync(out, gzipSync(tar));
    await expect(verifyArchive(out)).rejects.toThrow(/checksum mismatch in component files/);
  });

  it('refuses entries that climb out of the folder', async () => {
    const out = join(work, 'evil.tar.gz');
    writeFileSync(out, forgeArchive([{ path: 'files/../../etc/evil', type: 'File', body: 'x' }]));
    await expect(verifyArchive(out, { extractTo: join(work, 'evil') })).rejects.toThrow(/unsafe path/);
  });

  it('restores an archive written by the hand-written tar writer used before node-tar', async () => {
    // fixtures/old-writer.tar.gz was written by the previous writer (plain ustar, pax for the 124-character name,
    // ustar prefix for the 156-character path, a dump of one part); its manifest's checksums are that writer's.
    const dest = join(work, 'old-format');
    const manifest = await verifyArchive(join(import.meta.dirname, 'fixtures/old-writer.tar.gz'), { extractTo: dest });
    expect(manifest).toMatchObject({ id: 'bkp_fixture', compose_file: 'docker-compose.yml', env_file: '.env', warnings: [] });
    const bin = Buffer.alloc(70_000);
    for (let i = 0; i < bin.length; i++) bin[i] = (i * 31 + 7) & 0xff;
    const sha = (b: string | Buffer) => createHash('sha256').update(b).digest('hex');
    const got = tree(dest);
    expect(got).toMatchObject({
      'docker-compose.yml': sha('services:\n  app:\n    image: agent-test/busybox:latest\n'),
      '.env': sha('GREETING=hello\n'),
      'data/a.txt': sha('alpha\n'.repeat(100)),
      'data/nested/b.bin': sha(bin),
      [`${'n'.repeat(120)}.txt`]: sha('long name\n'),
      [`${'deep/'.repeat(30)}x.txt`]: sha('deep\n'),
      empty: sha(''),
      current: '-> data/a.txt',
      'empty-dir/': 'dir',
    });
    expect(Object.keys(got)).toHaveLength(41);
    const db = manifest.components.find((c) => c.type === 'database')!;
    const chunks: Buffer[] = [];
    for await (const c of databaseDump(join(import.meta.dirname, 'fixtures/old-writer.tar.gz'), db as never)) chunks.push(c);
    expect(Buffer.concat(chunks).toString()).toBe('CREATE TABLE t (id int);\nINSERT INTO t VALUES (1), (2), (3);\n');
  });

  it('writes a valid archive when a file shrinks or grows while it is read (padded or cut, with a warning)', async () => {
    const folder = join(work, 'changing');
    mkdirSync(folder, { recursive: true });
    const big = randomBytes(48 * 1024 * 1024);
    for (const change of ['shrink', 'grow'] as const) {
      writeFileSync(join(folder, 'big.bin'), big);
      let changed = false;
      const out = join(work, `${change}.tar.gz`);
      // Level 9 on random bytes is slow enough that the file is still being read at the first progress report.
      const written = await writeBackupArchive({
        folder,
        includeFiles: true,
        exclude: [],
        dumps: [],
        meta: meta(change),
        output: out,
        level: 9,
        onProgress: (p) => {
          if (changed || p.bytes === 0) return;
          changed = true;
          if (change === 'shrink') truncateSync(join(folder, 'big.bin'), 1024 * 1024);
          else appendFileSync(join(folder, 'big.bin'), randomBytes(1024 * 1024));
        },
      });
      expect(changed).toBe(true);
      expect(written.manifest.warnings.join('\n')).toMatch(
        change === 'shrink' ? /big\.bin shrank while it was read; padded with zeros/ : /big\.bin grew while it was read; cut at/,
      );
      const dest = join(work, `${change}-restored`);
      await verifyArchive(out, { extractTo: dest });
      const restored = readFileSync(join(dest, 'big.bin'));
      expect(restored.length).toBe(big.length);
      if (change === 'grow') expect(restored.equals(big)).toBe(true);
      else {
        expect(restored.subarray(0, 1024 * 1024).equals(big.subarray(0, 1024 * 1024))).toBe(true);
        expect(restored.subarray(restored.length - 1024).equals(Buffer.alloc(1024))).toBe(true);
      }
    }
  });

  it('a failed dump leaves no archive behind', async () => {
    const out = join(work, 'd.tar.gz');
    const failing: DumpSource = {
      ...dumpOf(Buffer.from('x')),
      open: async () => ({
        stdout: (async function* () {
          yield Buffer.from('partial');
        })(),
        finish: async () => {
          throw new Error('pg_dump exited with 1');
        },
      }),
    };
    await expect(writeBackupArchive({ folder: src, includeFiles: true, exclude: [], dumps: [failing], meta: meta('d'), output: out })).rejects.toThrow(
      /pg_dump/,
    );
    expect(existsSync(out) || existsSync(`${out}.partial`)).toBe(false);
  });

  it('never archives a file outside the folder, however a container swaps folders for symlinks while it is read', async () => {
    const folder = join(work, 'swapped');
    const outside = join(work, 'outside');
    mkdirSync(outside, { recursive: true });
    writeFileSync(join(outside, 'secret.txt'), 'SECRET-OUTSIDE-THE-FOLDER');
    const real = () => {
      rmSync(join(folder, 'data'), { recursive: true, force: true });
      mkdirSync(join(folder, 'data'), { recursive: true });
      writeFileSync(join(folder, 'data', 'secret.txt'), 'inside');
    };
    mkdirSync(folder, { recursive: true });
    real();
    // The swap a container could do in its bind-mounted folder: the subfolder becomes a link to elsewhere, and back.
    let swaps = 0;
    const swapper = setInterval(() => {
      try {
        if (swaps++ % 2) real();
        else {
          rmSync(join(folder, 'data'), { recursive: true, force: true });
          symlinkSync(outside, join(folder, 'data'));
        }
      } catch {
        /* racing the reader */
      }
    }, 0);
    try {
      for (let i = 0; i < 40; i++) {
        const out = join(work, `swap-${i}.tar.gz`);
        await writeBackupArchive({ folder, includeFiles: true, exclude: [], dumps: [], meta: meta(`s${i}`), output: out }).catch(() => undefined);
        if (existsSync(out)) expect(gunzipSync(readFileSync(out)).includes('SECRET-OUTSIDE-THE-FOLDER')).toBe(false);
      }
    } finally {
      clearInterval(swapper);
    }
    expect(swaps).toBeGreaterThan(40);
  });

  it('validates exclude patterns', () => {
    expect(invalidExcludePattern('../x')).toMatch(/\.\./);
    expect(invalidExcludePattern('/etc')).toMatch(/relative/);
    expect(invalidExcludePattern('a/../../b')).toMatch(/\.\./);
    expect(invalidExcludePattern('*.log')).toBeNull();
    expect(invalidExcludePattern('./')).toMatch(/whole/);
    const m = excludeMatcher(['*.log', 'data/cache', 'build/**']);
    expect(m('a/b/c.log')).toBe(true);
    expect(m('data/cache')).toBe(true);
    expect(m('x/data/cache')).toBe(false);
    expect(m('build/out/x.js')).toBe(true);
    expect(m('src/x.js')).toBe(false);
  });
});
