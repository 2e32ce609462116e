/**
 * Domain changes as operations: `prepare` checks the request (deployment, names, service) and renders what nginx
 * would get (the plan's diff); `apply` makes the change in the apply queue, where the claims are checked again
 * against the state of that moment. A request, its `?plan=true` and a plan's apply all run these.
 */
import { defineOperation, deploymentName, RecordId, Type, type PlanPreview } from '@agent/sdk';
import { DomainAdd, DomainUpdate } from '../schemas.js';
import type { DomainEntry, EdgeState } from '../state.js';
import type { Runtime } from '../runtime.js';
import { normalise, type Domains } from '../proxy/domains.js';

const Entry = Type.Object({ deployment: deploymentName(), id: RecordId('domain entry id') });

export function domainOperations(rt: Runtime, domains: Domains) {
  const { edge } = rt;

  /** The plan of a change: the entry before and after, and the diff of the files nginx would get. */
  const planned = async (type: 'create' | 'update' | 'delete', id: string, change: (draft: EdgeState) => DomainEntry): Promise<PlanPreview> => {
    let entry: DomainEntry | undefined;
    const existing = edge.state.domains.find((d) => String(d.id) === id);
    const { diff } = await edge.preview((draft) => {
      entry = change(draft);
    });
    return {
      summary: `${type} domain ${entry?.domain ?? id}`,
      changes: [
        {
          type: 'domain',
          id: entry?.domain ?? id,
          actions: [type],
          before: type === 'create' || !existing ? undefined : domains.view(existing),
          after: type === 'delete' || !entry ? undefined : domains.view(entry),
          diff,
        },
      ],
    };
  };
  /** What a plan depends on: the files it writes and the deployment's domain entries. */
  const snapshot = (deployment: string, hosts: (string | undefined)[]) => ({
    files: [...new Set(hosts.filter((h): h is string => !!h))].map((h) => edge.siteFile(h)),
    records: { domains: edge.state.domains.filter((d) => d.deployment === deployment) },
  });
  const ensureCertificates = (entry: DomainEntry, why: string) => {
    if (entry.ssl.enabled) rt.ensureCertificates(`domain ${entry.domain} ${why}`);
  };

  const add = defineOperation({
    name: 'domains.add',
    input: Type.Object({ deployment: deploymentName(), entry: DomainAdd }),
    resource: (i) => ({ type: 'domain', id: `${i.deployment}/${i.entry.domain}` }),
    prepare: async ({ deployment, entry }, { principal }) => {
      domains.assertDeployment(deployment);
      const fields = { ...normalise(entry), service: entry.service, container_port: entry.container_port };
      await domains.checkService(deployment, entry.service);
      const value = { deployment, fields: { ...fields, domain: fields.domain! } };
      const preview = await planned('create', entry.domain, (draft) => domains.create(draft, deployment, value.fields, principal));
      return { value, preview, snapshot: snapshot(deployment, [entry.domain]) };
    },
    apply: async ({ deployment, fields }, { principal }) => {
      const { result } = await edge.mutate((draft) => domains.create(draft, deployment, fields, principal));
      ensureCertificates(result, 'added');
      return domains.current(result);
    },
  });

  const update = defineOperation({
    name: 'domains.update',
    input: Type.Object({ ...Entry.properties, changes: DomainUpdate }),
    resource: (i) => ({ type: 'domain', id: `${i.deployment}/${i.id}` }),
    prepare: async ({ deployment, id, changes }, { principal }) => {
      domains.assertDeployment(deployment);
      const fields = normalise(changes);
      if (fields.service !== undefined) await domains.checkService(deployment, fields.service);
      const preview = await planned('update', String(id), (draft) => domains.update(draft, deployment, id, fields, principal));
      const before = edge.state.domains.find((d) => d.id === id);
      return { value: { deployment, id, fields }, preview, snapshot: snapshot(deployment, [before?.domain, changes.domain]) };
    },
    apply: async ({ deployment, id, fields }, { principal }) => {
      const { result } = await edge.mutate((draft) => domains.update(draft, deployment, id, fields, principal));
      ensureCertificates(result, 'updated');
      return domains.current(result);
    },
  });

  const remove = defineOperation({
    name: 'domains.remove',
    input: Entry,
    resource: (i) => ({ type: 'domain', id: `${i.deployment}/${i.id}` }),
    prepare: async ({ deployment, id }) => {
      domains.assertDeployment(deployment);
      const preview = await planned('delete', String(id), (draft) => domains.remove(draft, deployment, id));
      const entry = edge.state.domains.find((d) => d.id === id);
      return { value: { deployment, id }, preview, snapshot: snapshot(deployment, [entry?.domain]) };
    },
    apply: async ({ deployment, id }) => (await edge.mutate((draft) => domains.remove(draft, deployment, id))).result,
  });

  return { add, update, remove };
}
