/** Proxy shorthands as operations: route a domain to a deployment's first service; remove all its domains. */
import { defineOperation, deploymentName, errors, HOSTNAME, Type } from '@agent/sdk';
import { checkHostname } from '../validate.js';
import type { Runtime } from '../runtime.js';
import type { Domains } from '../proxy/domains.js';

export function proxyOperations(rt: Runtime, domains: Domains) {
  const { edge } = rt;

  const setup = defineOperation({
    name: 'proxy.setup',
    input: Type.Object({
      deployment: deploymentName(),
      domain: Type.String({ maxLength: 253, pattern: HOSTNAME }),
      port: Type.Integer({ minimum: 1, maximum: 65535, description: 'port inside the container' }),
      ssl: Type.Optional(Type.Boolean({ default: false })),
    }),
    resource: (i) => ({ type: 'domain', id: `${i.deployment}/${i.domain}` }),
    prepare: async ({ deployment, domain, port, ssl }) => {
      domains.assertDeployment(deployment);
      const service = (await domains.services(deployment))[0];
      if (!service) throw errors.badRequest(`deployment '${deployment}' has no service`);
      const host = checkHostname(domain, 'domain');
      return {
        value: { deployment, service, domain: host, port, ssl: ssl ?? false },
        preview: { summary: `route ${host} to ${deployment}/${service}:${port}`, changes: [{ type: 'domain', id: host, actions: ['create' as const] }] },
      };
    },
    /** Updates the deployment's root entry of the domain, or creates it. */
    apply: async ({ deployment, service, domain, port, ssl }, { principal }) => {
      const { result } = await edge.mutate((draft) => {
        const existing = draft.domains.find((d) => d.deployment === deployment && d.domain === domain && d.path_prefix === '/');
        if (!existing)
          return { entry: domains.create(draft, deployment, { service, domain, container_port: port, ssl: { enabled: ssl } }, principal), created: true };
        Object.assign(existing, { container_port: port, ssl: { enabled: ssl }, updated_at: new Date().toISOString() });
        return { entry: existing, created: false };
      });
      if (ssl) rt.ensureCertificates(`proxy setup of ${deployment}`);
      return { entry: domains.current(result.entry), created: result.created };
    },
  });

  const remove = defineOperation({
    name: 'proxy.remove',
    input: Type.Object({ deployment: deploymentName() }),
    resource: (i) => ({ type: 'proxy', id: i.deployment }),
    prepare: ({ deployment }) => {
      const count = edge.state.domains.filter((d) => d.deployment === deployment).length;
      if (count === 0) throw errors.notFound(`deployment '${deployment}' has no proxy configuration`);
      return { value: { deployment }, preview: { summary: `remove the ${count} domain(s) of ${deployment}`, changes: [] } };
    },
    apply: async ({ deployment }) => {
      const { result } = await edge.mutate((draft) => {
        const before = draft.domains.length;
        draft.domains = draft.domains.filter((d) => d.deployment !== deployment);
        return before - draft.domains.length;
      });
      return result;
    },
  });

  return { setup, remove };
}
