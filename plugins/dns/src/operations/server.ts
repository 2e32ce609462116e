/**
 * The DNS server's controls as operations: enable, disable and restart the `dns` infrastructure service. `prepare`
 * checks that the infrastructure plugin is there to run it (503 otherwise); `apply` starts, stops or reconfigures
 * and restarts it, handing it the API key and port this plugin talks to, and answers the server's status.
 */
import { defineOperation, errors, Type } from '@agent/sdk';
import type { InfrastructureService } from '@agent/plugin-infrastructure/api';
import type { DnsSettings } from '../settings.js';
import { DNS_SERVICE, type ServerStatusOf } from '../status.js';

export const SERVER_VERBS = ['enable', 'disable', 'restart'] as const;
export type ServerVerb = (typeof SERVER_VERBS)[number];

export type ServerOperations = ReturnType<typeof serverOperations>;

export function serverOperations(infrastructure: () => InfrastructureService | undefined, { settings, apiKey }: DnsSettings, status: ServerStatusOf) {
  /** Settings the DNS infrastructure template gets from here: the API key and the API port of api_url. */
  const serviceSettings = () => {
    const url = new URL(settings.get().api_url);
    return { api_key: apiKey(), api_port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)) };
  };
  const run: Record<ServerVerb, (i: InfrastructureService) => Promise<unknown>> = {
    enable: (i) => i.start(DNS_SERVICE, { settings: serviceSettings() }),
    disable: (i) => i.stop(DNS_SERVICE),
    restart: async (i) => {
      await i.configure(DNS_SERVICE, serviceSettings());
      return i.restart(DNS_SERVICE);
    },
  };
  const control = (verb: ServerVerb) =>
    defineOperation({
      name: `dns.${verb}`,
      input: Type.Object({}),
      resource: () => ({ type: 'infrastructure', id: DNS_SERVICE }),
      prepare: () => {
        const service = infrastructure();
        if (!service)
          throw errors.unavailable('the DNS server is controlled through the infrastructure plugin, which is not enabled', 'INFRASTRUCTURE_UNAVAILABLE');
        return { value: service, preview: { summary: `${verb} the DNS server`, changes: [{ type: 'infrastructure', id: DNS_SERVICE, actions: ['update'] }] } };
      },
      apply: async (service) => {
        await run[verb](service);
        return status();
      },
    });
  return { enable: control('enable'), disable: control('disable'), restart: control('restart') };
}
