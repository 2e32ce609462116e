/**
 * The walls between the plugin API, the typed client and the CLI: a plugin author installs `@agent/sdk` without a
 * CLI framework or an HTTP client, and a script that talks to an agent installs `@agent/client` without the plugin
 * API. Read from the sources: every package imports only what its package.json declares (or Node's own modules).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers/agent.js';

interface Manifest {
  name: string;
  dependencies?: Record<string, string>;
  bin?: Record<string, string>;
}

const manifest = (dir: string): Manifest => JSON.parse(readFileSync(join(REPO_ROOT, dir, 'package.json'), 'utf8')) as Manifest;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** Package names a folder's sources import (static, dynamic and type imports), Node's own modules left out. */
function importedPackages(dir: string): Set<string> {
  const out = new Set<string>();
  const pattern = /(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+|\blazy<.*?>\(\s*)'([^'.][^']*)'/g;
  for (const file of sourceFiles(join(REPO_ROOT, dir, 'src'))) {
    // Examples in comments are not imports.
    const code = readFileSync(file, 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/^\s*\/\/.*$/gm, '');
    for (const match of code.matchAll(pattern)) {
      const spec = match[1]!;
      if (spec.startsWith('node:') || builtinModules.includes(spec)) continue;
      const parts = spec.split('/');
      out.add(spec.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!);
    }
  }
  return out;
}

/** Packages a folder's sources import with `import type` and no other way. */
function typeOnlyPackages(dir: string): Set<string> {
  const typed = new Set<string>();
  const other = new Set<string>();
  for (const file of sourceFiles(join(REPO_ROOT, dir, 'src'))) {
    for (const match of readFileSync(file, 'utf8').matchAll(/^import\s+(type\s+)?[^'"]*?\bfrom\s+'([^'.][^']*)'/gm)) {
      (match[1] ? typed : other).add(match[2]!);
    }
  }
  return new Set([...typed].filter((p) => !other.has(p)));
}

describe('the SDK, the client and the CLI are separate packages', () => {
  it.each(['sdk', 'testing', 'client', 'cli'])('%s imports only the packages it declares', (dir) => {
    const declared = Object.keys(manifest(dir).dependencies ?? {});
    // A package imported only for its types (`import type … from 'koa'`) is declared by its types package.
    const typesOnly = typeOnlyPackages(dir);
    const undeclared = (p: string) => !declared.includes(p) && !(typesOnly.has(p) && declared.includes(`@types/${p}`));
    expect([...importedPackages(dir)].filter(undeclared)).toEqual([]);
  });

  it('the plugin API pulls neither the client nor the CLI nor their dependencies', () => {
    const sdk = manifest('sdk');
    expect(sdk.name).toBe('@agent/sdk');
    expect(sdk.bin).toBeUndefined();
    const deps = Object.keys(sdk.dependencies ?? {});
    for (const other of ['@agent/client', 'agentctl', 'commander', 'ajv', 'ws', 'yaml']) expect(deps).not.toContain(other);
    expect([...importedPackages('sdk')]).not.toContain('@agent/client');
  });

  it('the client does not pull the plugin API, and the CLI is built on the client', () => {
    expect(manifest('client').name).toBe('@agent/client');
    expect(Object.keys(manifest('client').dependencies ?? {})).not.toContain('@agent/sdk');
    const cli = manifest('cli');
    expect(cli.name).toBe('agentctl');
    expect(cli.bin).toEqual({ agentctl: 'bin/agentctl.mjs' });
    expect(Object.keys(cli.dependencies ?? {})).not.toContain('@agent/sdk');
    expect(importedPackages('cli')).toContain('@agent/client');
  });

  it('the lock file links the agentctl bin on a fresh install (npm ci)', () => {
    type Entry = { link?: boolean; resolved?: string; bin?: Record<string, string> };
    const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, Entry> };
    expect(lock.packages['node_modules/agentctl']).toEqual({ resolved: 'cli', link: true });
    expect(lock.packages['node_modules/@agent/client']).toEqual({ resolved: 'client', link: true });
    expect(lock.packages.cli?.bin).toEqual({ agentctl: 'bin/agentctl.mjs' });
    expect(lock.packages.sdk?.bin).toBeUndefined();
  });
});
