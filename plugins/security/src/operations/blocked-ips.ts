/** Blocking and unblocking addresses as operations. */
import { defineOperation, deploymentName, errors, Type } from '@agent/sdk';
import { BlockBody } from '../schemas.js';
import { assertDeployment, type SecurityRuntime } from '../runtime.js';
import { checkText, ipOrCidr } from '../validate.js';

export function blockedIpOperations(rt: SecurityRuntime) {
  const block = defineOperation({
    name: 'security.blockIp',
    input: BlockBody,
    resource: (i) => ({ type: 'blocked-ip', id: i.deployment ? `${i.deployment}/${i.ip}` : i.ip }),
    prepare: (input) => {
      const ip = ipOrCidr(input.ip, 'ip');
      const reason = checkText(input.reason, 'reason');
      if (input.deployment) assertDeployment(rt, input.deployment);
      const value = { ip, reason, duration: input.duration ?? null, deployment: input.deployment ?? null };
      return { value, preview: { summary: `block ${ip}`, changes: [{ type: 'blocked-ip', id: ip, actions: ['create' as const], after: value }] } };
    },
    apply: (value) => rt.rules.block({ ...value, auto: false }),
  });

  /** `deployment` given: its block for that deployment only; omitted: every block of the address. */
  const unblock = defineOperation({
    name: 'security.unblockIp',
    input: Type.Object({ ip: Type.String({ maxLength: 64 }), deployment: Type.Optional(deploymentName()) }),
    resource: (i) => ({ type: 'blocked-ip', id: i.deployment ? `${i.deployment}/${i.ip}` : i.ip }),
    prepare: ({ ip: value, deployment }) => {
      const ip = ipOrCidr(value, 'ip');
      const notBlocked = () => errors.notFound(deployment ? `${ip} is not blocked for '${deployment}'` : `${ip} is not blocked`);
      if (!rt.rules.state.blocked.some((b) => b.ip === ip && (deployment === undefined || b.deployment === deployment))) throw notBlocked();
      return {
        value: { ip, deployment, notBlocked },
        preview: { summary: `unblock ${ip}`, changes: [{ type: 'blocked-ip', id: ip, actions: ['delete' as const] }] },
      };
    },
    apply: async ({ ip, deployment, notBlocked }) => {
      // Another request may have lifted it in between.
      if ((await rt.rules.unblock(ip, deployment)) === 0) throw notBlocked();
      return { ip, deployment };
    },
  });

  return { block, unblock };
}
