/**
 * `GET /api/system/doctor`: runs the doctor checks of the core and of every running plugin (each plugin adds the
 * checks of the parts it drives with `ctx.doctor`) and answers what works, what does not and what fixes it.
 * Admins only by default: the answer describes the host (paths, versions, addresses).
 */
import { Type, type DoctorService, type PluginContext } from '@agent/sdk';

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

export function registerDoctorRoute(ctx: PluginContext, doctor: DoctorService): void {
  ctx.route({
    method: 'GET',
    path: '/system/doctor',
    permission: 'doctor:read',
    operationId: 'system.doctor',
    tag: 'system',
    summary: 'Check the external parts the enabled plugins use',
    description:
      'Docker engine and compose, nginx, the ACME directory and the clock, the DNS server API, database drivers, ' +
      'the data folder (free space, modes), secret file modes and the Node.js version: each with its status, what was found ' +
      'and the command that fixes it. Runs every check now (a few seconds at most). `agentctl doctor` prints it.',
    response: DoctorView,
    handler: () => doctor.run(),
  });
}
