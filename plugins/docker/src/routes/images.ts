/**
 * 4.4 images: list, pull (202 + job), delete (409 while a container uses it). Images are global (shared by every
 * deployment, and a list names the deployments using each): every route needs a principal with global scope.
 */
import { errors, reply, Type, type PluginContext, compareText } from '@agent/sdk';
import type { DockerEngine } from '../engine.js';
import { Image, PullJob } from '../schemas.js';
import { notFound, type PullJobs } from '../pull-jobs.js';
import { summaryFromList } from '../mapping.js';

const IMAGE_REF = '^(?!.*\\.\\.)[a-z0-9][a-z0-9._/:@-]{0,254}$';
const IMAGE_ID = Type.String({
  pattern: '^(?!.*\\.\\.)[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$',
  description: 'image id (sha256:…, short id) or reference (name:tag); URL-encode slashes',
});

export function imageRoutes(ctx: PluginContext<any>, engine: DockerEngine, pulls: PullJobs): void {
  const listImages = async () => {
    const [images, raw] = await Promise.all([
      engine.call('images', () => engine.client.listImages({ all: false })),
      engine.call('containers', () => engine.client.listContainers({ all: true })),
    ]);
    const byImage = new Map<string, ReturnType<typeof summaryFromList>[]>();
    for (const rc of raw) {
      const list = byImage.get(rc.ImageID) ?? [];
      list.push(summaryFromList(rc));
      byImage.set(rc.ImageID, list);
    }
    return images.map((img) => {
      const users = byImage.get(img.Id) ?? [];
      const deployments = [...new Set(users.map((c) => c.deployment).filter((d): d is string => d !== null))].sort();
      return {
        id: img.Id,
        tags: (img.RepoTags ?? []).filter((t) => t !== '<none>:<none>'),
        digests: (img.RepoDigests ?? []).filter((d) => d !== '<none>@<none>'),
        size: img.Size,
        created_at: new Date(img.Created * 1000).toISOString(),
        containers: users.map((c) => c.name).sort(),
        in_use: users.length > 0,
        deployment: deployments[0] ?? null,
        deployments,
      };
    });
  };

  ctx.route({
    method: 'GET',
    path: '/images',
    permission: 'images:read',
    operationId: 'images.list',
    tag: 'images',
    summary: 'List images',
    description: 'Each image names the deployments whose containers use it (`deployment` is the first of them). Global scope only.',
    response: Type.Array(Image),
    handler: async () => {
      engine.assertAvailable();
      return (await listImages()).sort((a, b) => compareText(a.tags[0] ?? a.id, b.tags[0] ?? b.id));
    },
  });

  ctx.route({
    method: 'POST',
    path: '/images/pull',
    permission: 'images:write',
    operationId: 'images.pull',
    tag: 'images',
    status: 202,
    summary: 'Pull an image (background job)',
    description:
      'Answers 202 with a job of the jobs service: follow it with `GET /api/images/pulls/:id` (or `GET /api/jobs/:id`, its stream `/api/jobs/:id/stream`), stop it with `POST /api/jobs/:id/cancel` (the engine connection is closed: the engine stops the pull). Registry credentials come from the credentials service when one matches the registry.',
    body: Type.Object({
      image: Type.String({ pattern: IMAGE_REF, description: 'image reference, e.g. `nginx:1.27` or `registry.example.com/team/app:2`; `:latest` when no tag' }),
    }),
    response: Type.Object({ job_id: Type.String(), image: Type.String(), status: Type.String() }),
    errors: { 503: ['DOCKER_UNAVAILABLE'] },
    handler: (req) => {
      const job = pulls.start(req.body.image, req.principal);
      return reply.accepted({ job_id: job.id, image: job.image, status: job.status }, `pulling ${job.image}`);
    },
  });

  ctx.route({
    method: 'GET',
    path: '/images/pulls',
    permission: 'images:read',
    operationId: 'images.pulls',
    tag: 'images',
    summary: 'Recent image pull jobs (the newest 100 pull jobs of the jobs service)',
    response: Type.Array(PullJob),
    handler: () => pulls.list(),
  });

  ctx.route({
    method: 'GET',
    path: '/images/pulls/:id',
    permission: 'images:read',
    operationId: 'images.pullStatus',
    tag: 'images',
    summary: 'One image pull job: status and progress',
    // Any id-like text: an unknown one (or one of another kind of job) is 404 like a missing one.
    params: Type.Object({ id: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', description: 'the job id `POST /api/images/pull` answered' }) }),
    response: PullJob,
    handler: (req) => {
      const job = pulls.get(req.params.id);
      if (!job) throw notFound(req.params.id);
      return job;
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/images/:id',
    permission: 'images:write',
    operationId: 'images.delete',
    tag: 'images',
    summary: 'Delete an image',
    description: 'Refused with 409 `IMAGE_IN_USE` while any container (running or stopped) uses it.',
    params: Type.Object({ id: IMAGE_ID }),
    query: Type.Object({ force: Type.Optional(Type.Boolean({ default: false, description: 'remove even when several tags point to it' })) }),
    response: Type.Object({ id: Type.String(), deleted: Type.Array(Type.String()), untagged: Type.Array(Type.String()) }),
    errors: { 409: ['IMAGE_IN_USE'] },
    handler: async (req) => {
      engine.assertAvailable();
      const inspected = await engine.call(`image '${req.params.id}'`, () => engine.client.getImage(req.params.id).inspect());
      const byId = req.params.id.startsWith('sha256:') || /^[0-9a-f]{12,64}$/.test(req.params.id);
      // Removing one of several tags only untags: the image stays, so its containers do not matter.
      const untagOnly = !byId && (inspected.RepoTags ?? []).length > 1;
      const users = untagOnly ? undefined : (await listImages()).find((i) => i.id === inspected.Id);
      if (users?.in_use) {
        // Global principals only reach this route: they see every deployment.
        throw errors.conflict(
          `image '${req.params.id}' is used by ${users.containers.length} container(s)${users.deployments.length ? ` of ${users.deployments.join(', ')}` : ''}`,
          'IMAGE_IN_USE',
          { containers: users.containers.length },
        );
      }
      // Removing by tag only untags when other tags remain; by id needs force then.
      const target = byId ? inspected.Id : req.params.id;
      const result = (await engine.call(`image '${req.params.id}'`, () => engine.client.getImage(target).remove({ force: req.query.force ?? false }))) as {
        Deleted?: string;
        Untagged?: string;
      }[];
      return reply.ok(
        {
          id: inspected.Id,
          deleted: result.filter((r) => r.Deleted).map((r) => r.Deleted!),
          untagged: result.filter((r) => r.Untagged).map((r) => r.Untagged!),
        },
        `image ${req.params.id} deleted`,
      );
    },
  });
}
