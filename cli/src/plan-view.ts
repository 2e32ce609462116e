/** Plans for people: each change with its action and a diff of what it would do, then the totals and how to apply. */
import { changeLines, planTotals, type DiffLine, type Plan } from '@agent/client';
import type { Style } from './style.js';

const MARKS: Record<string, string> = { create: '+', delete: '-', update: '~', 'no-op': ' ' };

function line(l: DiffLine, style: Style): string {
  if (l.mark === '+') return style.green(`+ ${l.text}`);
  if (l.mark === '-') return style.red(`- ${l.text}`);
  if (l.mark === '@') return style.cyan(l.text);
  return style.dim(`  ${l.text}`);
}

export function renderPlan(plan: Plan, style: Style, options: { applyHint?: boolean } = {}): string {
  const out: string[] = [];
  const resource = plan.resource ? `${plan.resource.type} ${plan.resource.id}` : '';
  out.push(`${style.bold('Plan')} ${plan.id}  ${plan.action}${resource ? ` on ${resource}` : ''}  [${plan.status}]`);
  if (plan.summary) out.push(plan.summary);
  if (plan.request) out.push(style.dim(`request: ${plan.request.method} ${plan.request.path}`));
  out.push('');
  if (plan.changes.length === 0) out.push('  No changes.');
  for (const change of plan.changes) {
    const action = change.actions.includes('delete') && change.actions.includes('create') ? 'replace' : change.actions.join(', ');
    const mark = change.actions.length === 1 ? (MARKS[change.actions[0]!] ?? '~') : '±';
    const head = `${mark} ${change.type} ${change.id}  (${action})${change.sensitive ? '  [sensitive values hidden]' : ''}`;
    out.push(`  ${mark === '+' ? style.green(head) : mark === '-' ? style.red(head) : style.yellow(head)}`);
    for (const l of changeLines(change)) out.push(`      ${line(l, style)}`);
    out.push('');
  }
  const t = planTotals(plan);
  out.push(`${style.bold('Plan:')} ${t.create} to create, ${t.update} to update, ${t.delete} to delete.`);
  if (plan.status === 'available') {
    out.push(`Nothing was changed yet. The plan can be applied until ${plan.expires_at}.`);
    if (options.applyHint !== false) out.push(`Apply it with:  agentctl plans apply ${plan.id}`);
  } else if (plan.apply_error) {
    out.push(style.red(`Apply failed: ${plan.apply_error.error} (${plan.apply_error.code})`));
  } else if (plan.applied_at) {
    out.push(`Applied at ${plan.applied_at}.`);
  }
  return out.join('\n');
}

/** Whether an answer's data looks like a plan (for `plans get`, `--plan`). */
export function isPlan(data: unknown): data is Plan {
  const p = data as Plan;
  return !!p && typeof p === 'object' && typeof p.id === 'string' && typeof p.action === 'string' && Array.isArray(p.changes) && typeof p.status === 'string';
}
