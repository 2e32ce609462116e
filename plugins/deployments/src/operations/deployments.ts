/**
 * The changes of a deployment as operations: create, update, delete, start, stop, restart. `prepare` runs every
 * check (the manager's checks of the files and the name, and the request's own: who may grant exceptions, the state
 * a start or stop needs) and builds the plan preview from what they found; `apply` makes the change through the
 * manager, which takes the deployment's lock and checks again what may have changed meanwhile (the files, which a
 * container may rewrite; a name another request took). The routes, their `?plan=true` previews and plan applies
 * all run these, so a preview answers what the request would.
 */
import { join } from 'node:path';
import { defineOperation, errors, type PlanSnapshot, type Principal } from '@agent/sdk';
import type { DeploymentManager } from '../manager.js';
import type { Entry } from '../records.js';
import { CreateDeploymentRequest, DeleteDeploymentInput, NameParams, UpdateDeploymentInput } from '../schemas.js';
import { DEFAULT_COMPOSE, ENV_FILE } from '../files.js';
import { previewCreate, previewDelete, previewLifecycle, previewUpdate } from '../plans.js';
import { requireBackups } from '../deploy/backups.js';
import type { TemplateCatalog } from '../templates.js';
import { createForm, fromTemplate, templateFiles } from '../template-create.js';

export type DeploymentOperations = ReturnType<typeof deploymentOperations>;

/** Host-safety exceptions are an admin's decision (the `host-safety:write` permission). */
function assertMayGrant(principal: Principal, exceptions: string[] | undefined): void {
  if (exceptions?.length && !principal.can('host-safety:write'))
    throw errors.forbidden("granting host-safety exceptions needs the permission 'host-safety:write'");
}

/** A create by template where the plugin has no catalogue (another plugin's operations): 404, as for an unknown one. */
function requireCatalog(catalog: TemplateCatalog | undefined): TemplateCatalog {
  if (!catalog) throw errors.notFound('no template catalogue here', 'TEMPLATE_NOT_FOUND');
  return catalog;
}

const aboutDeployment = (input: { name: string }) => ({ type: 'deployment', id: input.name });

/** `catalog`: the templates a create may name instead of a compose file (`{name, template, variables}`). */
export function deploymentOperations(manager: DeploymentManager, catalog?: TemplateCatalog) {
  /** A plan of a deployment's change depends on its compose file and `.env` (where they will be, for a create). */
  const files = ({ name }: { name: string }): PlanSnapshot => {
    const entry = manager.entries.get(name);
    const dir = entry?.dir ?? join(manager.root(), name);
    return { files: [join(dir, entry?.composeFile ?? DEFAULT_COMPOSE), join(dir, ENV_FILE)] };
  };

  /** The current status, straight from the engine (a change must not act on a stale cache). */
  const currentStatus = async (entry: Entry) => {
    manager.opts.docker.assertAvailable();
    await manager.cache.reconcile();
    return manager.info(entry).status;
  };

  // A start that the checks of its files (or its name) refuse is a failed start, as when the manager's own start
  // refuses it under the lock: recorded and announced for a request or a plan's apply, never for a preview. The
  // errors of those checks are told apart from the others of prepare (404, 409 state, 503) by identity.
  const startChecks = new WeakSet<object>();
  const startCheck = async <T>(check: () => Promise<T>): Promise<T> => {
    try {
      return await check();
    } catch (err) {
      if (typeof err === 'object' && err !== null) startChecks.add(err);
      throw err;
    }
  };
  const startRefused = (name: string, err: unknown, mark: boolean) => {
    if (typeof err !== 'object' || err === null || !startChecks.has(err)) return;
    const entry = manager.entries.get(name);
    // A start marks its deployment failed (`up`); a restart only announces it (its check runs before `up`).
    if (entry && mark) {
      entry.failure = (err as Error).message;
      manager.invalidate();
    }
    manager.opts.events.emit('deployment.failed', { name, error: (err as Error).message });
  };

  const create = defineOperation({
    name: 'deployments.create',
    input: CreateDeploymentRequest,
    resource: aboutDeployment,
    // A template create also depends on the template's files.
    snapshot: (input) => {
      const own = files(input);
      return input.template && catalog ? { ...own, files: [...(own.files ?? []), ...templateFiles(catalog, input.template)] } : own;
    },
    prepare: async (input, { principal }) => {
      const form = createForm(input);
      assertMayGrant(principal, input.host_safety_exceptions);
      const { host_safety_exceptions: exceptions, variables, compose_content, env_vars, ...rest } = input;
      // The template form becomes the compose form (the template's file and variables): every check below is a
      // compose create's, and the deployment keeps the template as its kind (built-in log sources).
      const source =
        form === 'template'
          ? await fromTemplate(requireCatalog(catalog), rest.template!, variables)
          : { compose_content: compose_content!, ...(env_vars ? { env_vars } : {}) };
      const plan = await manager.checkCreate({ ...rest, ...source, template: rest.template ?? null, exceptions });
      return { value: plan, preview: previewCreate(manager, plan) };
    },
    apply: (plan, { principal }) => manager.createChecked(plan, principal, { reason: plan.input.reason }),
  });

  const update = defineOperation({
    name: 'deployments.update',
    input: UpdateDeploymentInput,
    resource: aboutDeployment,
    snapshot: files,
    prepare: async (input) => {
      const entry = manager.require(input.name);
      if (input.backup) requireBackups(manager.opts.backups());
      const plan = await manager.checkUpdate(entry, input);
      const preview = await previewUpdate(manager, entry, plan);
      if (input.backup) preview.changes.push({ type: 'backup', id: entry.name, actions: ['create'] });
      return { value: input, preview };
    },
    // The files are read and checked again under the lock (the guard keeps checked models by content: no new
    // `compose config` for what prepare checked).
    apply: ({ name, compose_content, env_vars, reason, backup }, { principal }) =>
      manager.update(name, { compose_content, env_vars }, { principal, reason, backup }),
  });

  const remove = defineOperation({
    name: 'deployments.delete',
    input: DeleteDeploymentInput,
    resource: aboutDeployment,
    snapshot: files,
    prepare: ({ name, remove_files = false, remove_volumes = false }) => {
      const entry = manager.require(name);
      manager.opts.docker.assertAvailable();
      return { value: { name, remove_files, remove_volumes }, preview: previewDelete(manager, entry, remove_files, remove_volumes) };
    },
    apply: async (input) => {
      await manager.remove(input.name, { remove_files: input.remove_files, remove_volumes: input.remove_volumes });
      return { name: input.name, removed_files: input.remove_files, removed_volumes: input.remove_volumes };
    },
  });

  const start = defineOperation({
    name: 'deployments.start',
    input: NameParams,
    resource: aboutDeployment,
    snapshot: files,
    prepare: async ({ name }) => {
      const entry = manager.require(name);
      const status = await currentStatus(entry);
      if (status === 'running') throw errors.conflict(`deployment '${entry.name}' is already running`, 'DEPLOYMENT_RUNNING', { status });
      await startCheck(() => manager.checkStart(entry));
      return { value: entry, preview: previewLifecycle(manager, entry, 'start') };
    },
    refused: ({ name }, err) => startRefused(name, err, true),
    apply: async (entry) => {
      await manager.start(entry.name);
      return manager.info(entry);
    },
  });

  const stop = defineOperation({
    name: 'deployments.stop',
    input: NameParams,
    resource: aboutDeployment,
    snapshot: files,
    prepare: async ({ name }) => {
      const entry = manager.require(name);
      const status = await currentStatus(entry);
      if (status === 'stopped' || status === 'failed')
        throw errors.conflict(`deployment '${entry.name}' is not running (${status})`, 'DEPLOYMENT_NOT_RUNNING', { status });
      return { value: entry, preview: previewLifecycle(manager, entry, 'stop') };
    },
    apply: async (entry) => {
      await manager.stop(entry.name);
      return manager.info(entry);
    },
  });

  const restart = defineOperation({
    name: 'deployments.restart',
    input: NameParams,
    resource: aboutDeployment,
    snapshot: files,
    prepare: async ({ name }) => {
      const entry = manager.require(name);
      await currentStatus(entry);
      await startCheck(() => manager.checkRestart(entry));
      return { value: entry, preview: previewLifecycle(manager, entry, 'restart') };
    },
    refused: ({ name }, err) => startRefused(name, err, false),
    apply: async (entry) => {
      await manager.restart(entry.name);
      return manager.info(entry);
    },
  });

  return { create, update, remove, start, stop, restart };
}
