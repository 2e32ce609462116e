/**
 * Domains of a deployment: list, add, update, remove — each plannable, the plan showing the nginx
 * configuration diff. A host name belongs to one deployment; the same host and path prefix twice is a conflict.
 */
import { deploymentName, errors, RecordId, reply, Type, type Principal, type Static } from '@agent/sdk';
import { checkHostname, checkUrlPath } from '../validate.js';
import { namesOf, type DomainEntry, type EdgeState } from '../state.js';
import { Domain, DomainBody } from '../schemas.js';
import type { Runtime } from '../runtime.js';

const AddBody = Type.Object({
  service: DomainBody.service,
  domain: DomainBody.domain,
  container_port: DomainBody.container_port,
  path_prefix: Type.Optional(DomainBody.path_prefix),
  strip_prefix: Type.Optional(DomainBody.strip_prefix),
  ssl: Type.Optional(DomainBody.ssl),
  aliases: Type.Optional(DomainBody.aliases),
});
type AddBody = Static<typeof AddBody>;
const UpdateBody = Type.Partial(AddBody);
type UpdateBody = Static<typeof UpdateBody>;

const NameParams = Type.Object({ name: deploymentName() });
const IdParams = Type.Object({ name: deploymentName(), domainId: RecordId('domain entry id') });

/** Checks a candidate entry against the others (already validated fields); throws 409 on a conflict. */
function checkClaims(state: EdgeState, entry: DomainEntry, principal: Principal): void {
  const others = state.domains.filter((d) => d.id !== entry.id);
  for (const name of namesOf(entry)) {
    const owner = others.find((d) => namesOf(d).includes(name) && d.deployment !== entry.deployment);
    // The owner is named only to whom reaches it: another tenant's deployment names must not leak.
    const who = owner && (principal.canAccessDeployment(owner.deployment) ? `deployment '${owner.deployment}'` : 'another deployment');
    if (owner) throw errors.conflict(`domain '${name}' is already used by ${who}`, 'DOMAIN_CLAIMED');
  }
  const same = others.find((d) => d.domain === entry.domain && d.path_prefix === entry.path_prefix);
  if (same) throw errors.conflict(`domain '${entry.domain}' with path prefix '${entry.path_prefix}' already exists (id ${same.id})`, 'DOMAIN_EXISTS');
  // A name is either a site's primary domain or an alias, never both: nginx would pick one server silently.
  for (const a of entry.aliases) {
    if (others.some((d) => d.domain === a)) throw errors.conflict(`alias '${a}' is the primary domain of another entry`, 'DOMAIN_EXISTS');
  }
  if (others.some((d) => d.aliases.includes(entry.domain) && d.domain !== entry.domain)) {
    throw errors.conflict(`domain '${entry.domain}' is an alias of another entry`, 'DOMAIN_EXISTS');
  }
}

export function domainRoutes(rt: Runtime): {
  add: (draft: EdgeState, deployment: string, body: AddBody, principal: Principal) => Promise<DomainEntry>;
  view: (d: DomainEntry) => Static<typeof Domain>;
} {
  const { ctx, edge } = rt;

  const assertDeployment = (name: string) => {
    if (!rt.deployments().get(name)) throw errors.notFound(`deployment '${name}' not found`);
  };

  const checkService = async (deployment: string, service: string) => {
    const { parsed } = await rt.deployments().compose(deployment);
    const services = Object.keys((parsed.services ?? {}) as Record<string, unknown>);
    if (!services.includes(service)) {
      throw errors.badRequest(`service: '${service}' is not a service of deployment '${deployment}' (${services.join(', ') || 'none'})`, 'VALIDATION_FAILED', {
        field: 'service',
      });
    }
  };

  const normalise = (body: UpdateBody) => {
    const out: Partial<DomainEntry> = {};
    if (body.domain !== undefined) out.domain = checkHostname(body.domain, 'domain');
    if (body.aliases !== undefined) {
      out.aliases = [...new Set(body.aliases.map((a, i) => checkHostname(a, `aliases[${i}]`)))];
    }
    if (body.path_prefix !== undefined) out.path_prefix = checkUrlPath(body.path_prefix, 'path_prefix');
    if (body.service !== undefined) out.service = body.service;
    if (body.container_port !== undefined) out.container_port = body.container_port;
    if (body.strip_prefix !== undefined) out.strip_prefix = body.strip_prefix;
    if (body.ssl !== undefined) out.ssl = { enabled: body.ssl.enabled };
    return out;
  };

  const add = async (draft: EdgeState, deployment: string, body: AddBody, principal: Principal): Promise<DomainEntry> => {
    assertDeployment(deployment);
    const fields = normalise(body);
    await checkService(deployment, body.service);
    const now = new Date().toISOString();
    const entry: DomainEntry = {
      id: draft.next_id++,
      deployment,
      service: body.service,
      domain: fields.domain!,
      container_port: body.container_port,
      path_prefix: fields.path_prefix ?? '/',
      strip_prefix: fields.strip_prefix ?? false,
      ssl: fields.ssl ?? { enabled: false },
      aliases: (fields.aliases ?? []).filter((a) => a !== fields.domain),
      created_at: now,
      updated_at: now,
      last_upstream: null,
    };
    checkClaims(draft, entry, principal);
    draft.domains.push(entry);
    return entry;
  };

  const update = async (draft: EdgeState, deployment: string, id: number, body: UpdateBody, principal: Principal): Promise<DomainEntry> => {
    assertDeployment(deployment);
    const entry = draft.domains.find((d) => d.id === id && d.deployment === deployment);
    if (!entry) throw errors.notFound(`domain ${id} not found in deployment '${deployment}'`);
    const fields = normalise(body);
    if (fields.service !== undefined) await checkService(deployment, fields.service);
    Object.assign(entry, fields, { updated_at: new Date().toISOString() });
    entry.aliases = entry.aliases.filter((a) => a !== entry.domain);
    checkClaims(draft, entry, principal);
    return entry;
  };

  const remove = (draft: EdgeState, deployment: string, id: number): DomainEntry => {
    assertDeployment(deployment);
    const entry = draft.domains.find((d) => d.id === id && d.deployment === deployment);
    if (!entry) throw errors.notFound(`domain ${id} not found in deployment '${deployment}'`);
    draft.domains = draft.domains.filter((d) => d !== entry);
    return entry;
  };

  const view = (d: DomainEntry) => ({
    id: d.id,
    deployment: d.deployment,
    service: d.service,
    domain: d.domain,
    container_port: d.container_port,
    path_prefix: d.path_prefix,
    strip_prefix: d.strip_prefix,
    ssl: { enabled: d.ssl.enabled },
    aliases: [...d.aliases],
    created_at: d.created_at,
    updated_at: d.updated_at,
    upstream: d.last_upstream,
    https: d.ssl.enabled && edge.certs.has(d.domain),
  });

  /** Snapshot of a plan: the files it writes and the deployment's domain entries. */
  const snapshot = (deployment: string, hosts: string[]) => ({
    files: [...new Set(hosts)].map((h) => edge.siteFile(h)),
    records: { domains: edge.state.domains.filter((d) => d.deployment === deployment) },
  });

  const planChange = async (type: 'create' | 'update' | 'delete', id: string, change: (draft: EdgeState) => Promise<DomainEntry> | DomainEntry) => {
    let entry: DomainEntry | undefined;
    const before = (() => {
      const e = edge.state.domains.find((d) => String(d.id) === id);
      return e ? view(e) : undefined;
    })();
    const { diff } = await edge.preview(async (draft) => {
      entry = await change(draft);
    });
    return {
      summary: `${type} domain ${entry?.domain ?? id}`,
      changes: [
        {
          type: 'domain',
          id: entry?.domain ?? id,
          actions: [type],
          before: type === 'create' ? undefined : before,
          after: type === 'delete' ? undefined : entry && { ...view(entry), upstream: entry.last_upstream },
          diff,
        },
      ],
    };
  };

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/domains',
    permission: 'proxy:read',
    operationId: 'domains.list',
    tag: 'domains',
    summary: 'List the domains of a deployment',
    deployment: 'name',
    params: NameParams,
    response: Type.Array(Domain),
    handler: (req) => {
      assertDeployment(req.params.name);
      return edge.state.domains.filter((d) => d.deployment === req.params.name).map(view);
    },
  });

  ctx.route({
    method: 'POST',
    path: '/deployments/:name/domains',
    permission: 'proxy:write',
    operationId: 'domains.add',
    tag: 'domains',
    status: 201,
    summary: 'Add a domain to a deployment (renders its nginx vhost, tests, reloads)',
    deployment: 'name',
    params: NameParams,
    body: AddBody,
    response: Domain,
    plan: {
      resource: (req) => ({ type: 'domain', id: `${req.params.name}/${req.body.domain}` }),
      preview: (req) => planChange('create', req.body.domain, (draft) => add(draft, req.params.name, req.body, req.principal)),
      snapshot: (req) => snapshot(req.params.name, [req.body.domain]),
    },
    handler: async (req) => {
      const { result } = await edge.mutate((draft) => add(draft, req.params.name, req.body, req.principal));
      if (result.ssl.enabled) rt.ensureCertificates(`domain ${result.domain} added`);
      return reply.created(view(edge.state.domains.find((d) => d.id === result.id) ?? result));
    },
  });

  ctx.route({
    method: 'PUT',
    path: '/deployments/:name/domains/:domainId',
    permission: 'proxy:write',
    operationId: 'domains.update',
    tag: 'domains',
    summary: 'Update a domain of a deployment',
    deployment: 'name',
    params: IdParams,
    body: UpdateBody,
    response: Domain,
    plan: {
      resource: (req) => ({ type: 'domain', id: `${req.params.name}/${req.params.domainId}` }),
      preview: (req) =>
        planChange('update', String(req.params.domainId), (draft) => update(draft, req.params.name, req.params.domainId, req.body, req.principal)),
      snapshot: (req) => {
        const e = edge.state.domains.find((d) => d.id === req.params.domainId);
        return snapshot(
          req.params.name,
          [e?.domain, req.body.domain].filter((h): h is string => !!h),
        );
      },
    },
    handler: async (req) => {
      const { result } = await edge.mutate((draft) => update(draft, req.params.name, req.params.domainId, req.body, req.principal));
      if (result.ssl.enabled) rt.ensureCertificates(`domain ${result.domain} updated`);
      return view(edge.state.domains.find((d) => d.id === result.id) ?? result);
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/deployments/:name/domains/:domainId',
    permission: 'proxy:write',
    operationId: 'domains.remove',
    tag: 'domains',
    summary: 'Remove a domain from a deployment (its vhost is removed and nginx reloaded)',
    deployment: 'name',
    params: IdParams,
    plan: {
      resource: (req) => ({ type: 'domain', id: `${req.params.name}/${req.params.domainId}` }),
      preview: (req) => planChange('delete', String(req.params.domainId), (draft) => remove(draft, req.params.name, req.params.domainId)),
      snapshot: (req) => {
        const e = edge.state.domains.find((d) => d.id === req.params.domainId);
        return snapshot(req.params.name, e ? [e.domain] : []);
      },
    },
    handler: async (req) => {
      const { result } = await edge.mutate((draft) => remove(draft, req.params.name, req.params.domainId));
      return reply.ok(null, `domain ${result.domain} removed`);
    },
  });

  return { add, view };
}
