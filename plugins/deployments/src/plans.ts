/**
 * Plan previews of deployment mutations: the compose diff, the `.env` keys that change (never their values), and
 * the containers compose would create, recreate or remove. Built by the operations' `prepare` from what its checks
 * found (the checked model, the files read): a preview never checks anything itself, so it cannot disagree with
 * the change.
 */
import { createTwoFilesPatch } from 'diff';
import type { PlanChange, PlanPreview } from '@agent/sdk';
import type { CheckedCompose, ContainerSummary } from '@agent/plugin-docker/api';
import { DEFAULT_COMPOSE } from './files.js';
import type { CreatePlan, DeploymentManager, UpdatePlan } from './manager.js';
import type { Entry } from './records.js';

const stable = (v: unknown): string => {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  return `{${Object.keys(v)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${stable((v as Record<string, unknown>)[k])}`)
    .join(',')}}`;
};

export function composeDiff(file: string, before: string, after: string): string {
  return createTwoFilesPatch(`a/${file}`, `b/${file}`, before, after, undefined, undefined, { context: 3 });
}

export function envChange(before: Record<string, string>, after: Record<string, string>): PlanChange | null {
  const added = Object.keys(after).filter((k) => !(k in before));
  const removed = Object.keys(before).filter((k) => !(k in after));
  const changed = Object.keys(after).filter((k) => k in before && before[k] !== after[k]);
  if (!added.length && !removed.length && !changed.length) return null;
  return {
    type: 'file',
    id: '.env',
    actions: [Object.keys(before).length === 0 ? 'create' : 'update'],
    after: { added, changed, removed },
    before: { keys: Object.keys(before) },
  };
}

/** The name compose gives a service's container when it has none yet. */
export const predictedName = (manager: DeploymentManager, deployment: string, service: string, def: any): string => {
  if (def && typeof def.container_name === 'string') return def.container_name;
  const sep = manager.containerNameSeparator;
  return `${deployment}${sep}${service}${sep}1`;
};

const containerChange = (id: string, action: 'create' | 'update' | 'delete' | 'no-op', before: unknown, after: unknown): PlanChange => ({
  type: 'container',
  id,
  actions: [action],
  before: before ?? undefined,
  after: after ?? undefined,
});

const containerView = (c: ContainerSummary) => ({ name: c.name, service: c.service, state: c.state, image: c.image });

/** What the host-safety policy says about the checked files: the exceptions they use, or (policy off) what it would refuse. */
export function hostSafetyChange(manager: DeploymentManager, name: string, checked: CheckedCompose, exceptions: string[]): PlanChange | null {
  const enforced = manager.opts.hostSafety();
  if (enforced && !checked.granted.length && !exceptions.length) return null;
  return {
    type: 'host-safety',
    id: name,
    actions: ['no-op'],
    after: { policy: enforced ? 'enforced' : 'off', exceptions, used: [...checked.granted], would_refuse: checked.violations.map((v) => ({ ...v })) },
  };
}

export function previewCreate(manager: DeploymentManager, plan: CreatePlan): PlanPreview {
  const { input: body, dir, vars, exceptions, checked } = plan;
  const services = checked.services;
  const model = checked.model.services as Record<string, any>;
  const changes: PlanChange[] = [
    { type: 'deployment', id: body.name, actions: ['create'], after: { path: dir, services, auto_start: body.auto_start ?? false } },
    { type: 'file', id: DEFAULT_COMPOSE, actions: ['create'], diff: composeDiff(DEFAULT_COMPOSE, '', body.compose_content) },
  ];
  const env = envChange({}, vars);
  if (env) changes.push(env);
  const safety = hostSafetyChange(manager, body.name, checked, exceptions);
  if (safety) changes.push(safety);
  if (body.auto_start) {
    for (const s of services)
      changes.push(
        containerChange(predictedName(manager, body.name, s, model[s]), 'create', null, { service: s, image: model[s].image ?? '(build)', state: 'running' }),
      );
  }
  return { summary: `create deployment ${body.name}${body.auto_start ? ` and start ${services.length} service(s)` : ''}`, changes };
}

export async function previewUpdate(manager: DeploymentManager, entry: Entry, plan: UpdatePlan): Promise<PlanPreview> {
  const { content: oldContent, env: oldEnv } = plan.current;
  const { content: newContent, vars: newEnv, checked: next } = plan;
  const changes: PlanChange[] = [];
  if (newContent !== oldContent)
    changes.push({ type: 'file', id: entry.composeFile, actions: ['update'], diff: composeDiff(entry.composeFile, oldContent, newContent) });
  const env = envChange(oldEnv, newEnv);
  if (env) changes.push(env);
  const safety = hostSafetyChange(manager, entry.name, next, entry.record.exceptions);
  if (safety) changes.push(safety);
  const running = plan.wasRunning;
  if (running) {
    let oldServices: Record<string, any> = {};
    try {
      // The model of the files as they were, to tell which services change (not a check: it may fail).
      oldServices = (await manager.check(entry.name, entry.dir, oldContent, oldEnv, entry.record.exceptions)).model.services as Record<string, any>;
    } catch {
      /* the old files do not pass any more: every service is new */
    }
    const newServices = next.model.services as Record<string, any>;
    const containers = manager.cache.containers(entry.name);
    for (const [service, def] of Object.entries(newServices)) {
      const existing = containers.filter((c) => c.service === service);
      if (!existing.length || !(service in oldServices)) {
        changes.push(
          containerChange(predictedName(manager, entry.name, service, def), 'create', null, { service, image: def.image ?? '(build)', state: 'running' }),
        );
      } else if (stable(oldServices[service]) !== stable(def)) {
        for (const c of existing)
          changes.push(containerChange(c.name, 'update', containerView(c), { service, image: def.image ?? '(build)', state: 'running', recreated: true }));
      }
    }
    for (const c of containers) {
      if (c.service && !(c.service in newServices)) changes.push(containerChange(c.name, 'delete', containerView(c), null));
    }
  }
  const recreated = changes.filter((c) => c.type === 'container').length;
  return {
    summary: `update deployment ${entry.name}${running ? `: ${recreated} container change(s)` : ' (not running: files only)'}`,
    changes: changes.length ? changes : [{ type: 'deployment', id: entry.name, actions: ['no-op'] }],
  };
}

export function previewLifecycle(manager: DeploymentManager, entry: Entry, action: 'start' | 'stop' | 'restart'): PlanPreview {
  const containers = manager.cache.containers(entry.name);
  const changes: PlanChange[] = [];
  for (const service of entry.services) {
    const list = containers.filter((c) => c.service === service);
    if (!list.length) {
      if (action !== 'stop') changes.push(containerChange(predictedName(manager, entry.name, service, null), 'create', null, { service, state: 'running' }));
      continue;
    }
    for (const c of list) {
      const target = action === 'stop' ? 'exited' : 'running';
      const acts = action === 'restart' || c.state !== target ? 'update' : 'no-op';
      changes.push(
        containerChange(c.name, acts, containerView(c), { ...containerView(c), state: target, ...(action === 'restart' ? { restarted: true } : {}) }),
      );
    }
  }
  return { summary: `${action} deployment ${entry.name} (${changes.filter((c) => c.actions[0] !== 'no-op').length} container change(s))`, changes };
}

export function previewDelete(manager: DeploymentManager, entry: Entry, removeFiles: boolean, removeVolumes: boolean): PlanPreview {
  const changes: PlanChange[] = [
    { type: 'deployment', id: entry.name, actions: ['delete'], before: { path: entry.dir, services: entry.services } },
    ...manager.cache.containers(entry.name).map((c) => containerChange(c.name, 'delete', containerView(c), null)),
  ];
  changes.push(
    removeFiles ? { type: 'folder', id: entry.dir, actions: ['delete'] } : { type: 'folder', id: entry.dir, actions: ['no-op'], after: { kept: true } },
  );
  if (removeVolumes) changes.push({ type: 'volumes', id: entry.name, actions: ['delete'] });
  return { summary: `delete deployment ${entry.name}${removeFiles ? ' and its folder' : ' (folder kept)'}`, changes };
}
