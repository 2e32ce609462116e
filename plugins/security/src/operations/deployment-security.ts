/** A deployment's security rules (blocked addresses, closed paths, rate limits) as an operation. */
import { defineOperation, deploymentName, errors, Type } from '@agent/sdk';
import { DepSecurity } from '../schemas.js';
import type { SecurityRuntime } from '../runtime.js';
import { defaultDeploymentSecurity, type DeploymentSecurity } from '../state.js';
import { checkUrlPath, ipOrCidr } from '../validate.js';

export function deploymentSecurityOperations(rt: SecurityRuntime) {
  const update = defineOperation({
    name: 'security.updateDeployment',
    input: Type.Object({ deployment: deploymentName(), changes: Type.Partial(DepSecurity) }),
    resource: (i) => ({ type: 'deployment-security', id: i.deployment }),
    /** The fields given replace the current ones; the others stay. */
    prepare: ({ deployment, changes }) => {
      if (!rt.deployments.get(deployment)) throw errors.notFound(`deployment '${deployment}' not found`);
      const current = rt.rules.state.deployment_security[deployment] ?? defaultDeploymentSecurity();
      const next: DeploymentSecurity = {
        enabled: changes.enabled ?? current.enabled,
        blocked_ips: changes.blocked_ips ? [...new Set(changes.blocked_ips.map((ip, i) => ipOrCidr(ip, `blocked_ips[${i}]`)))] : current.blocked_ips,
        protected_paths:
          changes.protected_paths?.map((p, i) => ({ pattern: checkUrlPath(p.pattern, `protected_paths[${i}].pattern`), enabled: p.enabled })) ??
          current.protected_paths,
        rate_limits:
          changes.rate_limits?.map((r, i) => ({ path: checkUrlPath(r.path, `rate_limits[${i}].path`), rate: r.rate, burst: r.burst, enabled: r.enabled })) ??
          current.rate_limits,
      };
      return {
        value: { deployment, next },
        preview: {
          summary: `security rules of ${deployment}`,
          changes: [{ type: 'deployment-security', id: deployment, actions: ['update' as const], before: current, after: next }],
        },
      };
    },
    apply: async ({ deployment, next }) => {
      await rt.rules.proxy.mutate((draft) => {
        draft.deployment_security[deployment] = next;
      });
      return next;
    },
  });
  return { update };
}
