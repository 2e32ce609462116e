/** What the proxy serves: a deployment's status (domains, upstreams, certificates, files, nginx -t), the vhosts. */
import { existsSync } from 'node:fs';
import { compareText, Nullable, Type, type Principal, type Static } from '@agent/sdk';
import { siteFile } from '../nginx/render.js';
import type { Runtime } from '../runtime.js';

export const ProxyStatus = Type.Object({
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
});

const VhostRoute = Type.Object({
  id: Type.Integer(),
  path_prefix: Type.String(),
  strip_prefix: Type.Boolean(),
  service: Type.String(),
  container_port: Type.Integer(),
  upstream: Nullable(Type.String()),
});
export const Vhost = Type.Object({
  domain: Type.String(),
  deployment: Type.String(),
  file: Type.String(),
  server_names: Type.Array(Type.String()),
  https: Type.Boolean(),
  routes: Type.Array(VhostRoute),
});

export async function proxyStatus({ edge }: Runtime, deployment: string, principal: Principal): Promise<Static<typeof ProxyStatus>> {
  const entries = edge.state.domains.filter((d) => d.deployment === deployment);
  const test = await edge.applier.test();
  return {
    deployment,
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
      message: principal.isGlobal
        ? test.message
        : test.ok
          ? 'the proxy configuration is valid'
          : 'the proxy configuration does not pass nginx -t (details for global principals)',
    },
  };
}

/** The generated vhosts of the deployments the caller reaches, by domain. */
export function vhosts({ edge }: Runtime, principal: Principal): Static<typeof Vhost>[] {
  const hosts = new Map<string, Static<typeof Vhost>>();
  for (const d of edge.state.domains) {
    if (!principal.canAccessDeployment(d.deployment)) continue;
    let h = hosts.get(d.domain);
    if (!h) {
      h = { domain: d.domain, deployment: d.deployment, file: edge.file(siteFile(d.domain)), server_names: [d.domain], https: false, routes: [] };
      hosts.set(d.domain, h);
    }
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
}
