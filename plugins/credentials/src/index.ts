/**
 * credentials: registry configurations and stored credentials. Provides the `credentials` service, through which
 * image pulls (docker plugin) and compose deployments find the credential of an image's registry.
 */
import { definePlugin, compareText } from '@agent/sdk';
import { credentialsService, type CredentialsService } from './api.js';
import { currentUrl, isBound, type CredentialsDoc } from './credentials.js';
import { credentialOperations } from './operations/credentials.js';
import { registryOperations } from './operations/registries.js';
import { imageRegistryHost, RegistryCatalog, type RegistriesDoc } from './registries.js';
import { credentialRoutes } from './routes/credentials.js';
import { registryRoutes } from './routes/registries.js';

export default definePlugin({
  name: 'credentials',
  version: '0.1.0',
  description: 'Registry configurations and stored credentials (encrypted at rest, masked, tested against the registry)',
  // Global: registries and their credentials serve every deployment's pulls; only principals with global scope reach them.
  resources: {
    credentials: { description: 'stored credentials (passwords never shown; global)', operator: 'write', viewer: 'none', owner: 'global' },
    registries: { description: 'registry configurations (global)', operator: 'write', viewer: 'read', owner: 'global' },
  },
  provides: { credentials: credentialsService },

  async setup(ctx) {
    const catalog = new RegistryCatalog(await ctx.store.document<RegistriesDoc>({ registries: [] }, 'registries'));
    // The whole document is sealed with the agent's data key: nothing of it is readable on disk.
    const doc = await ctx.store.secureDocument<CredentialsDoc>({ next_id: 1, credentials: [] }, 'credentials');
    // Credentials stored before secrets were bound to their URL: bound to where their registry answers now.
    if (doc.data.credentials.some((c) => !c.bound_url)) {
      await doc.update((d) => {
        for (const c of d.credentials) c.bound_url ||= currentUrl(catalog, c) ?? '';
      });
    }
    // Each change is an operation (src/operations), run by its route (src/routes): checks in `prepare`, the change in `apply`.
    registryRoutes(ctx, catalog, registryOperations(catalog, doc));
    credentialRoutes(ctx, doc, catalog, credentialOperations(doc, catalog));

    const service: CredentialsService = {
      async registryAuth(imageRef) {
        const host = imageRegistryHost(imageRef);
        const slugs = new Set(catalog.forHost(host).map((r) => r.slug));
        // Several credentials for one registry: the one that last tested valid, else the newest.
        // A credential whose registry moved since its password was entered is not sent there.
        const candidates = doc.data.credentials
          .filter((c) => slugs.has(c.registry) && isBound(catalog, c))
          .sort((a, b) => Number(b.last_test?.valid ?? false) - Number(a.last_test?.valid ?? false) || compareText(b.updated_at, a.updated_at));
        const c = candidates[0];
        if (!c) return null;
        return { username: c.username, password: c.password, serveraddress: host === 'docker.io' ? 'https://index.docker.io/v1/' : host };
      },
    };
    return { provides: { credentials: service } };
  },
});
