/** `GET /api/system/doctor` (a read; admins only by default). */
import type { PluginContext, PluginDirectory } from '@agent/sdk';
import { doctorReport, DoctorView } from '../doctor.js';

export function doctorRoutes(ctx: PluginContext, plugins: PluginDirectory): void {
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
    handler: doctorReport(ctx.agent.dataDir, plugins),
  });
}
