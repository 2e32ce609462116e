/**
 * The `deployments` service: compose deployments as other plugins see them (provided by the deployments plugin).
 * Names are validated by the provider; unknown names throw HttpError 404.
 */
import { createServiceRef } from '@agent/sdk';
import type { ContainerHealth, ContainerSummary } from '@agent/plugin-docker/api';
import type { Principal, Static } from '@agent/sdk';
import type { CreateDeployment } from './schemas.js';

export type DeploymentStatus = 'running' | 'stopped' | 'partial' | 'failed' | 'unknown';

export interface DeploymentServiceState {
  name: string;
  /** running, exited, created, … or `missing` when the service has no container. */
  status: string;
  health: ContainerHealth;
  container_id: string | null;
  container_name: string | null;
  image: string | null;
  /** Swarm deployments: tasks running and wanted, errors of recent tasks, the engine's rolling update. */
  replicas?: { running: number; desired: number };
  errors?: string[];
  update?: { state: string; message: string | null } | null;
}

export interface DeploymentInfo {
  name: string;
  /** Absolute folder of the deployment. */
  path: string;
  status: DeploymentStatus;
  created_at: string;
  services: DeploymentServiceState[];
  /** Absolute paths of the compose file and the `.env` file. */
  compose_file: string;
  env_file: string;
  /** Where it runs: compose on this host, or a Docker Swarm stack. */
  runtime?: 'compose' | 'swarm';
}

/**
 * A create as other plugins ask for it: the fields of `POST /api/deployments` (one schema), with `exceptions`: the
 * host-safety exceptions the plugin gives its own deployment (never from a request).
 */
export type ServiceCreateInput = Omit<Static<typeof CreateDeployment>, 'template' | 'host_safety_exceptions'> & { exceptions?: string[] };

export interface DeploymentsService {
  /** Every deployment, from the state cache (no engine call). */
  list(): DeploymentInfo[];
  get(name: string): DeploymentInfo | undefined;
  /** The folder where deployments live. */
  root(): string;
  /** The compose file as written, and compose's checked model of it (`services`, `volumes`, `networks`, …: what runs). */
  compose(name: string): Promise<{ content: string; parsed: Record<string, any> }>;
  /** Values of the deployment's `.env` (secrets in clear: never return them to clients). */
  env(name: string): Promise<Record<string, string>>;
  /** Sets (string) or removes (null) `.env` variables; recreates running services when `recreate`. */
  setEnv(name: string, vars: Record<string, string | null>, options?: { recreate?: boolean }): Promise<void>;
  /** The container of one compose service (null when it has none). */
  serviceContainer(name: string, service: string): Promise<ContainerSummary | null>;
  /**
   * Where the proxy reaches a swarm deployment's service on its container port `port`: `tasks`, the `ip:port` of its
   * tasks running on this node (past their health check), on the engine's gateway bridge; `mesh`, the routing-mesh
   * port the service publishes for `port` (ingress mode, on every node's addresses), or null. Null for a compose
   * deployment (its containers: `serviceContainer`).
   */
  swarmUpstream(name: string, service: string, port: number): Promise<{ tasks: string[]; mesh: number | null } | null>;
  /** `exceptions`: host-safety exceptions the deployment gets (a plugin's own deployments; never from a request). */
  create(input: ServiceCreateInput, principal: Principal | null): Promise<DeploymentInfo>;
  start(name: string): Promise<void>;
  stop(name: string): Promise<void>;
  restart(name: string): Promise<void>;
  /** Starts some services of a deployment (checked like any start), e.g. a database to restore into. */
  startServices(name: string, services: string[]): Promise<void>;
  /** Removes the deployment (compose down); the folder is deleted only with `remove_files`. */
  remove(name: string, options?: { remove_files?: boolean; remove_volumes?: boolean }): Promise<void>;
  /** Re-reads the folder (after files were replaced, e.g. by a restore) and refreshes the state cache. */
  refresh(name: string): Promise<void>;
}

export const deploymentsService = createServiceRef<DeploymentsService>('deployments', 'compose deployments');

/** A service of a deployment that a domain of the proxy routes to. */
export interface RoutedService {
  service: string;
  /** Null when the proxy can point this service at another container; otherwise why it cannot. */
  unswitchable: string | null;
}

/**
 * How a start-first redeploy moves a service's traffic from its old container to the new one: the proxy (the
 * edge plugin provides it) routes to the container `DeploymentsService.serviceContainer` answers, which the
 * redeploy holds on the container it chose while it switches. Declared here rather than in the edge's package:
 * the edge depends on this one, and the deployments plugin takes it as an optional dependency (without the edge,
 * every service falls back to `recreate`).
 */
export interface DeploymentUpstreams {
  /** The services of a deployment its domains route to (no engine call). */
  routed(deployment: string): RoutedService[];
  /**
   * Renders the proxy's configuration again with the containers `serviceContainer` answers now and reloads nginx
   * (connections in progress are kept by the old workers); resolves once the new workers serve. Rejects like any
   * change of the proxy (502 PROXY_RELOAD_FAILED, 503 NGINX_UNAVAILABLE, …), leaving the previous configuration.
   */
  refresh(deployment: string): Promise<void>;
}

export const deploymentUpstreams = createServiceRef<DeploymentUpstreams>('deployment-upstreams', "the proxy's routes to deployments' containers");

declare module '@agent/sdk' {
  interface AgentEvents {
    /** `created_by`: the principal that asked for it (it gets admin access to it), null for the agent itself. */
    'deployment.created': { name: string; created_by: string | null };
    'deployment.updated': { name: string };
    /**
     * What hangs on the name must not pass to a new deployment of that name: remove it, or keep it under
     * `retired_as` (`<name>~<time>`, never a valid deployment name, so only global principals reach it).
     */
    'deployment.deleted': { name: string; removed_files: boolean; retired_as: string };
    'deployment.started': { name: string };
    'deployment.stopped': { name: string };
    'deployment.failed': { name: string; error: string };
  }
}

/** How a deployment's `.env` is read (as compose reads it), for plugins that read one from elsewhere (an archive). */
export { parseEnv } from './env-file.js';
