/**
 * jobs: long work of every plugin as jobs of one model (`jobsService`): progress, output, a timeout (setting
 * `jobs.timeout`), cancel that stops the work within 5 s, a websocket that streams a job live, jobs listed per
 * deployment, and `interrupted` for a job the agent was running when it stopped.
 */
import { definePlugin, Type } from '@agent/sdk';
import { jobsService } from './api.js';
import { Jobs } from './jobs.js';
import { jobRoutes } from './routes/jobs.js';

export default definePlugin({
  name: 'jobs',
  version: '0.1.0',
  description: 'Long work as jobs: progress, output, timeout, cancel, live stream, interrupted after a restart',
  resources: {
    jobs: {
      description: 'jobs (those of a deployment belong to it: read and cancel them with access to it; the others are global)',
      operator: 'write',
      viewer: 'read',
      owner: 'both',
    },
  },
  provides: { jobs: jobsService },

  setup(ctx) {
    const settings = ctx.settings(
      Type.Object({
        timeout: Type.Integer({
          minimum: 10,
          maximum: 7 * 86400,
          default: 3600,
          description: 'seconds a job may run before it is stopped (a kind of job may set its own)',
        }),
      }),
    );
    const jobs = new Jobs(ctx.store.journal('jobs'), { log: ctx.log, events: ctx.events, timeoutSeconds: () => settings.get().timeout });
    jobRoutes(ctx, jobs);
    ctx.job({
      name: 'prune',
      cron: '23 * * * *',
      description: 'drops the oldest finished jobs beyond 2000',
      run: (run) => run.output(`${jobs.prune()} dropped`),
    });
    return { provides: { jobs }, stop: () => jobs.stopAll() };
  },
});
