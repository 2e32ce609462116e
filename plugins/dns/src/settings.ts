/**
 * The dns settings (`PUT /api/settings`, section `dns`) and the server's API key, kept sealed in the settings
 * document: generated at the first start when empty, and a key set in clear is sealed right after the change.
 */
import { randomBytes } from 'node:crypto';
import { Type, type PluginContext } from '@agent/sdk';

const Settings = Type.Object({
  api_url: Type.String({
    default: 'http://127.0.0.1:8081',
    pattern: '^https?://[A-Za-z0-9.:\\[\\]_-]+(/[A-Za-z0-9._~/-]*)?$',
    description: 'base URL of the PowerDNS HTTP API',
  }),
  api_key: Type.String({ default: '', maxLength: 512, description: 'PowerDNS API key (generated when empty; stored encrypted)' }),
  server_id: Type.String({ default: 'localhost', pattern: '^[A-Za-z0-9._-]{1,64}$', description: 'PowerDNS server id' }),
  default_nameservers: Type.Array(Type.String({ pattern: '^[A-Za-z0-9_.-]{1,254}$' }), {
    default: [],
    maxItems: 10,
    description: 'name servers of new zones when a request gives none',
  }),
  default_ttl: Type.Integer({ default: 3600, minimum: 1, maximum: 2147483647, description: 'TTL of record sets given without one' }),
});

export async function dnsSettings(ctx: PluginContext) {
  const settings = ctx.settings(Settings, { secret: ['api_key'] });
  const sealIfClear = async (value: string) => {
    if (value && !value.startsWith('v1.')) await settings.set({ api_key: ctx.sealer.seal(value) });
  };
  if (!settings.get().api_key) await settings.set({ api_key: ctx.sealer.seal(randomBytes(24).toString('base64url')) });
  else await sealIfClear(settings.get().api_key);
  settings.onChange((v) => {
    void sealIfClear(v.api_key).catch((err) => ctx.log.error('could not seal the DNS API key', { error: String(err) }));
  });
  /** The key in clear (a key that does not open is used as it is). */
  const apiKey = () => {
    const stored = settings.get().api_key;
    try {
      return stored.startsWith('v1.') ? ctx.sealer.open(stored) : stored;
    } catch {
      return stored;
    }
  };
  return { settings, apiKey };
}

export type DnsSettings = Awaited<ReturnType<typeof dnsSettings>>;
