/** What the operations and routes of the security plugin share. */
import { errors, type PluginSettings } from '@agent/sdk';
import type { DeploymentsService } from '@agent/plugin-deployments/api';
import type { TrafficStream } from '@agent/plugin-edge/api';
import type { SecuritySettings } from './config.js';
import type { SecurityEvents } from './events.js';
import type { Rules } from './rules.js';

export interface SecurityRuntime {
  rules: Rules;
  events: SecurityEvents;
  settings: PluginSettings<typeof SecuritySettings>;
  traffic: TrafficStream;
  deployments: DeploymentsService;
}

/** A deployment named in a body or query must exist (400 naming the field: it is a value, not the path). */
export function assertDeployment(rt: SecurityRuntime, name: string, field = 'deployment'): void {
  if (!rt.deployments.get(name)) throw errors.badRequest(`${field}: deployment '${name}' not found`, 'VALIDATION_FAILED', { field });
}
