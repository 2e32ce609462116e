/** 4.2 deployments: list, details, create, update, delete, start, stop, restart (mutations are plannable). */
import { join } from 'node:path';
import { deploymentName, errors, isHttpError, reply, Type, type PluginContext, type Principal } from '@agent/sdk';
import { TEMPLATE_ID as TEMPLATE_ID_RE } from '../templates.js';
import type { DeploymentManager, Entry } from '../manager.js';
import { Deployment, DeploymentDetails, EnvVars, Exceptions, HostSafetyReport, NameParams, Status } from '../schemas.js';
import { DEFAULT_COMPOSE, ENV_FILE, readFolderFile } from '../files.js';
import { parseEnv, redactEnv } from '../env-file.js';
import { previewCreate, previewDelete, previewLifecycle, previewUpdate } from '../plans.js';

const COMPOSE_CONTENT = Type.String({ minLength: 1, maxLength: 1024 * 1024, description: 'full text of the compose file (YAML)' });
const TEMPLATE_ID = Type.String({ pattern: TEMPLATE_ID_RE.source, description: 'template the deployment comes from (its kind: built-in log sources)' });

/** Host-safety exceptions are an admin's decision (the `host-safety:write` permission). */
function assertMayGrant(principal: Principal, exceptions: string[] | undefined): void {
  if (exceptions?.length && !principal.can('host-safety:write'))
    throw errors.forbidden("granting host-safety exceptions needs the permission 'host-safety:write'");
}

export function deploymentRoutes(ctx: PluginContext<any>, manager: DeploymentManager): void {
  const snapshotOf = (entry: Entry | undefined, name: string) => {
    const dir = entry?.dir ?? join(manager.root(), name);
    return { files: [join(dir, entry?.composeFile ?? DEFAULT_COMPOSE), join(dir, ENV_FILE)] };
  };

  /** The current status, straight from the engine (mutations must not act on a stale cache). */
  const currentStatus = async (entry: Entry) => {
    manager.opts.docker.assertAvailable();
    await manager.cache.reconcile();
    return manager.info(entry).status;
  };
  const assertCanStart = async (entry: Entry) => {
    const status = await currentStatus(entry);
    if (status === 'running') throw errors.conflict(`deployment '${entry.name}' is already running`, 'DEPLOYMENT_RUNNING', { status });
  };
  const assertCanStop = async (entry: Entry) => {
    const status = await currentStatus(entry);
    if (status === 'stopped' || status === 'failed')
      throw errors.conflict(`deployment '${entry.name}' is not running (${status})`, 'DEPLOYMENT_NOT_RUNNING', { status });
  };

  ctx.route({
    method: 'GET',
    path: '/deployments',
    permission: 'deployments:read',
    operationId: 'deployments.list',
    tenancy: 'filtered',
    tag: 'deployments',
    summary: 'List deployments',
    description: 'From the state cache (fed by engine events, reconciled periodically): no engine call per request.',
    query: Type.Object({ status: Type.Optional(Status) }),
    response: Type.Array(Deployment),
    handler: (req) => {
      // A principal that sees every deployment gets the list serialised once per change (the hot path).
      if (!req.query.status && req.principal.deploymentLevel('*') !== null)
        return reply.stream(manager.listJson(), { contentType: 'application/json; charset=utf-8' });
      return manager.list().filter((d) => req.principal.canAccessDeployment(d.name) && (!req.query.status || d.status === req.query.status));
    },
  });

  ctx.route({
    method: 'GET',
    path: '/deployments/:name',
    permission: 'deployments:read',
    operationId: 'deployments.get',
    tag: 'deployments',
    summary: 'One deployment: services, compose content, env (secrets redacted), containers and ports',
    params: NameParams,
    deployment: 'name',
    response: DeploymentDetails,
    handler: async (req) => {
      const entry = manager.require(req.params.name);
      // A file a container replaced with a symlink is not followed: its text is shown as empty, with the problem.
      const safely = (file: string) =>
        readFolderFile(entry.dir, file).catch((err: Error) => {
          problems.push(err.message);
          return null;
        });
      const problems: string[] = [];
      const [compose, env] = await Promise.all([safely(entry.composeFile), safely(ENV_FILE)]);
      const containers = manager.cache.containers(entry.name);
      const last = await manager.opts.docker.compose.lastChecked(entry.name).catch(() => null);
      return {
        ...manager.info(entry),
        compose_content: compose ?? '',
        env: redactEnv(parseEnv(env ?? '')),
        containers: containers.map((c) => ({
          id: c.id,
          name: c.name,
          service: c.service,
          image: c.image,
          state: c.state,
          status: c.status,
          health: c.health,
          created_at: c.created_at,
        })),
        ports: containers.flatMap((c) =>
          c.ports.map((port) => ({
            service: c.service,
            container: c.name,
            container_port: port.private,
            host_port: port.public,
            host_ip: port.ip,
            protocol: port.protocol,
          })),
        ),
        template: entry.record.template,
        host_safety: {
          policy: manager.opts.hostSafety() ? ('enforced' as const) : ('off' as const),
          exceptions: entry.record.exceptions,
          used: [...(last?.granted ?? [])],
        },
        file_problems: problems,
      };
    },
  });

  ctx.route({
    method: 'POST',
    path: '/deployments',
    permission: 'deployments:write',
    operationId: 'deployments.create',
    tenancy: 'create',
    tag: 'deployments',
    status: 201,
    creates: 'name',
    summary: 'Create a deployment',
    description:
      'Validates the YAML (400 `INVALID_YAML` with line and column) and the compose structure (400 `INVALID_COMPOSE`), applies the host-safety policy (400 `HOST_SAFETY`), writes the files atomically, grants the creator admin access, and starts it when `auto_start`. 409 `DEPLOYMENT_EXISTS` when the name is taken. If starting fails the deployment is kept and `start_error` says why.',
    body: Type.Object({
      name: deploymentName(),
      compose_content: COMPOSE_CONTENT,
      env_vars: Type.Optional(EnvVars),
      auto_start: Type.Optional(Type.Boolean({ default: false, description: 'start after creation' })),
      template: Type.Optional(TEMPLATE_ID),
      host_safety_exceptions: Type.Optional({
        ...Exceptions,
        default: [],
        description: `${Exceptions.description} granted with the creation (needs host-safety:write)`,
      }),
    }),
    response: Type.Intersect([Deployment, Type.Object({ start_error: Type.Union([Type.String(), Type.Null()]) })]),
    plan: {
      resource: (req) => ({ type: 'deployment', id: req.body.name }),
      preview: (req) => {
        assertMayGrant(req.principal, req.body.host_safety_exceptions);
        if (manager.entries.has(req.body.name)) throw errors.conflict(`deployment '${req.body.name}' already exists`, 'DEPLOYMENT_EXISTS');
        return previewCreate(manager, req.body, join(manager.root(), req.body.name));
      },
      snapshot: (req) => snapshotOf(manager.entries.get(req.body.name), req.body.name),
    },
    handler: async (req) => {
      assertMayGrant(req.principal, req.body.host_safety_exceptions);
      const { host_safety_exceptions: exceptions, ...body } = req.body;
      const result = await manager.createWithResult({ ...body, template: body.template ?? null, exceptions }, req.principal);
      return reply.created(
        { ...result.info, start_error: result.start_error },
        result.start_error
          ? `deployment ${req.body.name} created, but starting it failed`
          : `deployment ${req.body.name} created${req.body.auto_start ? ' and started' : ''}`,
      );
    },
  });

  ctx.route({
    method: 'PUT',
    path: '/deployments/:name',
    permission: 'deployments:write',
    operationId: 'deployments.update',
    tag: 'deployments',
    summary: 'Update the compose file and/or the environment',
    description: '`env_vars` replaces the whole `.env`. When the deployment runs, services whose configuration changed are recreated (`up -d`).',
    params: NameParams,
    deployment: 'name',
    body: Type.Object({ compose_content: Type.Optional(COMPOSE_CONTENT), env_vars: Type.Optional(EnvVars) }, { minProperties: 1 }),
    response: Type.Intersect([Deployment, Type.Object({ recreated: Type.Boolean({ description: 'running services were brought up to date' }) })]),
    plan: {
      resource: (req) => ({ type: 'deployment', id: req.params.name }),
      preview: async (req) => {
        const entry = manager.require(req.params.name);
        await manager.cache.reconcile();
        return previewUpdate(manager, entry, req.body);
      },
      snapshot: (req) => snapshotOf(manager.entries.get(req.params.name), req.params.name),
    },
    handler: async (req) => {
      const { info, recreated } = await manager.update(req.params.name, req.body);
      return reply.ok({ ...info, recreated }, `deployment ${req.params.name} updated${recreated ? ' and its services brought up to date' : ''}`);
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/deployments/:name',
    permission: 'deployments:write',
    operationId: 'deployments.delete',
    tag: 'deployments',
    deploymentLevel: 'admin',
    summary: 'Delete a deployment',
    description:
      'Compose down (containers and networks). The folder is kept unless `remove_files=true`; named volumes are kept unless `remove_volumes=true`. A kept folder is not rediscovered and can be reused by creating the same name.',
    params: NameParams,
    deployment: 'name',
    query: Type.Object({
      remove_files: Type.Optional(Type.Boolean({ default: false, description: 'delete the deployment folder' })),
      remove_volumes: Type.Optional(Type.Boolean({ default: false, description: 'delete the named volumes of the compose file' })),
    }),
    response: Type.Object({ name: Type.String(), removed_files: Type.Boolean(), removed_volumes: Type.Boolean() }),
    plan: {
      resource: (req) => ({ type: 'deployment', id: req.params.name }),
      preview: (req) => previewDelete(manager, manager.require(req.params.name), req.query.remove_files ?? false, req.query.remove_volumes ?? false),
      snapshot: (req) => snapshotOf(manager.entries.get(req.params.name), req.params.name),
    },
    handler: async (req) => {
      await manager.remove(req.params.name, { remove_files: req.query.remove_files ?? false, remove_volumes: req.query.remove_volumes ?? false });
      return reply.ok(
        { name: req.params.name, removed_files: req.query.remove_files ?? false, removed_volumes: req.query.remove_volumes ?? false },
        `deployment ${req.params.name} deleted`,
      );
    },
  });

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/host-safety',
    permission: 'deployments:read',
    operationId: 'deployments.hostSafety',
    tag: 'deployments',
    summary: "What the host-safety policy says about the deployment's files now",
    description:
      "Checks the current compose file and `.env` (compose's own model of them) against the policy: the exceptions granted, the ones the files use, and what is refused (`violations`, each with the exception an admin could grant).",
    params: NameParams,
    deployment: 'name',
    response: HostSafetyReport,
    handler: async (req) => {
      const entry = manager.require(req.params.name);
      const policy = manager.opts.hostSafety() ? ('enforced' as const) : ('off' as const);
      try {
        const checked = await manager.checkCurrent(entry);
        return { policy, exceptions: entry.record.exceptions, used: [...checked.granted], violations: checked.violations.map((v) => ({ ...v })), passes: true };
      } catch (err) {
        if (!isHttpError(err) || err.code !== 'HOST_SAFETY') throw err;
        return { policy, exceptions: entry.record.exceptions, used: [], violations: (err.extra?.violations ?? []) as never, passes: false };
      }
    },
  });

  ctx.route({
    method: 'PUT',
    path: '/deployments/:name/host-safety',
    permission: 'host-safety:write',
    operationId: 'deployments.setHostSafety',
    tag: 'deployments',
    deploymentLevel: 'admin',
    summary: 'Grant host-safety exceptions to a deployment (replaces the list)',
    description:
      'Each exception lets exactly one refused value through, as named in the `HOST_SAFETY` refusal, e.g. `volumes:/var/run/docker.sock` or `cap_add:NET_ADMIN`. Takes effect at the next start. Audited.',
    params: NameParams,
    deployment: 'name',
    body: Type.Object({ exceptions: Exceptions }),
    response: Type.Object({ name: Type.String(), exceptions: Type.Array(Type.String()) }),
    plan: {
      resource: (req) => ({ type: 'deployment', id: req.params.name }),
      preview: (req) => {
        const entry = manager.require(req.params.name);
        const next = [...new Set(req.body.exceptions)].sort();
        return {
          summary: `host-safety exceptions of ${entry.name}: ${next.length ? next.join(', ') : 'none'}`,
          changes: [{ type: 'host-safety', id: entry.name, actions: ['update'], before: { exceptions: entry.record.exceptions }, after: { exceptions: next } }],
        };
      },
      snapshot: (req) => ({ records: { exceptions: manager.entries.get(req.params.name)?.record.exceptions ?? null } }),
    },
    handler: async (req) => {
      const entry = manager.require(req.params.name);
      const exceptions = [...new Set(req.body.exceptions)].sort();
      await manager.saveRecord(entry, { exceptions });
      return reply.ok({ name: entry.name, exceptions }, `host-safety exceptions of ${entry.name} set (${exceptions.length})`);
    },
  });

  const lifecycle = [
    {
      action: 'start',
      check: assertCanStart,
      run: (n: string) => manager.start(n),
      done: 'started',
      describe: 'Start a deployment (409 `DEPLOYMENT_RUNNING` when it already runs)',
    },
    {
      action: 'stop',
      check: assertCanStop,
      run: (n: string) => manager.stop(n),
      done: 'stopped',
      describe: 'Stop a deployment (409 `DEPLOYMENT_NOT_RUNNING` when it does not run)',
    },
    {
      action: 'restart',
      check: async (e: Entry) => void (await currentStatus(e)),
      run: (n: string) => manager.restart(n),
      done: 'restarted',
      describe: 'Restart a deployment (starts what is not running)',
    },
  ] as const;
  for (const op of lifecycle) {
    ctx.route({
      method: 'POST',
      path: `/deployments/:name/${op.action}`,
      permission: 'deployments:write',
      operationId: `deployments.${op.action}`,
      tag: 'deployments',
      summary: op.describe,
      params: NameParams,
      deployment: 'name',
      response: Deployment,
      plan: {
        resource: (req) => ({ type: 'deployment', id: req.params.name }),
        preview: async (req) => {
          const entry = manager.require(req.params.name);
          await op.check(entry);
          return previewLifecycle(manager, entry, op.action);
        },
        snapshot: (req) => snapshotOf(manager.entries.get(req.params.name), req.params.name),
      },
      handler: async (req) => {
        const entry = manager.require(req.params.name);
        await op.check(entry);
        await op.run(entry.name);
        return reply.ok(manager.info(entry), `deployment ${entry.name} ${op.done}`);
      },
    });
  }
}
