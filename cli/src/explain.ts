/** Words for the error codes people meet most, printed after the agent's own `{error, code}`. */
import type { ErrorBody } from '@agent/client';

export interface ExplainContext {
  /** The permission of the operation that failed. */
  permission?: string;
  /** `agentctl <group> <op>` of the failed operation. */
  command?: string;
  profileName?: string;
  tokenSource?: string;
  tokenExpiredAt?: string;
}

export function explain(status: number, body: ErrorBody, ctx: ExplainContext = {}): string | undefined {
  switch (body.code) {
    case 'PLAN_STALE': {
      const drifted = Array.isArray(body.drifted) ? (body.drifted as unknown[]).map((d) => (typeof d === 'string' ? d : JSON.stringify(d))) : [];
      return [
        'The plan is stale: something it depends on changed after the plan was made, so what you reviewed is not',
        'what would happen now. Nothing was applied.',
        ...(drifted.length ? [`Changed since the plan was made: ${drifted.join(', ')}`] : []),
        'Make a new plan (run the same command again with --plan), review it, and apply that one.',
      ].join('\n');
    }
    case 'PLAN_EXPIRED':
      return [
        'The plan expired: a plan can only be applied for a limited time after it was made (24 hours unless the',
        'agent is configured otherwise). Nothing was applied.',
        'Make a new plan (run the same command again with --plan), review it, and apply that one.',
      ].join('\n');
    case 'PLAN_NOT_AVAILABLE':
      return [
        'The plan cannot be applied any more: plans are single-use. It was already applied, failed, or became',
        'obsolete because another plan for the same resource was applied. Nothing was applied now.',
        'Check with `agentctl plans get <id>`, then make a new plan if the change is still wanted.',
      ].join('\n');
    case 'UNAUTHORIZED':
    case 'INVALID_TOKEN':
    case 'TOKEN_EXPIRED': {
      if (ctx.tokenSource === 'none') return 'No token: log in with `agentctl login --url <agent-url>`, or pass --token / AGENTCTL_TOKEN.';
      const expired = ctx.tokenExpiredAt && Date.parse(ctx.tokenExpiredAt) <= Date.now() ? ` The saved login expired at ${ctx.tokenExpiredAt}.` : '';
      if (ctx.tokenSource === 'profile')
        return `The token of profile '${ctx.profileName}' was refused.${expired} Log in again: agentctl login --profile ${ctx.profileName}`;
      return `The token from ${ctx.tokenSource === 'env' ? 'AGENTCTL_TOKEN' : '--token'} was refused (invalid, expired or revoked).`;
    }
    case 'FORBIDDEN':
      return ctx.permission && ctx.permission !== 'authenticated' && ctx.permission !== 'public'
        ? `This operation needs the permission '${ctx.permission}' (and access to the deployment, for deployment-scoped operations).`
        : undefined;
    case 'VALIDATION_FAILED':
      return ctx.command ? `See the fields and parameters with: ${ctx.command} --help` : undefined;
    default:
      if (status === 410) return 'The resource is gone (expired or removed).';
      return undefined;
  }
}
