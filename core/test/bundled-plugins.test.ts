import { mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bundledEntry, readManifest } from '../src/plugins/host.js';

/** A repository layout: plugins/<name>/dist and core/dist/builtin with its manifest. */
function layout(built: number) {
  const root = mkdtempSync(join(tmpdir(), 'bundled-'));
  const dist = join(root, 'plugins', 'hello', 'dist');
  mkdirSync(join(dist, 'lib'), { recursive: true });
  for (const f of [join(dist, 'index.js'), join(dist, 'lib', 'util.js')]) {
    writeFileSync(f, 'export default {}');
    utimesSync(f, built / 1000, built / 1000);
  }
  mkdirSync(join(root, 'core', 'dist', 'builtin'), { recursive: true });
  writeFileSync(join(root, 'core', 'dist', 'builtin', 'hello.mjs'), 'export default {}');
  writeFileSync(join(root, 'core', 'dist', 'builtin', 'manifest.json'), JSON.stringify({ hello: { file: 'hello.mjs', built } }));
  return { root, dist, builtinDir: join(root, 'plugins'), candidate: { spec: 'hello', dir: join(root, 'plugins', 'hello'), builtin: true } };
}

describe('bundled built-in plugins', () => {
  it('loads the bundle while the plugin was not rebuilt since', () => {
    const l = layout(Date.now() - 60_000);
    expect(bundledEntry(l.candidate, readManifest(l.builtinDir))).toBe(join(l.root, 'core', 'dist', 'builtin', 'hello.mjs'));
  });

  it("falls back to the plugin's own dist/ when any file of it is newer than the bundle", () => {
    const l = layout(Date.now() - 60_000);
    writeFileSync(join(l.dist, 'lib', 'util.js'), 'export const changed = true;');
    expect(bundledEntry(l.candidate, readManifest(l.builtinDir))).toBeNull();
  });

  it('never uses a bundle for third-party plugins or without a manifest', () => {
    const l = layout(Date.now() - 60_000);
    expect(bundledEntry({ ...l.candidate, builtin: false }, readManifest(l.builtinDir))).toBeNull();
    expect(readManifest(join(l.root, 'elsewhere', 'plugins'))).toBeNull();
    expect(bundledEntry(l.candidate, null)).toBeNull();
  });
});
