/**
 * The checks of `agentctl doctor`: the core's own and those each running plugin contributed with `ctx.doctor`.
 * A report runs them all at once, each within a time limit, and a check that throws or hangs is reported as
 * failed rather than failing the report.
 */
import type { CheckResult, DoctorCheck, DoctorCheckReport, DoctorReport, DoctorService } from '@agent/sdk';

/** A check that has not answered by then is reported as failed (a hung daemon must not hang the report). */
const CHECK_TIMEOUT_MS = 15_000;

export class DoctorRegistry implements DoctorService {
  private readonly byPlugin = new Map<string, DoctorCheck[]>();

  /** The checks of one plugin (replacing earlier ones), in the order it added them. */
  set(plugin: string, checks: DoctorCheck[]): void {
    const seen = new Set<string>();
    for (const c of checks) {
      if (seen.has(c.id)) throw new Error(`doctor check '${c.id}' is added twice`);
      seen.add(c.id);
    }
    this.byPlugin.set(plugin, [...checks]);
  }

  /** Forgets the checks of a plugin that failed or stopped. */
  drop(plugin: string): void {
    this.byPlugin.delete(plugin);
  }

  async run(): Promise<DoctorReport> {
    const entries = [...this.byPlugin].flatMap(([plugin, checks]) => checks.map((check) => ({ plugin, check })));
    const checks = await Promise.all(entries.map(({ plugin, check }) => runOne(plugin, check)));
    return { ok: checks.every((c) => c.status !== 'failed'), checked_at: new Date().toISOString(), checks };
  }
}

async function runOne(plugin: string, check: DoctorCheck): Promise<DoctorCheckReport> {
  const started = Date.now();
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<CheckResult>((resolve) => {
    timer = setTimeout(() => {
      controller.abort();
      resolve({ status: 'failed', detail: `no answer within ${CHECK_TIMEOUT_MS / 1000} s` });
    }, CHECK_TIMEOUT_MS);
  });
  let result: CheckResult;
  try {
    result = await Promise.race([Promise.resolve().then(() => check.run(controller.signal)), timeout]);
  } catch (err) {
    result = { status: 'failed', detail: (err as Error)?.message ?? String(err) };
  } finally {
    clearTimeout(timer);
  }
  return {
    id: check.id,
    title: check.title,
    plugin,
    status: result.status,
    detail: result.detail,
    ...(result.fix ? { fix: result.fix } : {}),
    duration_ms: Date.now() - started,
  };
}
