/**
 * The `infrastructure` service: shared services the agent keeps outside user deployments (proxy network, shared
 * database, cache, DNS server), each a compose project made from a template (provided by the infrastructure
 * plugin). Unknown names throw HttpError 404.
 */
import { createServiceRef, mergeErrors, type ErrorCodes } from '@agent/sdk';
import { COMPOSE_ERRORS, type ContainerHealth, type LogLine } from '@agent/plugin-docker/api';

/**
 * What a change of a service answers (configure, start, stop, restart), for the `errors` of routes that make one:
 * its settings (400 naming the field), a shared network not stopped, compose run through the guard on the engine,
 * compose failing.
 */
export const INFRASTRUCTURE_ERRORS: ErrorCodes = mergeErrors(COMPOSE_ERRORS, { 400: ['NOT_STOPPABLE'], 502: ['COMPOSE_FAILED'] });

export type InfrastructureState = 'running' | 'stopped' | 'partial' | 'starting' | 'failed' | 'not_created';

export interface InfrastructurePort {
  service: string;
  /** Host address and port, null when the port is not published. */
  host_ip: string | null;
  host_port: number | null;
  container_port: number;
  protocol: string;
}

export interface InfrastructureStatus {
  name: string;
  description: string;
  /** Template the project was made from. */
  template: string;
  status: InfrastructureState;
  /** Worst health of its containers (`none` when none has a health check or none runs). */
  health: ContainerHealth;
  /** Whether it is started with the agent. */
  enabled: boolean;
  services: { name: string; status: string; health: ContainerHealth; container_id: string | null; image: string | null }[];
  ports: InfrastructurePort[];
  /** Shared networks it is attached to. */
  networks: string[];
  /** Settings of its template (secrets masked). */
  settings: Record<string, string | number | boolean>;
}

export interface InfrastructureService {
  list(): Promise<InfrastructureStatus[]>;
  get(name: string): Promise<InfrastructureStatus>;
  /** Merges template settings (validated by the template) and rewrites the project; running projects are recreated. */
  configure(name: string, settings: Record<string, string | number | boolean>): Promise<InfrastructureStatus>;
  /** Starts (creating the project first when needed); `settings` are merged as with `configure`. */
  start(name: string, options?: { settings?: Record<string, string | number | boolean> }): Promise<InfrastructureStatus>;
  stop(name: string): Promise<InfrastructureStatus>;
  restart(name: string): Promise<InfrastructureStatus>;
  logs(name: string, options?: { tail?: number; filter?: string; service?: string }): Promise<(LogLine & { service: string })[]>;
  /** The shared networks deployments may join (created on demand). */
  networks(): { name: string; description: string }[];
}

export const infrastructureService = createServiceRef<InfrastructureService>('infrastructure', 'shared infrastructure services');
