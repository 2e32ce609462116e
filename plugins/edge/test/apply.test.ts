/**
 * The applier swaps files in with renames. A secret file (an htpasswd that nginx opens on every request) must hold
 * its final owner and mode before it takes its place: a worker that found it unreadable would answer 500.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Logger } from '@agent/sdk';
import { NginxApplier, type ControlResult, type ProxyControl } from '../src/nginx/apply.js';

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

describe('nginx applier: secret files', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('hands a secret file to protect before the rename, so nginx never sees it unreadable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-apply-'));
    dirs.push(dir);
    const target = join(dir, 'sec', 'htpasswd', 'route-1');
    const modesSeenByNginx: number[] = [];
    const protectedPaths: string[] = [];
    const ok: ControlResult = { ok: true, missing: false, message: '' };
    const control: ProxyControl = {
      program: 'nginx',
      testCommand: () => ['nginx', '-t'],
      test: async () => {
        modesSeenByNginx.push(statSync(target).mode & 0o777);
        return ok;
      },
      reload: async () => {
        modesSeenByNginx.push(statSync(target).mode & 0o777);
        return ok;
      },
    };
    const applier = new NginxApplier(dir, control, quiet);
    const protect = async (path: string) => {
      protectedPaths.push(path);
      await chmod(path, 0o604);
    };
    const files = new Map([
      ['sec/htpasswd/route-1', 'admin:$2y$hash\n'],
      ['sec/http.conf', '# rules\n'],
    ]);
    const applied = await applier.apply(files, { owned: ['sec'], secret: new Set(['sec/htpasswd/route-1']), protect });
    expect(applied.reloaded).toBe(true);
    expect(protectedPaths).toEqual([`${target}.agent-tmp`]);
    expect(modesSeenByNginx).toEqual([0o604, 0o604]);
    expect(statSync(join(dir, 'sec', 'http.conf')).mode & 0o777).toBe(0o644);

    // A changed secret is protected again before it replaces the old one; an unchanged one is left alone.
    files.set('sec/htpasswd/route-1', 'admin:$2y$other\n');
    await applier.apply(files, { owned: ['sec'], secret: new Set(['sec/htpasswd/route-1']), protect });
    expect(protectedPaths).toHaveLength(2);
    await applier.apply(files, { owned: ['sec'], secret: new Set(['sec/htpasswd/route-1']), protect, force: true });
    expect(protectedPaths).toHaveLength(2);
  });
});
