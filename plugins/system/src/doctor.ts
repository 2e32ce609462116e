/**
 * The doctor report of `GET /api/system/doctor`: runs the doctor checks of the core and of every running plugin
 * (each plugin adds the checks of the parts it drives with `ctx.doctor`) and answers what works, what does not and
 * what fixes it. Admins only by default: the answer describes the host (paths, versions, addresses). A report runs
 * every check at once, each within a time limit; a check that throws or hangs is reported as failed rather than
 * failing the report.
 */
import { Type, type CheckResult, type DoctorCheck, type DoctorCheckReport, type DoctorReport, type PluginDirectory } from '@agent/sdk';
import { coreChecks } from './core-checks.js';

/** A check that has not answered by then is reported as failed (a hung daemon must not hang the report). */
const CHECK_TIMEOUT_MS = 15_000;

export const CheckView = Type.Object({
  id: Type.String({ description: '`<plugin>.<part>`, e.g. `docker.engine`' }),
  title: Type.String(),
  plugin: Type.String({ description: 'the plugin that contributed the check (`core` for the core)' }),
  status: Type.Union([Type.Literal('ok'), Type.Literal('warning'), Type.Literal('failed'), Type.Literal('skipped')]),
  detail: Type.String(),
  fix: Type.Optional(Type.String({ description: 'the command or step that fixes a warning or a failure' })),
  duration_ms: Type.Integer({ minimum: 0 }),
});

export const DoctorView = Type.Object({
  ok: Type.Boolean({ description: 'no check failed (warnings allowed)' }),
  checked_at: Type.String({ format: 'date-time' }),
  checks: Type.Array(CheckView),
});

/** Runs the core's checks and those of every running plugin, all at once. */
export function doctorReport(dataDir: string, plugins: PluginDirectory): () => Promise<DoctorReport> {
  // The core's own checks (its data folder, secrets, Node.js) come first and are reported as the core's.
  const own = coreChecks(dataDir).map((check) => ({ plugin: 'core', check }));
  return async () => {
    const checks = await Promise.all([...own, ...plugins.checks()].map(({ plugin, check }) => runOne(plugin, check)));
    return { ok: checks.every((c) => c.status !== 'failed'), checked_at: new Date().toISOString(), checks };
  };
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
