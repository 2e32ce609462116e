/**
 * Changes of stored credentials as operations: create, update, delete, and the test (which logs in to the registry
 * and keeps the result). `prepare` checks the registry, the name and where the password may go (a credential moved
 * to another registry needs its password again; one whose registry moved is not tested); `apply` writes the sealed
 * document. Plans never show a password: a credential's change is marked sensitive.
 */
import { defineOperation, errors, type Document } from '@agent/sdk';
import { credentialView, findCredential, reentered, reentryRequired, type CredentialsDoc, type StoredCredential } from '../credentials.js';
import type { Registry, RegistryCatalog } from '../registries.js';
import { registryLogin } from '../registry-login.js';
import { CreateCredential, IdParams, UpdateCredentialInput } from '../schemas.js';

const aboutCredential = ({ id }: { id: number }) => ({ type: 'credential', id: String(id) });

/** What a plan of a credential's change shows; sensitive, so a plan read back hides it whole. */
const change = (id: string, action: 'create' | 'update' | 'delete', before?: unknown, after?: unknown) => ({
  type: 'credential',
  id,
  actions: [action],
  before,
  after,
  sensitive: true,
});

export type CredentialOperations = ReturnType<typeof credentialOperations>;

export function credentialOperations(doc: Document<CredentialsDoc>, catalog: RegistryCatalog) {
  const view = (c: StoredCredential) => credentialView(catalog, c);
  const assertRegistry = (slug: string): Registry => {
    const registry = catalog.get(slug);
    if (!registry) throw errors.badRequest(`body.registry: unknown registry '${slug}'`, 'UNKNOWN_REGISTRY', { field: 'registry' });
    return registry;
  };
  const assertNameFree = (name: string, except?: number) => {
    if (doc.data.credentials.some((c) => c.name === name && c.id !== except)) throw errors.conflict(`credential '${name}' exists`, 'CREDENTIAL_EXISTS');
  };

  const create = defineOperation({
    name: 'credentials.create',
    input: CreateCredential,
    resource: (input) => ({ type: 'credential', id: input.name }),
    prepare: (input) => {
      const registry = assertRegistry(input.registry ?? 'dockerhub');
      assertNameFree(input.name);
      if (!reentered(input.credentials.password))
        throw errors.badRequest('credentials.password: the mask is not a password', 'VALIDATION_FAILED', { field: 'credentials.password' });
      return { value: { input, registry }, preview: { changes: [change(input.name, 'create', undefined, { registry: registry.slug })] } };
    },
    apply: async ({ input, registry }) => {
      const now = new Date().toISOString();
      const created = await doc.update((d) => {
        const c: StoredCredential = {
          id: d.next_id++,
          name: input.name,
          type: 'registry',
          registry: registry.slug,
          username: input.credentials.username,
          password: input.credentials.password,
          description: input.description ?? '',
          created_at: now,
          updated_at: now,
          last_test: null,
          bound_url: catalog.apiBase(registry),
        };
        d.credentials.push(c);
        return c;
      });
      return view(created);
    },
  });

  const update = defineOperation({
    name: 'credentials.update',
    input: UpdateCredentialInput,
    resource: aboutCredential,
    prepare: (input) => {
      const current = findCredential(doc, input.id);
      const registry = assertRegistry(input.registry ?? current.registry);
      if (input.name) assertNameFree(input.name, current.id);
      if (input.registry !== undefined && input.registry !== current.registry && !reentered(input.credentials?.password)) {
        throw reentryRequired(
          `credential '${current.name}': moving it to registry '${input.registry}' sends its password to ${catalog.apiBase(registry)}; ` +
            'enter the password again in the same request (credentials.password)',
          [current.id],
        );
      }
      return {
        value: { input, registry },
        preview: { changes: [change(String(current.id), 'update', { registry: current.registry }, { registry: registry.slug })] },
      };
    },
    apply: async ({ input, registry }) => {
      const password = input.credentials?.password;
      const updated = await doc.update((d) => {
        const c = d.credentials.find((x) => x.id === input.id);
        if (!c) throw errors.notFound(`credential ${input.id} not found`);
        if (input.name !== undefined) c.name = input.name;
        if (input.registry !== undefined) c.registry = input.registry;
        if (input.description !== undefined) c.description = input.description;
        const username = input.credentials?.username;
        const secretChanged = (username !== undefined && username !== c.username) || (reentered(password) && password !== c.password);
        if (username !== undefined) c.username = username;
        if (reentered(password)) {
          c.password = password;
          c.bound_url = catalog.apiBase(registry);
        }
        // The last test says nothing about a changed username, password or registry.
        if (secretChanged || input.registry !== undefined) c.last_test = null;
        c.updated_at = new Date().toISOString();
        return c;
      });
      return view(updated);
    },
  });

  const remove = defineOperation({
    name: 'credentials.delete',
    input: IdParams,
    resource: aboutCredential,
    prepare: ({ id }) => {
      const c = findCredential(doc, id);
      return { value: c, preview: { changes: [change(String(c.id), 'delete', { name: c.name, registry: c.registry })] } };
    },
    apply: async (c) => {
      await doc.update((d) => {
        d.credentials = d.credentials.filter((x) => x.id !== c.id);
      });
      return c;
    },
  });

  const test = defineOperation({
    name: 'credentials.test',
    input: IdParams,
    resource: aboutCredential,
    prepare: ({ id }) => {
      const c = findCredential(doc, id);
      const registry = catalog.get(c.registry);
      if (!registry) throw errors.conflict(`registry '${c.registry}' of this credential no longer exists`, 'UNKNOWN_REGISTRY');
      const url = catalog.apiBase(registry);
      // The password goes only where it was entered.
      if (url !== c.bound_url) {
        throw reentryRequired(
          `credential '${c.name}': its password was entered for ${c.bound_url}, registry '${registry.slug}' now answers at ${url}; ` +
            'enter the password again (PUT /api/credentials/:id) before it is sent there',
          [c.id],
          409,
        );
      }
      return {
        value: { credential: c, registry: registry.slug, url },
        preview: { summary: `log in to ${url} as ${c.username}`, changes: [change(String(c.id), 'update')] },
      };
    },
    apply: async ({ credential: c, registry, url }, { signal }) => {
      const result = await registryLogin(url, c.username, c.password, signal);
      await doc.update((d) => {
        const stored = d.credentials.find((x) => x.id === c.id);
        if (stored) stored.last_test = { at: new Date().toISOString(), valid: result.valid, message: result.message };
      });
      return { ...result, registry, url };
    },
  });

  return { create, update, remove, test };
}
