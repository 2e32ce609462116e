/** What route modules share: the plugin context, the engine and the services it uses. */
import type { PluginContext } from '@agent/sdk';
import type { DeploymentsService } from '@agent/plugin-deployments/api';
import type { DockerService } from '@agent/plugin-docker/api';
import type { Edge } from './edge.js';
import type { EdgeConfig } from './config.js';

export interface Runtime {
  ctx: PluginContext<EdgeConfig>;
  edge: Edge;
  deployments(): DeploymentsService;
  docker(): DockerService | undefined;
  /** Obtains missing certificates for SSL domains in the background (set by the certificates module). */
  ensureCertificates(reason: string): void;
}
