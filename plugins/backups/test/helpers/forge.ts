/**
 * Archives as a forged or damaged backup could hold them: raw tar entries encoded by node-tar's Header exactly as
 * given (no name cleaned, any type), followed by a manifest whose `files` component matches them. A restore then
 * judges the entries themselves instead of stopping at a checksum mismatch.
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { Header } from 'tar';
import { describeEntry, FORMAT } from '../../src/archive/backup-archive.js';

export interface ForgedEntry {
  path: string;
  type: 'File' | 'Directory' | 'SymbolicLink' | 'Link' | 'CharacterDevice' | 'BlockDevice' | 'FIFO';
  mode?: number;
  body?: string | Buffer;
  linkpath?: string;
}

const letter: Record<ForgedEntry['type'], string> = {
  File: 'f',
  Directory: 'd',
  SymbolicLink: 'l',
  Link: 'h',
  CharacterDevice: 'CharacterDevice',
  BlockDevice: 'BlockDevice',
  FIFO: 'FIFO',
};

function block(entry: ForgedEntry, body: Buffer): Buffer[] {
  const header = new Header({
    path: entry.path,
    type: entry.type,
    mode: entry.mode ?? (entry.type === 'Directory' ? 0o755 : 0o644),
    size: body.length,
    mtime: new Date(1_700_000_000_000),
    uid: 0,
    gid: 0,
    linkpath: entry.linkpath,
    devmaj: 1,
    devmin: 3,
  });
  if (header.encode()) throw new Error(`forge: '${entry.path}' needs a pax header; keep test names short`);
  const pad = Buffer.alloc((512 - (body.length % 512)) % 512);
  return [header.block!, body, pad];
}

/** The gzip'd archive of `entries` plus a consistent manifest (deployment `forged`). */
export function forgeArchive(entries: ForgedEntry[]): Buffer {
  const parts: Buffer[] = [];
  const hash = createHash('sha256');
  let count = 0;
  let size = 0;
  for (const entry of entries) {
    const body = entry.type === 'File' ? Buffer.from(entry.body ?? '') : Buffer.alloc(0);
    parts.push(...block(entry, body));
    if (!entry.path.startsWith('files/')) continue;
    const rel = entry.path.slice('files/'.length).replace(/\/+$/, '');
    count++;
    hash.update(describeEntry(letter[entry.type], rel, body.length, entry.mode ?? (entry.type === 'Directory' ? 0o755 : 0o644), entry.linkpath ?? ''));
    hash.update(body);
    size += body.length;
  }
  const manifest = {
    format: FORMAT,
    id: 'bkp_forged',
    deployment: 'forged',
    created_at: new Date(0).toISOString(),
    description: 'forged',
    compose_file: null,
    env_file: null,
    exclude_patterns: [],
    components: [{ name: 'files', type: 'files', entries: count, size, sha256: hash.digest('hex') }],
    warnings: [],
  };
  parts.push(...block({ path: 'manifest.json', type: 'File' }, Buffer.from(JSON.stringify(manifest))));
  parts.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(parts));
}
