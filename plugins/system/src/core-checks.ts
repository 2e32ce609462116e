/**
 * The core's own doctor checks: the Node.js it runs on, its data folder (modes, free space) and its secrets. Run
 * here, where the report is made: the core only keeps those files.
 */
import { readdirSync, statSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import type { CheckResult, DoctorCheck } from '@agent/sdk';

/** End of life of the Node.js lines the agent is tested on (the release schedule of the Node.js project). */
export const NODE_LINES: Record<number, string> = { 20: '2026-04-30', 22: '2027-04-30', 24: '2028-04-30' };
const NEWEST_TESTED = Math.max(...Object.keys(NODE_LINES).map(Number));
const NODE_FIX = `install a Node.js LTS line the agent is tested on (${Object.keys(NODE_LINES).slice(1).join(' or ')}), then run npm run install-service again (or restart the agent)`;

export function nodeVersionResult(version: string, today: Date): CheckResult {
  const major = Number(/^v?(\d+)/.exec(version)?.[1]);
  const eol = NODE_LINES[major];
  if (major > NEWEST_TESTED) return { status: 'warning', detail: `Node.js ${version}: newer than the lines the agent is tested on`, fix: NODE_FIX };
  if (!eol) return { status: 'failed', detail: `Node.js ${version} is not supported`, fix: NODE_FIX };
  if (today.toISOString().slice(0, 10) > eol)
    return { status: 'warning', detail: `Node.js ${version}: its line reached its end of life on ${eol} (no more security fixes)`, fix: NODE_FIX };
  return { status: 'ok', detail: `Node.js ${version} (supported until ${eol})` };
}

const GiB = 1024 ** 3;

/** Free space below which the data folder check fails, and below which it warns. */
const DISK_FAILED_BYTES = 1 * GiB;
const DISK_WARNING_BYTES = 5 * GiB;

const mode = (path: string) => statSync(path).mode & 0o777;
const octal = (m: number) => `0${m.toString(8)}`;

export function coreChecks(dataDir: string): DoctorCheck[] {
  return [
    {
      id: 'core.node',
      title: 'Node.js version',
      run: () => nodeVersionResult(process.version, new Date()),
    },
    {
      id: 'core.data-dir',
      title: 'Data folder: access and free space',
      run: () => {
        const problems: string[] = [];
        const m = mode(dataDir);
        if (m & 0o077) problems.push(`mode ${octal(m)} lets other users in`);
        const fs = statfsSync(dataDir);
        const free = fs.bavail * fs.bsize;
        const share = fs.blocks ? fs.bavail / fs.blocks : 0;
        const freeText = `${(free / GiB).toFixed(1)} GiB free (${Math.round(share * 100)} %)`;
        if (free < DISK_FAILED_BYTES)
          return { status: 'failed', detail: `${dataDir}: ${freeText}`, fix: `free space on the file system of ${dataDir} (old backups, docker system prune)` };
        if (problems.length) return { status: 'failed', detail: `${dataDir}: ${problems.join('; ')}; ${freeText}`, fix: `chmod 700 ${dataDir}` };
        if (free < DISK_WARNING_BYTES || share < 0.1)
          return {
            status: 'warning',
            detail: `${dataDir}: ${freeText}`,
            fix: `free space on the file system of ${dataDir} (old backups, docker system prune)`,
          };
        return { status: 'ok', detail: `${dataDir}: mode ${octal(m)}, ${freeText}` };
      },
    },
    {
      id: 'core.secrets',
      title: 'Secret files: modes',
      run: () => {
        const dir = join(dataDir, 'secrets');
        const files = readdirSync(dir).filter((f) => statSync(join(dir, f)).isFile());
        const open = files.filter((f) => mode(join(dir, f)) & 0o077).map((f) => `${f} (${octal(mode(join(dir, f)))})`);
        const dirMode = mode(dir);
        if (open.length || dirMode & 0o077) {
          return {
            status: 'failed',
            detail: `readable by other users: ${[...(dirMode & 0o077 ? [`the folder ${dir} (${octal(dirMode)})`] : []), ...open].join(', ')}`,
            fix: `chmod 700 ${dir} && chmod 600 ${dir}/*`,
          };
        }
        return { status: 'ok', detail: `${files.length} files in ${dir}, mode 0600, folder ${octal(dirMode)}` };
      },
    },
  ];
}
