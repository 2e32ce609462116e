/** What route modules share: the plugin context, the engine and the services it uses. */
import type { DeploymentsService, DockerService, PluginContext } from '@agent/sdk';
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
