/**
 * credentials: registry configurations and stored credentials. Provides the `credentials` service, through which
 * image pulls (docker plugin) and compose deployments find the credential of an image's registry.
 */
import { credentialsService, definePlugin, type CredentialsService, compareText } from '@agent/sdk';
import { registerCredentialRoutes, type CredentialsDoc } from './credential-routes.js';
import { imageRegistryHost, RegistryCatalog, type RegistriesDoc } from './registries.js';
import { registerRegistryRoutes } from './registry-routes.js';

export default definePlugin({
  name: 'credentials',
  version: '0.1.0',
  description: 'Registry configurations and stored credentials (encrypted at rest, masked, tested against the registry)',
  resources: {
    credentials: { description: 'stored credentials (passwords never shown)', operator: 'write', viewer: 'none' },
    registries: { description: 'registry configurations', operator: 'write', viewer: 'read' },
  },
  provides: [credentialsService],

  async setup(ctx) {
    const catalog = new RegistryCatalog(await ctx.store.document<RegistriesDoc>({ registries: [] }, 'registries'));
    // The whole document is sealed with the agent's data key: nothing of it is readable on disk.
    const doc = await ctx.store.secureDocument<CredentialsDoc>({ next_id: 1, credentials: [] }, 'credentials');
    registerRegistryRoutes(ctx, catalog, (slug) => doc.data.credentials.filter((c) => c.registry === slug).length);
    registerCredentialRoutes(ctx, doc, catalog);

    const service: CredentialsService = {
      async registryAuth(imageRef) {
        const host = imageRegistryHost(imageRef);
        const slugs = new Set(catalog.forHost(host).map((r) => r.slug));
        // Several credentials for one registry: the one that last tested valid, else the newest.
        const candidates = doc.data.credentials
          .filter((c) => slugs.has(c.registry))
          .sort((a, b) => Number(b.last_test?.valid ?? false) - Number(a.last_test?.valid ?? false) || compareText(b.updated_at, a.updated_at));
        const c = candidates[0];
        if (!c) return null;
        return { username: c.username, password: c.password, serveraddress: host === 'docker.io' ? 'https://index.docker.io/v1/' : host };
      },
    };
    ctx.services.provide(credentialsService, service);
  },
});
