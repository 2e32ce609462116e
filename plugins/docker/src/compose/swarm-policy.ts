/**
 * What a model checked for `docker stack deploy` must also pass, on top of the host-safety policy (policy.ts), and
 * the update defaults it runs with. Swarm reads keys compose ignores (`deploy.*`) and places tasks on any node, so:
 * - `deploy.placement` constraints that put tasks on managers (the nodes holding the cluster's state, its CA and
 *   every secret) are refused: exception `deploy.placement:managers`;
 * - `deploy.mode: global` (a task on every node of the cluster, present and future): exception `deploy.mode:global`;
 * - published ports in `mode: host` (bound on the node itself, around the routing mesh and the agent's proxy):
 *   exception `ports.mode:host:<published>`;
 * - bind mounts: the path is resolved on whichever node runs the task, not the one the guard checked: exception
 *   `swarm.bind:<source>`.
 * External networks, volumes, configs and secrets (another stack's, say) are refused by the host-safety policy
 * already, exactly as for compose.
 */
import type { ModelNode, Violation } from './policy.js';

const isMap = (v: unknown): v is ModelNode => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A constraint that can only hold on managers: `node.role == manager` / `node.role != worker` (any spacing or case;
 * Swarm compares roles case-insensitively).
 */
function onManagers(constraint: string): boolean {
  const m = /^\s*node\.role\s*(==|!=)\s*([a-z]+)\s*$/i.exec(constraint);
  if (!m) return false;
  const role = m[2]!.toLowerCase();
  return (m[1] === '==' && role === 'manager') || (m[1] === '!=' && role === 'worker');
}

/** The bind source of a volume entry of compose's model (short `src:dst[:mode]` or long syntax), else null. */
function bindSource(entry: unknown): string | null {
  if (typeof entry === 'string') {
    const source = entry.split(':')[0]!;
    return source.startsWith('/') || source.startsWith('.') || source.startsWith('~') ? source : null;
  }
  if (isMap(entry) && entry.type === 'bind') return String(entry.source ?? '');
  return null;
}

/** Violations of the swarm rules not covered by a granted exception, and the exceptions that were needed and granted. */
export function checkSwarm(model: ModelNode, exceptions: ReadonlySet<string>): { violations: Violation[]; granted: string[] } {
  const violations: Violation[] = [];
  const granted: string[] = [];
  const refuse = (service: string, key: string, value: unknown, exception: string, why: string) => {
    if (exceptions.has(exception)) granted.push(exception);
    else violations.push({ service, key, value: typeof value === 'string' ? value : JSON.stringify(value), exception, why });
  };
  for (const [service, def] of Object.entries((model.services ?? {}) as ModelNode)) {
    if (!isMap(def)) continue;
    const deploy = isMap(def.deploy) ? def.deploy : {};
    if (deploy.mode === 'global') refuse(service, 'deploy.mode', 'global', 'deploy.mode:global', 'global mode runs a task on every node of the cluster');
    const constraints = isMap(deploy.placement) && Array.isArray(deploy.placement.constraints) ? deploy.placement.constraints.map(String) : [];
    for (const c of constraints.filter(onManagers))
      refuse(service, 'deploy.placement.constraints', c, 'deploy.placement:managers', 'managers hold the cluster state, its CA and every secret');
    for (const port of Array.isArray(def.ports) ? def.ports : []) {
      if (isMap(port) && port.mode === 'host')
        refuse(
          service,
          'ports.mode',
          `${port.published ?? ''}:${port.target ?? ''} host`,
          `ports.mode:host:${port.published ?? ''}`,
          "a host-mode port binds on the node itself, around the routing mesh and the agent's proxy",
        );
      else if (typeof port === 'string' && /\/?mode=host|,\s*mode=host/.test(port))
        refuse(service, 'ports.mode', port, `ports.mode:host:${port}`, 'a host-mode port binds on the node itself');
    }
    for (const v of Array.isArray(def.volumes) ? def.volumes : []) {
      const source = bindSource(v);
      if (source !== null)
        refuse(
          service,
          'volumes',
          source,
          `swarm.bind:${source}`,
          'a bind mount is resolved on whichever node runs the task, not on the host the agent checked',
        );
    }
  }
  return { violations, granted };
}

/** Compose's own labels: the agent finds a deployment's containers, networks and volumes by them. */
const PROJECT_LABEL = 'com.docker.compose.project';
const SERVICE_LABEL = 'com.docker.compose.service';

/** `labels` (a mapping or a `KEY=VALUE` list, as compose writes them) with `extra` set. */
function withLabels(labels: unknown, extra: Record<string, string>): unknown {
  if (Array.isArray(labels)) return [...labels.filter((l) => !(String(l).split('=')[0]! in extra)), ...Object.entries(extra).map(([k, v]) => `${k}=${v}`)];
  return { ...(isMap(labels) ? labels : {}), ...extra };
}

/** 10 s of watching each updated task: a task that fails within it rolls the update back. */
const MONITOR = '10s';
/**
 * A pause after each task replaced, before the next old task is stopped. Swarm stops an old task the moment its
 * successor runs; whatever routes to the tasks from outside Swarm (the agent's nginx, on container events) learns of
 * the successor a moment later. Without a pause, the next old task of a service of two replicas could stop before
 * that: both tasks the proxy knows would be gone at once.
 */
const DELAY = '3s';

/**
 * Safe updates unless the file says otherwise: start the new task before stopping the old (no gap for a single
 * replica), pause between tasks, roll back when an updated task fails within the monitor window. Swarm's own default is stop-first and
 * `pause` on failure, which leaves a half-updated service serving nothing. Mutates `model` (the one that runs),
 * which also gets the compose labels of `project`.
 */
export function withSwarmDefaults(model: ModelNode, project: string): void {
  for (const [service, def] of Object.entries((model.services ?? {}) as ModelNode)) {
    if (!isMap(def)) continue;
    // The tasks' containers carry the compose labels of their project and service (the stack's own labels name
    // `<stack>_<service>`): state, logs, stats and tenancy find them as they find a compose deployment's.
    def.labels = withLabels(def.labels, { [PROJECT_LABEL]: project, [SERVICE_LABEL]: service });
    const deploy: ModelNode = isMap(def.deploy) ? def.deploy : {};
    if (deploy.update_config === undefined)
      deploy.update_config = { delay: DELAY, failure_action: 'rollback', monitor: MONITOR, order: 'start-first', parallelism: 1 };
    if (deploy.rollback_config === undefined) deploy.rollback_config = { delay: DELAY, monitor: MONITOR, order: 'start-first', parallelism: 1 };
    def.deploy = deploy;
  }
  // The stack's own networks and volumes too (external ones are not the project's: left as they are), the default
  // network included: the stack creates `<project>_default` itself, and the next deploy's name check must find it
  // the project's.
  if (!isMap(model.networks) || model.networks.default === undefined) model.networks = { ...(isMap(model.networks) ? model.networks : {}), default: {} };
  for (const section of ['networks', 'volumes'] as const) {
    for (const def of Object.values((model[section] ?? {}) as ModelNode)) {
      if (isMap(def) && !def.external) def.labels = withLabels(def.labels, { [PROJECT_LABEL]: project });
    }
  }
  // `docker stack deploy` refuses a file without a version; compose v2's `config` writes none.
  if (model.version === undefined) model.version = '3.9';
}
