/** Fingerprints of a folder tree, to prove that something left it exactly as it was. */
import { createHash } from 'node:crypto';
import { lstatSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * Every entry below `dir` (relative path → type, mode and, for a file, the SHA-256 of its bytes; for a link, its
 * target): a file added, removed, rewritten or re-moded changes the map.
 */
export function treeHashes(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (path: string) => {
    const st = lstatSync(path);
    const mode = (st.mode & 0o7777).toString(8);
    const key = relative(dir, path) || '.';
    if (st.isSymbolicLink()) out[key] = `link ${mode} -> ${readlinkSync(path)}`;
    else if (st.isDirectory()) {
      out[key] = `dir ${mode}`;
      for (const name of readdirSync(path).sort()) walk(join(path, name));
    } else out[key] = `file ${mode} ${createHash('sha256').update(readFileSync(path)).digest('hex')}`;
  };
  walk(dir);
  return out;
}
