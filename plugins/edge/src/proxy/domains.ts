/**
 * Domains of a deployment: the checks and the changes of the state that the operations (operations/domains.ts,
 * operations/proxy.ts) plan and apply. A host name belongs to one deployment; the same host and path prefix twice
 * is a conflict.
 */
import { errors, type Principal, type Static } from '@agent/sdk';
import { checkHostname, checkUrlPath } from '../validate.js';
import { namesOf, type DomainEntry, type EdgeState } from '../state.js';
import type { Domain, DomainInput } from '../schemas.js';
import type { Runtime } from '../runtime.js';

/** Normalised fields of a domain entry (host names and prefix checked). */
export type DomainFields = Partial<Pick<DomainEntry, 'domain' | 'aliases' | 'path_prefix' | 'service' | 'container_port' | 'strip_prefix' | 'ssl'>>;

/** Checks a candidate entry against the others (already validated fields); throws 409 on a conflict. */
export function checkClaims(state: EdgeState, entry: DomainEntry, principal: Principal): void {
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

export function normalise(body: Partial<DomainInput>): DomainFields {
  const out: DomainFields = {};
  if (body.domain !== undefined) out.domain = checkHostname(body.domain, 'domain');
  if (body.aliases !== undefined) out.aliases = [...new Set(body.aliases.map((a, i) => checkHostname(a, `aliases[${i}]`)))];
  if (body.path_prefix !== undefined) out.path_prefix = checkUrlPath(body.path_prefix, 'path_prefix');
  if (body.service !== undefined) out.service = body.service;
  if (body.container_port !== undefined) out.container_port = body.container_port;
  if (body.strip_prefix !== undefined) out.strip_prefix = body.strip_prefix;
  if (body.ssl !== undefined) out.ssl = { enabled: body.ssl.enabled };
  return out;
}

export class Domains {
  constructor(private readonly rt: Runtime) {}

  assertDeployment(name: string): void {
    if (!this.rt.deployments().get(name)) throw errors.notFound(`deployment '${name}' not found`);
  }

  async checkService(deployment: string, service: string): Promise<void> {
    const services = await this.services(deployment);
    if (!services.includes(service)) {
      throw errors.badRequest(`service: '${service}' is not a service of deployment '${deployment}' (${services.join(', ') || 'none'})`, 'VALIDATION_FAILED', {
        field: 'service',
      });
    }
  }

  /** The compose services of a deployment, in file order. */
  async services(deployment: string): Promise<string[]> {
    const { parsed } = await this.rt.deployments().compose(deployment);
    return Object.keys((parsed.services ?? {}) as Record<string, unknown>);
  }

  /** A new entry in `draft` (its claims checked against the draft: the state of the moment, in the apply queue). */
  create(
    draft: EdgeState,
    deployment: string,
    fields: DomainFields & Pick<DomainEntry, 'service' | 'domain' | 'container_port'>,
    principal: Principal,
  ): DomainEntry {
    const now = new Date().toISOString();
    const entry: DomainEntry = {
      id: draft.next_id++,
      deployment,
      service: fields.service,
      domain: fields.domain,
      container_port: fields.container_port,
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
  }

  /** The entry `id` of a deployment in `draft`, or 404. */
  find(draft: EdgeState, deployment: string, id: number): DomainEntry {
    const entry = draft.domains.find((d) => d.id === id && d.deployment === deployment);
    if (!entry) throw errors.notFound(`domain ${id} not found in deployment '${deployment}'`);
    return entry;
  }

  update(draft: EdgeState, deployment: string, id: number, fields: DomainFields, principal: Principal): DomainEntry {
    const entry = this.find(draft, deployment, id);
    Object.assign(entry, fields, { updated_at: new Date().toISOString() });
    entry.aliases = entry.aliases.filter((a) => a !== entry.domain);
    checkClaims(draft, entry, principal);
    return entry;
  }

  remove(draft: EdgeState, deployment: string, id: number): DomainEntry {
    const entry = this.find(draft, deployment, id);
    draft.domains = draft.domains.filter((d) => d !== entry);
    return entry;
  }

  /** The entries of a deployment, as the API shows them. */
  list(deployment: string): Static<typeof Domain>[] {
    return this.rt.edge.state.domains.filter((d) => d.deployment === deployment).map((d) => this.view(d));
  }

  view(d: DomainEntry): Static<typeof Domain> {
    return {
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
      https: d.ssl.enabled && this.rt.edge.certs.has(d.domain),
    };
  }

  /** The entry as it is now (after a change: its upstream resolved), as the API shows it. */
  current(entry: DomainEntry): Static<typeof Domain> {
    return this.view(this.rt.edge.state.domains.find((d) => d.id === entry.id) ?? entry);
  }
}
