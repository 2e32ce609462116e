/** Certificate routes: list, obtain, renew those due, delete; and the daily renewal job. */
import { mergeErrors, operationRoute, reply, Type, type PluginContext } from '@agent/sdk';
import { PROXY_APPLY_ERRORS } from '../api.js';
import type { EdgeConfig } from '../config.js';
import { Certificate, type Certificates } from '../certs/certificates.js';
import type { certificateOperations } from '../operations/certificates.js';

const BOUND = 'Bound to the deployment whose domain it is; for a name no deployment uses, global.';

export function certificateRoutes(ctx: PluginContext<EdgeConfig>, certs: Certificates, ops: ReturnType<typeof certificateOperations>): void {
  ctx.route({
    method: 'GET',
    path: '/certificates',
    permission: 'certificates:read',
    operationId: 'certificates.list',
    tag: 'certificates',
    tenancy: 'filtered',
    summary: 'Certificates with validity, status (valid, expiring, expired) and the deployment using them',
    response: Type.Array(Certificate),
    description:
      "A principal limited to deployments sees the certificates of its deployments' domains; those of names no deployment uses (or a deleted one used) are global.",
    handler: (req) => certs.list(req.principal),
  });

  ctx.route(
    operationRoute(ops.request, {
      method: 'POST',
      path: '/certificates',
      permission: 'certificates:write',
      operationId: 'certificates.request',
      tag: 'certificates',
      status: 201,
      creates: 'domain',
      summary: 'Obtain a certificate (ACME HTTP-01 through the proxy) for a domain and its aliases',
      description: BOUND,
      body: ops.request.input,
      deployment: (req) => certs.boundTo(req.principal, req.body.domain),
      response: Certificate,
      // The ACME order failed (the reason in the message); the new certificate is then rendered into nginx.
      errors: mergeErrors(PROXY_APPLY_ERRORS, { 502: ['CERTIFICATE_FAILED'] }),
      input: (req) => req.body,
      respond: (view) => reply.created(view),
    }),
  );

  ctx.route(
    operationRoute(ops.renew, {
      method: 'POST',
      path: '/certificates/renew',
      permission: 'certificates:write',
      operationId: 'certificates.renew',
      tag: 'certificates',
      summary: 'Renew every certificate that expires within certificates.renew_before_days (or `within_days`)',
      query: ops.renew.input,
      response: Type.Object({
        renewed: Type.Array(Type.String()),
        failed: Type.Array(Type.Object({ domain: Type.String(), error: Type.String() })),
        checked: Type.Integer(),
      }),
      input: (req) => req.query,
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/certificates/:domain',
      permission: 'certificates:write',
      operationId: 'certificates.delete',
      tag: 'certificates',
      summary: 'Delete a certificate (domains using it fall back to HTTP)',
      description: BOUND,
      params: ops.remove.input,
      deployment: (req) => certs.boundTo(req.principal, req.params.domain),
      response: Type.Null(),
      errors: PROXY_APPLY_ERRORS,
      input: (req) => req.params,
      respond: ({ domain, fallback }) =>
        reply.ok(
          null,
          fallback ? `certificate of ${domain} deleted; the domain is served over HTTP until a new one is obtained` : `certificate of ${domain} deleted`,
        ),
    }),
  );
}
