import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Dir, componentsOf, openInside, readTextInside, removeInside } from '../src/tree.js';

let base: string;
let folder: string;
let outside: string;

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'tree-'));
  folder = join(base, 'folder');
  outside = join(base, 'outside');
  mkdirSync(folder);
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret'), 'host secret\n');
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

describe('componentsOf', () => {
  it('splits relative paths and refuses those that leave the folder', () => {
    expect(componentsOf('a/b/./c')).toEqual(['a', 'b', 'c']);
    expect(componentsOf('.')).toEqual([]);
    expect(componentsOf('a/../b')).toEqual(['b']);
    expect(componentsOf('../x')).toBeNull();
    expect(componentsOf('a/../../x')).toBeNull();
    expect(componentsOf('/etc/passwd')).toBeNull();
    expect(componentsOf('/r/a/b', '/r')).toEqual(['a', 'b']);
    expect(componentsOf('/etc/passwd', '/r')).toBeNull();
  });
});

describe('reading inside a folder', () => {
  it('reads a regular file and reports a missing one as null', async () => {
    mkdirSync(join(folder, 'a'));
    writeFileSync(join(folder, 'a', 'f'), 'hello');
    expect(await readTextInside(folder, 'a/f')).toBe('hello');
    expect(await readTextInside(folder, 'a/missing')).toBeNull();
  });

  it('refuses a link in any component, also one that stays inside', async () => {
    symlinkSync(outside, join(folder, 'out'));
    await expect(readTextInside(folder, 'out/secret')).rejects.toMatchObject({ code: 'UNSAFE_FILE', status: 409 });
    mkdirSync(join(folder, 'real'));
    writeFileSync(join(folder, 'real', 'f'), 'x');
    symlinkSync('real', join(folder, 'alias'));
    await expect(readTextInside(folder, 'alias/f')).rejects.toMatchObject({ code: 'UNSAFE_FILE' });
    symlinkSync(join(outside, 'secret'), join(folder, 'leaf'));
    await expect(readTextInside(folder, 'leaf')).rejects.toMatchObject({ code: 'UNSAFE_FILE' });
  });

  it('never opens a FIFO or a device for I/O (it would block or trigger a driver)', async () => {
    execFileSync('mkfifo', [join(folder, 'fifo')]);
    await expect(openInside(folder, 'fifo')).rejects.toMatchObject({ code: 'UNSAFE_FILE' });
    await expect(openInside(folder, '../outside/secret')).rejects.toMatchObject({ code: 'UNSAFE_FILE' });
    await expect(openInside(folder, '/dev/null')).rejects.toMatchObject({ code: 'UNSAFE_FILE' });
  });

  it('reads the file it checked even when its folder is swapped for a link right after opening', async () => {
    mkdirSync(join(folder, 'd'));
    writeFileSync(join(folder, 'd', 'secret'), 'inside');
    const dir = await Dir.open(folder, 'd');
    try {
      renameSync(join(folder, 'd'), join(folder, 'moved'));
      symlinkSync(outside, join(folder, 'd'));
      const { handle } = await dir.openFile('secret');
      expect(await handle.readFile('utf8')).toBe('inside');
      await handle.close();
    } finally {
      await dir.close();
    }
  });
});

describe('removing inside a folder', () => {
  it('removes a tree, unlinking links without following them', async () => {
    mkdirSync(join(folder, 'd', 'e'), { recursive: true });
    writeFileSync(join(folder, 'd', 'e', 'f'), 'x');
    symlinkSync(outside, join(folder, 'd', 'link'));
    symlinkSync(join(outside, 'secret'), join(folder, 'd', 'e', 'filelink'));
    await removeInside(base, 'folder');
    expect(existsSync(folder)).toBe(false);
    expect(readFileSync(join(outside, 'secret'), 'utf8')).toBe('host secret\n');
  });

  it('a folder swapped for a link while the removal runs is removed as a link, nothing outside is touched', async () => {
    for (let round = 0; round < 20; round++) {
      mkdirSync(folder, { recursive: true });
      for (let i = 0; i < 30; i++) {
        mkdirSync(join(folder, `d${i}`, 'sub'), { recursive: true });
        writeFileSync(join(folder, `d${i}`, 'sub', 'f'), 'x');
      }
      let swapping = true;
      const swapper = (async () => {
        let i = 0;
        while (swapping) {
          const d = join(folder, `d${i++ % 30}`);
          try {
            renameSync(d, `${d}.old`);
            symlinkSync(outside, d);
          } catch {
            /* already removed */
          }
          await new Promise((r) => setImmediate(r));
        }
      })();
      await removeInside(base, 'folder').catch(() => undefined);
      swapping = false;
      await swapper;
      rmSync(folder, { recursive: true, force: true });
      expect(readdirSync(outside)).toEqual(['secret']);
      expect(readFileSync(join(outside, 'secret'), 'utf8')).toBe('host secret\n');
    }
  });
});
