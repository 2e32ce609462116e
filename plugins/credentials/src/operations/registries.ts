/**
 * Changes of custom registries as operations: create, update, delete (built-in ones are read-only). Changing where
 * a registry answers (its host, or plain HTTP) while credentials use it needs their passwords again in the same
 * request: `prepare` refuses it otherwise, naming the credentials, and nothing changes; `apply` writes the registry,
 * then binds the re-entered passwords to the new URL.
 */
import { defineOperation, errors, type Document } from '@agent/sdk';
import { reentered, reentryRequired, type CredentialsDoc } from '../credentials.js';
import type { Registry, RegistryCatalog } from '../registries.js';
import { CreateRegistry, SlugParams, UpdateRegistryInput } from '../schemas.js';

const aboutRegistry = ({ slug }: { slug: string }) => ({ type: 'registry', id: slug });

export type RegistryOperations = ReturnType<typeof registryOperations>;

export function registryOperations(catalog: RegistryCatalog, credentials: Document<CredentialsDoc>) {
  const custom = (slug: string): Registry => {
    const r = catalog.get(slug);
    if (!r) throw errors.notFound(`registry '${slug}' not found`);
    if (r.builtin) throw errors.conflict(`registry '${slug}' is built in and read-only`, 'REGISTRY_BUILTIN');
    return r;
  };
  const assertHostFree = (host: string, except?: string) => {
    const clash = catalog.list().find((r) => r.host === host && r.slug !== except);
    if (clash) throw errors.conflict(`host '${host}' is already configured as registry '${clash.slug}'`, 'REGISTRY_EXISTS');
  };

  const create = defineOperation({
    name: 'registries.create',
    input: CreateRegistry,
    resource: aboutRegistry,
    prepare: (input) => {
      if (catalog.get(input.slug)) throw errors.conflict(`registry '${input.slug}' exists`, 'REGISTRY_EXISTS');
      assertHostFree(input.host);
      const registry: Omit<Registry, 'created_at' | 'updated_at'> = {
        slug: input.slug,
        name: input.name,
        type: input.type ?? 'generic',
        host: input.host,
        insecure: input.insecure ?? false,
        description: input.description ?? '',
        builtin: false,
      };
      return { value: registry, preview: { changes: [{ type: 'registry', id: input.slug, actions: ['create'], after: registry }] } };
    },
    apply: async (planned) => {
      const now = new Date().toISOString();
      const registry: Registry = { ...planned, created_at: now, updated_at: now };
      await catalog.custom.update((d) => {
        d.registries.push(registry);
      });
      return registry;
    },
  });

  const update = defineOperation({
    name: 'registries.update',
    input: UpdateRegistryInput,
    resource: aboutRegistry,
    prepare: ({ slug, credentials: given = [], ...changes }) => {
      const before = custom(slug);
      if (changes.host) assertHostFree(changes.host, slug);
      const after = { ...before, ...changes };
      const url = catalog.apiBase(after);
      const mine = credentials.data.credentials.filter((c) => c.registry === before.slug).map((c) => c.id);
      const passwords = new Map<number, string>();
      for (const [i, g] of given.entries()) {
        if (!mine.includes(g.id))
          throw errors.badRequest(`body.credentials[${i}].id: credential ${g.id} does not belong to registry '${before.slug}'`, 'VALIDATION_FAILED', {
            field: `credentials[${i}].id`,
          });
        if (!reentered(g.password))
          throw errors.badRequest(`body.credentials[${i}].password: the mask is not a password`, 'VALIDATION_FAILED', { field: `credentials[${i}].password` });
        passwords.set(g.id, g.password);
      }
      if (url !== catalog.apiBase(before)) {
        const missing = mine.filter((id) => !passwords.has(id));
        if (missing.length) {
          throw reentryRequired(
            `registry '${before.slug}' would answer at ${url}: its credential(s) ${missing.join(', ')} were entered for ${catalog.apiBase(before)}; ` +
              'send their passwords again in credentials: [{id, password}]',
            missing,
          );
        }
      }
      const rebound = [...passwords.keys()].map((id) => ({ type: 'credential', id: String(id), actions: ['update' as const], sensitive: true }));
      return {
        value: { slug, changes, url, passwords },
        preview: { changes: [{ type: 'registry', id: slug, actions: ['update'], before, after }, ...rebound] },
      };
    },
    apply: async ({ slug, changes, url, passwords }) => {
      const updated = await catalog.custom.update((d) => {
        const r = d.registries.find((x) => x.slug === slug);
        if (!r) throw errors.notFound(`registry '${slug}' not found`);
        Object.assign(r, changes, { updated_at: new Date().toISOString() });
        return { ...r };
      });
      if (passwords.size) {
        // After the registry: should this write fail, the credentials stay bound to the old URL and are not sent.
        await credentials.update((d) => {
          for (const c of d.credentials) {
            const password = passwords.get(c.id);
            if (password === undefined) continue;
            if (password !== c.password || c.bound_url !== url) c.last_test = null;
            c.password = password;
            c.bound_url = url;
            c.updated_at = updated.updated_at ?? new Date().toISOString();
          }
        });
      }
      return updated;
    },
  });

  const remove = defineOperation({
    name: 'registries.delete',
    input: SlugParams,
    resource: aboutRegistry,
    prepare: ({ slug }) => {
      const registry = custom(slug);
      const users = credentials.data.credentials.filter((c) => c.registry === slug).length;
      if (users > 0) throw errors.conflict(`registry '${slug}' is used by ${users} credential(s)`, 'REGISTRY_IN_USE');
      return { value: slug, preview: { changes: [{ type: 'registry', id: slug, actions: ['delete'], before: registry }] } };
    },
    apply: async (slug) => {
      await catalog.custom.update((d) => {
        d.registries = d.registries.filter((r) => r.slug !== slug);
      });
      return slug;
    },
  });

  return { create, update, remove };
}
