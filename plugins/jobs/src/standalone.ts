/**
 * A jobs service of a plugin's own, for a plugin whose long work must run whether or not the jobs plugin is enabled
 * (the docker plugin's image pulls, which clients followed before the jobs plugin existed): the same implementation
 * (records, output, cancel, timeout, `interrupted` after a restart), kept in that plugin's own journal and reachable
 * only through that plugin's routes. With the jobs plugin enabled, use its service (`deps.jobs`) instead.
 */
import type { PluginContext } from '@agent/sdk';
import type { JobsService } from './api.js';
import { Jobs } from './jobs.js';

export function standaloneJobs(ctx: PluginContext, options: { journal?: string; timeoutSeconds?: number } = {}): JobsService & { stopAll(): Promise<void> } {
  const jobs = new Jobs(ctx.store.journal(options.journal ?? 'jobs'), {
    log: ctx.log,
    events: ctx.events,
    timeoutSeconds: () => options.timeoutSeconds ?? 3600,
  });
  ctx.onClose(() => jobs.stopAll());
  return jobs;
}
