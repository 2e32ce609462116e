/** Host figures for `/api/stats`: CPU (sampled), memory, disk, load, uptime — from `os`, `/proc` and `statfs`. */
import { readFile, statfs } from 'node:fs/promises';
import os from 'node:os';

interface CpuTimes {
  idle: number;
  total: number;
}

const cpuTimes = (): CpuTimes => {
  let idle = 0;
  let total = 0;
  for (const cpu of os.cpus()) {
    const t = cpu.times;
    idle += t.idle;
    total += t.user + t.nice + t.sys + t.idle + t.irq;
  }
  return { idle, total };
};

/** CPU utilisation over the interval since the previous call (at least `minMs`, sampling again when shorter). */
export class CpuSampler {
  private last = { at: Date.now(), times: cpuTimes() };

  async usagePercent(minMs = 200): Promise<number> {
    let elapsed = Date.now() - this.last.at;
    if (elapsed < minMs) {
      await new Promise((r) => setTimeout(r, minMs - elapsed));
      elapsed = minMs;
    }
    const now = cpuTimes();
    const idle = now.idle - this.last.times.idle;
    const total = now.total - this.last.times.total;
    this.last = { at: Date.now(), times: now };
    return total > 0 ? Math.round(1000 * (1 - idle / total)) / 10 : 0;
  }
}

/** `MemAvailable` from /proc/meminfo (Linux); free memory elsewhere. */
async function availableMemory(): Promise<number> {
  try {
    const text = await readFile('/proc/meminfo', 'utf8');
    const m = /^MemAvailable:\s+(\d+) kB/m.exec(text);
    if (m) return Number(m[1]) * 1024;
  } catch {
    // not Linux
  }
  return os.freemem();
}

const percent = (part: number, whole: number) => (whole > 0 ? Math.round((1000 * part) / whole) / 10 : 0);

export async function hostMetrics(sampler: CpuSampler, diskPath: string) {
  const total = os.totalmem();
  const available = await availableMemory();
  const fs = await statfs(diskPath);
  const diskTotal = fs.blocks * fs.bsize;
  const diskFree = fs.bavail * fs.bsize;
  const cpus = os.cpus();
  const [l1, l5, l15] = os.loadavg();
  return {
    hostname: os.hostname(),
    platform: os.platform(),
    arch: os.arch(),
    kernel: os.release(),
    uptime_seconds: Math.round(os.uptime()),
    load: { '1m': l1!, '5m': l5!, '15m': l15! },
    cpu: { count: cpus.length, model: cpus[0]?.model ?? 'unknown', usage_percent: await sampler.usagePercent() },
    memory: { total_bytes: total, available_bytes: available, used_bytes: total - available, usage_percent: percent(total - available, total) },
    disk: {
      path: diskPath,
      total_bytes: diskTotal,
      free_bytes: diskFree,
      used_bytes: diskTotal - diskFree,
      usage_percent: percent(diskTotal - diskFree, diskTotal),
    },
  };
}
