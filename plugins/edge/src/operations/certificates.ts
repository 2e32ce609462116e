/** Certificate changes as operations: obtain one, renew those due, delete one. */
import { defineOperation, errors, HOSTNAME, Type } from '@agent/sdk';
import { checkHostname } from '../validate.js';
import type { Runtime } from '../runtime.js';
import type { Certificates } from '../certs/certificates.js';

const Domain = Type.Object({ domain: Type.String({ maxLength: 253, pattern: HOSTNAME }) });

export function certificateOperations(rt: Runtime, certs: Certificates) {
  const request = defineOperation({
    name: 'certificates.request',
    input: Domain,
    resource: (i) => ({ type: 'certificate', id: i.domain }),
    prepare: (input, { principal }) => {
      const domain = checkHostname(input.domain, 'domain');
      certs.assertMayChange(principal, domain);
      return {
        value: domain,
        preview: { summary: `obtain a certificate for ${domain}`, changes: [{ type: 'certificate', id: domain, actions: ['create' as const] }] },
      };
    },
    apply: async (domain) => certs.view(await certs.obtain(domain)),
  });

  const renew = defineOperation({
    name: 'certificates.renew',
    input: Type.Object({
      within_days: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, description: 'renew those expiring within this many days' })),
    }),
    resource: () => ({ type: 'certificate', id: '*' }),
    prepare: (input) => ({ value: input.within_days, preview: { summary: 'renew the certificates due', changes: [] } }),
    apply: (withinDays) => certs.renewDue(withinDays),
  });

  const remove = defineOperation({
    name: 'certificates.delete',
    input: Domain,
    resource: (i) => ({ type: 'certificate', id: i.domain }),
    prepare: (input, { principal }) => {
      const domain = checkHostname(input.domain, 'domain');
      certs.assertMayChange(principal, domain);
      if (!rt.edge.certs.has(domain)) throw errors.notFound(`no certificate for ${domain}`);
      return {
        value: domain,
        preview: { summary: `delete the certificate of ${domain}`, changes: [{ type: 'certificate', id: domain, actions: ['delete' as const] }] },
      };
    },
    /** Whether a domain with SSL now falls back to HTTP. */
    apply: async (domain) => {
      const fallback = rt.edge.state.domains.some((d) => d.domain === domain && d.ssl.enabled);
      await certs.remove(domain);
      return { domain, fallback };
    },
  });

  return { request, renew, remove };
}
