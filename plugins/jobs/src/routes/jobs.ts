/**
 * `/api/jobs`: the jobs a principal may see (those of its deployments; global ones to global principals), one job
 * with its output, cancel, and `/api/jobs/:id/stream` (websocket): the job, its output so far, then every line and
 * progress update live, then the final record, and the socket closes.
 */
import { defineOperation, errors, operationRoute, reply, Type, visibleDeployments, type PluginContext } from '@agent/sdk';
import { JOB_STATUSES, JobView } from '../api.js';
import type { JobEvent, Jobs } from '../jobs.js';

const JobId = Type.Object({ id: Type.String({ pattern: '^job_[a-z0-9]{1,40}$', description: 'job id' }) });
const Line = Type.Object({
  seq: Type.Integer(),
  time: Type.String(),
  stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr'), Type.Literal('info')]),
  text: Type.String(),
});

export function jobRoutes(ctx: PluginContext, jobs: Jobs): void {
  /** The deployment of a job, for the kernel's checks: another tenant's job is as unknown as a missing one. */
  const deploymentOf = (id: string) => jobs.get(id)?.deployment ?? undefined;
  const find = (id: string) => {
    const job = jobs.get(id);
    if (!job) throw errors.notFound(`job '${id}' not found`);
    return job;
  };

  ctx.route({
    method: 'GET',
    path: '/jobs',
    permission: 'jobs:read',
    operationId: 'jobs.list',
    tenancy: 'filtered',
    summary: 'List jobs (newest first)',
    description: "A principal limited to its deployments sees their jobs only; global jobs (no deployment) are global principals'.",
    query: Type.Object({
      deployment: Type.Optional(Type.String({ maxLength: 80 })),
      kind: Type.Optional(Type.String({ maxLength: 80 })),
      status: Type.Optional(Type.Union(JOB_STATUSES.map((s) => Type.Literal(s)))),
      limit: Type.Integer({ minimum: 1, maximum: 500, default: 50 }),
      offset: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
    }),
    response: Type.Array(JobView),
    handler: (req) => {
      const { items, total } = jobs.list({ ...req.query, deployments: visibleDeployments(req.principal) });
      return reply.page(items, { total, limit: req.query.limit, offset: req.query.offset });
    },
  });

  ctx.route({
    method: 'GET',
    path: '/jobs/:id',
    permission: 'jobs:read',
    operationId: 'jobs.get',
    summary: 'One job, with the newest lines of its output',
    params: JobId,
    deployment: (req) => deploymentOf(req.params.id),
    response: Type.Intersect([JobView, Type.Object({ output: Type.Array(Line) })]),
    handler: (req) => ({ ...find(req.params.id), output: jobs.lines(req.params.id) }),
  });

  const cancel = defineOperation({
    name: 'jobs.cancel',
    input: JobId,
    resource: (input) => ({ type: 'job', id: input.id }),
    prepare: (input) => {
      const job = find(input.id);
      if (job.status !== 'pending' && job.status !== 'running') throw errors.conflict(`job '${job.id}' already ended (${job.status})`, 'JOB_ENDED');
      return {
        value: job.id,
        preview: {
          summary: `cancel ${job.kind} ${job.id}`,
          changes: [{ type: 'job', id: job.id, actions: ['update'], before: { status: job.status }, after: { status: 'cancelled' } }],
        },
      };
    },
    apply: (id, caller) => jobs.cancel(id, caller.principal),
  });
  ctx.route(
    operationRoute(cancel, {
      method: 'POST',
      path: '/jobs/:id/cancel',
      permission: 'jobs:write',
      summary: 'Cancel a job: its work stops within 5 s (its process is killed), and the record says what was left',
      params: JobId,
      deployment: (req) => deploymentOf(req.params.id),
      response: JobView,
      errors: { 409: ['JOB_ENDED'] },
      input: (req) => req.params,
      respond: (job) => reply.ok(job, `job ${job.id} ${job.status}`),
    }),
  );

  ctx.websocket({
    path: '/jobs/:id/stream',
    permission: 'jobs:read',
    operationId: 'jobs.stream',
    summary: 'Follow a job: {type:"job"}, its output so far as {type:"line"}, then lines and {type:"progress"} live, {type:"end", job} last',
    params: JobId,
    deployment: (req) => deploymentOf(req.params.id),
    handler: async (conn, req) => {
      const job = jobs.get(req.params.id);
      if (!job) return conn.close(1008, 'NOT_FOUND: no such job');
      await conn.send({ type: 'job', job });
      // Subscribed before the backlog is read; held events are sent after it, skipping lines it had: no gap, no
      // line twice.
      const held: JobEvent[] = [];
      let flushing = true;
      let last = 0;
      let sentEnd = false;
      let finished!: () => void;
      const ended = new Promise<void>((resolve) => (finished = resolve));
      const send = async (event: JobEvent) => {
        if (event.type === 'line') {
          if (event.line.seq <= last) return;
          last = event.line.seq;
          await conn.send({ type: 'line', ...event.line });
        } else if (event.type === 'progress') await conn.send({ type: 'progress', progress: event.progress });
        else {
          sentEnd = true;
          await conn.send({ type: 'end', job: event.job });
        }
      };
      const unsubscribe = jobs.subscribe(job.id, (event) => {
        if (flushing) held.push(event);
        else void send(event);
        if (event.type === 'end') finished();
      });
      if (!unsubscribe) finished();
      conn.signal.addEventListener('abort', () => {
        unsubscribe?.();
        finished();
      });
      for (const line of jobs.lines(job.id)) {
        last = line.seq;
        await conn.send({ type: 'line', ...line });
      }
      while (held.length) await send(held.shift()!);
      flushing = false;
      await ended;
      if (conn.signal.aborted) return;
      const final = jobs.get(job.id)!;
      if (!sentEnd) await conn.send({ type: 'end', job: final });
      conn.close(1000, final.status);
    },
  });
}
