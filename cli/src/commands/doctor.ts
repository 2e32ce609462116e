/**
 * `agentctl doctor`: asks the agent to check the external parts its enabled plugins use
 * (`GET /api/system/doctor`) and prints what works, what does not and the command that fixes it. An agent that
 * cannot be reached is itself the first finding. Exit code 1 when a check failed.
 */
import { Command } from 'commander';
import { AgentApiError, AgentConnectionError, type DoctorReport } from '@agent/client';
import type { CliContext } from '../context.js';
import type { Style } from '../style.js';

const MARK = { ok: '✓', warning: '!', failed: '✗', skipped: '-' } as const;

export function renderReport(report: DoctorReport, style: Style): string[] {
  const colour = { ok: style.green, warning: style.yellow, failed: style.red, skipped: style.dim } as const;
  const width = Math.max(...report.checks.map((c) => c.title.length), 10);
  const lines: string[] = [];
  for (const c of report.checks) {
    lines.push(`${colour[c.status](MARK[c.status])} ${c.title.padEnd(width)}  ${c.detail}`);
    if (c.fix && c.status !== 'ok') lines.push(`  ${' '.repeat(width)}  ${style.cyan('fix:')} ${c.fix}`);
  }
  const count = (s: keyof typeof MARK) => report.checks.filter((c) => c.status === s).length;
  const warnings = count('warning');
  lines.push(
    '',
    `${count('ok')} ok, ${warnings} ${warnings === 1 ? 'warning' : 'warnings'}, ${count('failed')} failed${count('skipped') ? `, ${count('skipped')} skipped` : ''}`,
  );
  return lines;
}

export function doctorCommand(ctx: CliContext, runAction: (fn: () => Promise<void>) => Promise<void>, setExit: (code: number) => void): Command {
  return new Command('doctor')
    .description('check the Docker engine, compose, nginx, ACME, DNS, database drivers, disk, clock, secrets and Node.js the agent uses')
    .action(() =>
      runAction(async () => {
        const client = ctx.client();
        let report: DoctorReport;
        try {
          report = (await client.call<DoctorReport>('GET', '/system/doctor')).data;
        } catch (err) {
          if (err instanceof AgentConnectionError) {
            const fix = 'start it (npm start in its folder, or systemctl start host-agent; journalctl -u host-agent says why it stopped)';
            const detail = `no answer at ${client.url}: ${err.message}`;
            // The same finding as a report, for -o json|yaml|jsonpath: a script reads it where it reads the agent's.
            const unreachable: DoctorReport = {
              ok: false,
              checked_at: new Date().toISOString(),
              checks: [{ id: 'agent', title: 'agent', status: 'failed', detail, fix, plugin: 'agentctl', duration_ms: 0 }],
            };
            await ctx.emit(unreachable, () => {
              ctx.print(`${ctx.out.red(MARK.failed)} agent  ${detail}`);
              ctx.print(`  ${ctx.out.cyan('fix:')} ${fix}`);
            });
            setExit(1);
            return;
          }
          if (err instanceof AgentApiError && err.status === 404) {
            ctx.warn('this agent has no doctor report: enable the system plugin (plugins.enabled)');
            setExit(1);
            return;
          }
          throw err;
        }
        await ctx.emit(report, () => {
          for (const line of renderReport(report, ctx.out)) ctx.print(line);
        });
        if (!report.ok) setExit(1);
      }),
    );
}
