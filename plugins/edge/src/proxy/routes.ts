/** Proxy endpoints: quick setup of a deployment's domain, status, removal, the vhost list. */
import { deploymentName, errors, Nullable, reply, Type, compareText } from '@agent/sdk';
import { HOSTNAME } from '@agent/sdk';
import { siteFile } from '../nginx/render.js';
import { Domain } from '../schemas.js';
import type { Runtime } from '../runtime.js';
import type { domainRoutes } from './domains.js';
import { existsSync } from 'node:fs';

export function proxyRoutes(rt: Runtime, domains: ReturnType<typeof domainRoutes>): void {
  const { ctx, edge } = rt;
  const NameParams = Type.Object({ name: deploymentName() });

  ctx.route({
    method: 'POST',
    path: '/proxy/setup/:name',
    permission: 'proxy:write',
    operationId: 'proxy.setup',
    tag: 'proxy',
    summary: "Route a domain to a deployment's first service (creates or updates its root domain entry)",
    description:
      'Shorthand for the domains API: the domain is routed with path prefix `/` to the first service of the compose file on `port` (inside the container).',
    deployment: 'name',
    params: NameParams,
    body: Type.Object({
      domain: Type.String({ maxLength: 253, pattern: HOSTNAME }),
      port: Type.Integer({ minimum: 1, maximum: 65535, description: 'port inside the container' }),
      ssl: Type.Optional(Type.Boolean({ default: false })),
    }),
    response: Domain,
    handler: async (req) => {
      const name = req.params.name;
      if (!rt.deployments().get(name)) throw errors.notFound(`deployment '${name}' not found`);
      const { parsed } = await rt.deployments().compose(name);
      const service = Object.keys((parsed.services ?? {}) as Record<string, unknown>)[0];
      if (!service) throw errors.badRequest(`deployment '${name}' has no service`);
      const ssl = req.body.ssl ?? false;
      const { result } = await edge.mutate(async (draft) => {
        const existing = draft.domains.find((d) => d.deployment === name && d.domain === req.body.domain && d.path_prefix === '/');
        if (existing) {
          Object.assign(existing, { container_port: req.body.port, ssl: { enabled: ssl }, updated_at: new Date().toISOString() });
          return { entry: existing, created: false };
        }
        return {
          entry: await domains.add(draft, name, { service, domain: req.body.domain, container_port: req.body.port, ssl: { enabled: ssl } }, req.principal),
          created: true,
        };
      });
      if (ssl) rt.ensureCertificates(`proxy setup of ${name}`);
      const view = domains.view(edge.state.domains.find((d) => d.id === result.entry.id)!);
      return result.created ? reply.created(view) : view;
    },
  });

  ctx.route({
    method: 'GET',
    path: '/proxy/status/:name',
    permission: 'proxy:read',
    operationId: 'proxy.status',
    tag: 'proxy',
    summary: 'Proxy configuration status of a deployment',
    deployment: 'name',
    params: NameParams,
    response: Type.Object({
      deployment: Type.String(),
      configured: Type.Boolean(),
      domains: Type.Array(
        Type.Object({
          id: Type.Integer(),
          domain: Type.String(),
          aliases: Type.Array(Type.String()),
          path_prefix: Type.String(),
          upstream: Nullable(Type.String()),
          ssl_enabled: Type.Boolean(),
          https: Type.Boolean(),
          certificate: Nullable(Type.Object({ status: Type.String(), not_after: Type.String(), days_left: Type.Integer() })),
          vhost_file: Type.String(),
          vhost_present: Type.Boolean(),
        }),
      ),
      nginx: Type.Object({ installed: Type.Boolean(), config_valid: Type.Boolean(), message: Type.String() }),
    }),
    handler: async (req) => {
      const entries = edge.state.domains.filter((d) => d.deployment === req.params.name);
      const test = await edge.applier.test();
      return {
        deployment: req.params.name,
        configured: entries.length > 0,
        domains: entries.map((d) => {
          const cert = edge.certs.info(d.domain);
          const file = edge.file(siteFile(d.domain));
          return {
            id: d.id,
            domain: d.domain,
            aliases: d.aliases,
            path_prefix: d.path_prefix,
            upstream: d.last_upstream,
            ssl_enabled: d.ssl.enabled,
            https: d.ssl.enabled && !!cert,
            certificate: cert && { status: cert.status, not_after: cert.not_after, days_left: cert.days_left },
            vhost_file: file,
            vhost_present: existsSync(file),
          };
        }),
        // nginx's own words name files of every site: only for principals who see the whole proxy.
        nginx: {
          installed: test.installed,
          config_valid: test.ok,
          message: req.principal.isGlobal
            ? test.message
            : test.ok
              ? 'the proxy configuration is valid'
              : 'the proxy configuration does not pass nginx -t (details for global principals)',
        },
      };
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/proxy/:name',
    permission: 'proxy:write',
    operationId: 'proxy.remove',
    tag: 'proxy',
    summary: 'Remove every domain (and vhost) of a deployment',
    deployment: 'name',
    params: NameParams,
    description: '404 when the deployment has no domain: there is nothing to remove, and nginx is not touched.',
    response: Type.Object({ removed: Type.Integer() }),
    handler: async (req) => {
      if (!edge.state.domains.some((d) => d.deployment === req.params.name)) {
        throw errors.notFound(`deployment '${req.params.name}' has no proxy configuration`);
      }
      const { result } = await edge.mutate((draft) => {
        const before = draft.domains.length;
        draft.domains = draft.domains.filter((d) => d.deployment !== req.params.name);
        return before - draft.domains.length;
      });
      return reply.ok({ removed: result }, `${result} domain(s) of ${req.params.name} removed`);
    },
  });

  ctx.route({
    method: 'GET',
    path: '/proxy/vhosts',
    permission: 'proxy:read',
    operationId: 'proxy.vhosts',
    tag: 'proxy',
    summary: 'Virtual hosts the agent generated (one per domain)',
    tenancy: 'filtered',
    description: 'Only the vhosts of deployments the caller reaches.',
    response: Type.Array(
      Type.Object({
        domain: Type.String(),
        deployment: Type.String(),
        file: Type.String(),
        server_names: Type.Array(Type.String()),
        https: Type.Boolean(),
        routes: Type.Array(
          Type.Object({
            id: Type.Integer(),
            path_prefix: Type.String(),
            strip_prefix: Type.Boolean(),
            service: Type.String(),
            container_port: Type.Integer(),
            upstream: Nullable(Type.String()),
          }),
        ),
      }),
    ),
    handler: (req) => {
      const hosts = new Map<string, ReturnType<typeof buildHost>>();
      function buildHost(domain: string, deployment: string) {
        return {
          domain,
          deployment,
          file: edge.file(siteFile(domain)),
          server_names: [domain],
          https: false,
          routes: [] as { id: number; path_prefix: string; strip_prefix: boolean; service: string; container_port: number; upstream: string | null }[],
        };
      }
      for (const d of edge.state.domains) {
        if (!req.principal.canAccessDeployment(d.deployment)) continue;
        let h = hosts.get(d.domain);
        if (!h) hosts.set(d.domain, (h = buildHost(d.domain, d.deployment)));
        for (const a of d.aliases) if (!h.server_names.includes(a)) h.server_names.push(a);
        if (d.ssl.enabled && edge.certs.has(d.domain)) h.https = true;
        h.routes.push({
          id: d.id,
          path_prefix: d.path_prefix,
          strip_prefix: d.strip_prefix,
          service: d.service,
          container_port: d.container_port,
          upstream: d.last_upstream,
        });
      }
      return [...hosts.values()].sort((a, b) => compareText(a.domain, b.domain));
    },
  });
}
