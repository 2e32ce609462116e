/**
 * When a reload is done. nginx answers a reload by starting new workers and then asking the old ones to quit; an
 * old worker goes on accepting new connections until it has read that request, which on a busy machine can be a
 * while after the new workers started. A request sent right after the agent's answer could then meet the previous
 * rules (a lifted block still refusing, a new one not yet enforced). So a reload is confirmed only once every
 * worker that ran before it is gone or has closed its listening sockets, which it does as it retitles itself
 * "worker process is shutting down".
 */
import { readdir, readFile } from 'node:fs/promises';

/** The worker processes (children) of an nginx master, read from /proc; none where /proc cannot be read. */
export async function workersOf(master: number): Promise<number[]> {
  const entries = await readdir('/proc').catch(() => [] as string[]);
  const pids = entries.filter((e) => /^\d+$/.test(e)).map(Number);
  const parents = await Promise.all(pids.map((pid) => parentOf(pid)));
  return pids.filter((_, i) => parents[i] === master);
}

async function parentOf(pid: number): Promise<number | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (!stat) return null;
  // pid (comm) state ppid …: the command name may hold spaces and parentheses, so read after the last ')'.
  const ppid = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
  return ppid ? Number(ppid) : null;
}

/** True when the process is gone or has stopped accepting (its title says it is shutting down). */
async function stoppedAccepting(pid: number): Promise<boolean> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => null);
  return cmdline === null || cmdline === '' || cmdline.includes('shutting down');
}

/**
 * Waits until every one of `before` (the workers before the reload) has stopped accepting, or the deadline
 * passes; whether they all did.
 */
export async function oldWorkersSettled(before: number[], deadline: number): Promise<boolean> {
  let left = before;
  while (left.length > 0) {
    const stopped = await Promise.all(left.map((pid) => stoppedAccepting(pid)));
    left = left.filter((_, i) => !stopped[i]);
    if (left.length === 0) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}
