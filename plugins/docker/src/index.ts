/**
 * docker: provides the `docker` service (the engine through dockerode, compose through its CLI) and the routes of
 * containers, images, volumes and networks. When no engine answers, the agent still starts: the service reports
 * unavailable and Docker-backed routes answer 503 DOCKER_UNAVAILABLE until a background check sees it again.
 */
import { join } from 'node:path';
import { definePlugin, optional, Type } from '@agent/sdk';
import { credentialsService } from '@agent/plugin-credentials/api';
import { jobsService } from '@agent/plugin-jobs/api';
import { standaloneJobs } from '@agent/plugin-jobs/standalone';
import { dockerService } from './api.js';
import { ENGINE_ERRORS } from './engine-errors.js';
import { connect } from './connection.js';
import { DockerEngine } from './engine.js';
import { dockerChecks } from './doctor.js';
import { detectCompose } from './compose/cli.js';
import { PullJobs } from './pull-jobs.js';
import { containerRoutes } from './routes/containers.js';
import { imageRoutes } from './routes/images.js';
import { networkRoutes, volumeRoutes } from './routes/volumes-networks.js';

export { DockerEngine } from './engine.js';

export default definePlugin({
  name: 'docker',
  version: '0.1.0',
  description: 'Docker engine and compose as a service; containers, images, volumes, networks',
  config: Type.Object({
    docker: Type.Object(
      {
        host: Type.String({ default: '', description: 'engine address (unix:///path or tcp://host:port); empty: DOCKER_HOST, else /var/run/docker.sock' }),
        compose: Type.Union([Type.Literal('auto'), Type.Literal('docker compose'), Type.Literal('docker-compose')], {
          default: 'auto',
          description: 'compose CLI; auto tries v2 then v1',
        }),
        check_interval: Type.Integer({ minimum: 1, maximum: 3600, default: 5, description: 'seconds between engine availability checks' }),
      },
      { default: {} },
    ),
  }),
  resources: {
    containers: {
      description: "Docker containers (those of a deployment's compose project belong to it; the others are global)",
      operator: 'write',
      viewer: 'read',
      owner: 'both',
    },
    images: { description: 'Docker images (global: shared by every deployment)', operator: 'write', viewer: 'read', owner: 'global' },
    volumes: {
      description: "Docker volumes (those of a deployment's compose project belong to it; creating one and the others are global)",
      operator: 'write',
      viewer: 'read',
      owner: 'both',
    },
    networks: {
      description: "Docker networks (those of a deployment's compose project belong to it; creating one and the others are global)",
      operator: 'write',
      viewer: 'read',
      owner: 'both',
    },
  },
  deps: { credentials: optional(credentialsService), jobs: optional(jobsService) },
  provides: { docker: dockerService },
  // Every route asks the engine something.
  errors: ENGINE_ERRORS,

  setup(ctx, deps) {
    const { docker, endpoint } = connect(ctx.config.docker.host);
    const choice = ctx.config.docker.compose;
    const engine = new DockerEngine({
      docker,
      dockerHost: endpoint.dockerHost,
      log: ctx.log,
      events: ctx.events,
      checkIntervalMs: ctx.config.docker.check_interval * 1000,
      composeRoot: join(ctx.dataDir, 'projects'),
      credentials: () => deps.credentials,
    });
    for (const check of dockerChecks(engine, choice)) ctx.doctor(check);
    ctx.events.on('agent.ready', () => void engine.detectCompose());
    // Pulls are jobs of the jobs plugin (listed, followed and cancelled at /api/jobs); an agent without it keeps
    // pulling through /api/images/pulls, with jobs of the same implementation in this plugin's own journal.
    let own: ReturnType<typeof standaloneJobs> | null = null;
    const pulls = new PullJobs(engine, () => deps.jobs ?? (own ??= standaloneJobs(ctx, { journal: 'pull-jobs' })), ctx.log);
    containerRoutes(ctx, engine);
    imageRoutes(ctx, engine, pulls);
    volumeRoutes(ctx, engine);
    networkRoutes(ctx, engine);
    ctx.log.info('docker engine endpoint', { endpoint: endpoint.describe });
    return {
      provides: { docker: engine },
      start: () => engine.start(() => detectCompose(choice)),
      stop: () => engine.stop(),
    };
  },
});
