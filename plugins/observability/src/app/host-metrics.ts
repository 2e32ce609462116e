/** Host CPU, memory, disk and network from /proc and statfs. Rates need two readings: the first returns fewer. */
import { readFile, statfs } from 'node:fs/promises';

interface Counters {
  at: number;
  cpuBusy: number;
  cpuTotal: number;
  rx: number;
  tx: number;
}

export class HostSampler {
  private previous: Counters | null = null;

  constructor(
    private readonly diskPath: string,
    private readonly procDir = '/proc',
  ) {}

  async sample(): Promise<Record<string, number>> {
    const [stat, meminfo, netdev, fs] = await Promise.all([
      readFile(`${this.procDir}/stat`, 'utf8'),
      readFile(`${this.procDir}/meminfo`, 'utf8'),
      readFile(`${this.procDir}/net/dev`, 'utf8').catch(() => ''),
      statfs(this.diskPath).catch(() => null),
    ]);
    const out: Record<string, number> = {};
    const now = Date.now();

    // cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest time is already in user)
    const cpu = stat.split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
    const idle = (cpu[3] ?? 0) + (cpu[4] ?? 0);
    const total = cpu.reduce((a, b) => a + b, 0);

    const mem: Record<string, number> = {};
    for (const line of meminfo.split('\n')) {
      const m = /^(\w+):\s+(\d+)/.exec(line);
      if (m) mem[m[1]!] = Number(m[2]) * 1024;
    }
    if (mem.MemTotal) {
      const used = mem.MemTotal - (mem.MemAvailable ?? mem.MemFree ?? 0);
      out['system.memory.usage'] = used;
      out['system.memory.utilization'] = used / mem.MemTotal;
    }
    if (fs && fs.blocks > 0) {
      // Like df: used / (used + available to unprivileged users).
      const used = fs.blocks - fs.bfree;
      out['system.disk.utilization'] = used / (used + fs.bavail);
    }

    let rx = 0;
    let tx = 0;
    for (const line of netdev.split('\n').slice(2)) {
      const [name, rest] = line.split(':');
      if (!rest || name!.trim() === 'lo') continue;
      const f = rest.trim().split(/\s+/).map(Number);
      rx += f[0] ?? 0;
      tx += f[8] ?? 0;
    }

    const current: Counters = { at: now, cpuBusy: total - idle, cpuTotal: total, rx, tx };
    const prev = this.previous;
    if (prev && current.cpuTotal > prev.cpuTotal) {
      out['system.cpu.utilization'] = Math.min(1, Math.max(0, (current.cpuBusy - prev.cpuBusy) / (current.cpuTotal - prev.cpuTotal)));
    }
    if (prev && now > prev.at) {
      const seconds = (now - prev.at) / 1000;
      out['system.network.io.rx'] = Math.max(0, (rx - prev.rx) / seconds);
      out['system.network.io.tx'] = Math.max(0, (tx - prev.tx) / seconds);
    }
    this.previous = current;
    return out;
  }
}
