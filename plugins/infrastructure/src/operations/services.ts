/**
 * Changes of the infrastructure services as operations: configure, start, stop, restart. `prepare` checks what
 * can be checked before anything runs — the service exists (404), the settings fit its template (400 naming the
 * field), a shared network is not stopped (400 `NOT_STOPPABLE`), the engine answers (503) — and changes nothing;
 * `apply` runs the manager, which takes the service's lock and writes, renders and runs compose. A refused request
 * changes nothing either, but for the secrets a configuration generates first (see `refused` below).
 */
import { defineOperation, type PlanChange } from '@agent/sdk';
import type { InfrastructureManager } from '../manager.js';
import { ConfigureInput, NameParams, StartInput } from '../schemas.js';

const aboutService = ({ name }: { name: string }) => ({ type: 'infrastructure', id: name });
const lifecycle = (name: string): PlanChange[] => [{ type: 'infrastructure', id: name, actions: ['update'] }];

export type ServiceOperations = ReturnType<typeof serviceOperations>;

export function serviceOperations(manager: InfrastructureManager) {
  const configure = defineOperation({
    name: 'infrastructure.configure',
    input: ConfigureInput,
    resource: aboutService,
    prepare: ({ name, settings }) => {
      const { before, after } = manager.plannedSettings(name, settings);
      return { value: { name, settings }, preview: { changes: [{ type: 'infrastructure', id: name, actions: ['update'], before, after }] } };
    },
    // The service's secrets are generated at its first configuration, a refused one included (as before operations):
    // prepare changes nothing, so that part of a refused request is done here (never for a preview).
    refused: ({ name }) => manager.ensureService(name),
    apply: ({ name, settings }) => manager.configure(name, settings),
  });

  const start = defineOperation({
    name: 'infrastructure.start',
    input: StartInput,
    resource: aboutService,
    prepare: ({ name, settings }) => {
      manager.template(name);
      const planned = settings ? manager.plannedSettings(name, settings) : undefined;
      manager.assertEngine();
      return {
        value: { name, settings },
        preview: {
          summary: `start ${name}`,
          changes: [{ type: 'infrastructure', id: name, actions: ['update'], before: planned?.before, after: planned?.after }],
        },
      };
    },
    // A start with settings configures first: refused, it leaves the secrets generated as a refused configuration does.
    refused: ({ name, settings }) => (settings && Object.keys(settings).length ? manager.ensureService(name) : undefined),
    apply: ({ name, settings }) => manager.start(name, { settings }),
  });

  const stop = defineOperation({
    name: 'infrastructure.stop',
    input: NameParams,
    resource: aboutService,
    prepare: ({ name }) => {
      manager.checkStop(name);
      return { value: name, preview: { summary: `stop ${name}`, changes: lifecycle(name) } };
    },
    apply: (name) => manager.stop(name),
  });

  const restart = defineOperation({
    name: 'infrastructure.restart',
    input: NameParams,
    resource: aboutService,
    prepare: ({ name }) => {
      manager.template(name);
      manager.assertEngine();
      return { value: name, preview: { summary: `recreate and restart ${name}`, changes: lifecycle(name) } };
    },
    apply: (name) => manager.restart(name),
  });

  return { configure, start, stop, restart };
}
