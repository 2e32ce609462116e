/**
 * Docker Swarm through the same dockerode client as the rest of the engine: whether this engine is a manager, init,
 * join tokens, nodes, and the stacks (services and tasks) the agent deployed. Deploying a stack is not here: it runs
 * a checked model, so it goes through the compose guard (`ComposeGuard.stack`).
 */
import { isIPv4 } from 'node:net';
import Docker from 'dockerode';
import { errors } from '@agent/sdk';
import type { StackService, SwarmInfo, SwarmNode, SwarmNodeChange, SwarmServiceEndpoint } from './api.js';
import { runCompose } from './compose/cli.js';
import { envSecretsOf, SECRET_LABEL } from './compose/swarm-secrets.js';

/** The label `docker stack deploy` puts on every object of a stack. */
export const STACK_LABEL = 'com.docker.stack.namespace';
const STACK = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const NODE_ID = /^[a-z0-9]{1,64}$/;
/** The bridge the engine attaches every task of an overlay network to (its way out of the host). */
const GATEWAY_BRIDGE = 'docker_gwbridge';

type Call = <T>(what: string, fn: () => Promise<T>) => Promise<T>;

/** The parts of the engine's node, service and task objects read here (dockerode types them loosely or not at all). */
interface NodeInfo {
  ID?: string;
  Version?: { Index?: number };
  Spec?: { Role?: string; Availability?: string; Labels?: Record<string, string>; Name?: string };
  Description?: { Hostname?: string; Resources?: { NanoCPUs?: number; MemoryBytes?: number }; Engine?: { EngineVersion?: string } };
  Status?: { State?: string; Addr?: string };
  ManagerStatus?: { Leader?: boolean; Reachability?: string };
}
interface ServiceInfo {
  ID?: string;
  Version?: { Index?: number };
  Spec?: {
    Name?: string;
    Labels?: Record<string, string>;
    Mode?: { Replicated?: { Replicas?: number }; Global?: object };
    TaskTemplate?: { ContainerSpec?: { Image?: string } };
  };
  UpdateStatus?: { State?: string; Message?: string; StartedAt?: string };
  Endpoint?: { Ports?: { TargetPort?: number; PublishedPort?: number; Protocol?: string; PublishMode?: string }[] };
}
interface TaskInfo {
  ID?: string;
  ServiceID?: string;
  Slot?: number;
  NodeID?: string;
  DesiredState?: string;
  UpdatedAt?: string;
  Status?: { State?: string; Err?: string; Message?: string; ContainerStatus?: { ContainerID?: string } };
}

export const notManager = () =>
  errors.conflict(
    'this Docker engine is not a swarm manager: initialise a swarm (POST /api/cluster/init) or run the agent on a manager node',
    'NOT_SWARM_MANAGER',
  );

function infoOf(info: { Swarm?: Record<string, unknown> }): SwarmInfo {
  const s = (info.Swarm ?? {}) as {
    NodeID?: string;
    LocalNodeState?: string;
    ControlAvailable?: boolean;
    Cluster?: { ID?: string };
    Nodes?: number;
    Managers?: number;
    Error?: string;
  };
  const state = s.LocalNodeState || 'inactive';
  return {
    state,
    manager: state === 'active' && s.ControlAvailable === true,
    node_id: s.NodeID || null,
    cluster_id: s.Cluster?.ID || null,
    nodes: s.ControlAvailable ? (s.Nodes ?? null) : null,
    managers: s.ControlAvailable ? (s.Managers ?? null) : null,
    error: s.Error || null,
  };
}

function nodeOf(n: NodeInfo): SwarmNode {
  const spec = n.Spec ?? {};
  const desc = n.Description ?? {};
  return {
    id: n.ID ?? '',
    hostname: desc.Hostname ?? '',
    role: (spec.Role as 'manager' | 'worker' | undefined) ?? 'worker',
    availability: (spec.Availability as SwarmNode['availability'] | undefined) ?? 'active',
    labels: (spec.Labels as Record<string, string> | undefined) ?? {},
    state: n.Status?.State ?? 'unknown',
    address: n.Status?.Addr ?? null,
    leader: n.ManagerStatus?.Leader === true,
    reachability: n.ManagerStatus?.Reachability ?? null,
    engine_version: desc.Engine?.EngineVersion ?? null,
    resources: { nano_cpus: desc.Resources?.NanoCPUs ?? 0, memory_bytes: desc.Resources?.MemoryBytes ?? 0 },
  };
}

export function swarmApi(docker: Docker, call: Call, dockerHost: string | null) {
  const info = async (): Promise<SwarmInfo> => infoOf(await call('engine', () => docker.info() as Promise<{ Swarm?: Record<string, unknown> }>));
  const requireManager = async (): Promise<SwarmInfo> => {
    const i = await info();
    if (!i.manager) throw notManager();
    return i;
  };
  const node = async (id: string): Promise<NodeInfo> => {
    if (!NODE_ID.test(id)) throw errors.notFound(`node '${id}' not found`);
    return (await call(`node '${id}'`, () => docker.getNode(id).inspect())) as NodeInfo;
  };

  /** A stack's name checked, on an engine that manages the swarm (its info). */
  const managedStack = async (stack: string): Promise<SwarmInfo> => {
    if (!STACK.test(stack)) throw errors.badRequest(`invalid stack name '${stack}'`);
    return requireManager();
  };
  /** The engine's filter for a stack's objects (`docker stack deploy` labels each, over any label of the file). */
  const stackLabel = (stack: string) => `${STACK_LABEL}=${stack}`;
  const stackServiceList = (stack: string) =>
    call('services', () => docker.listServices({ filters: JSON.stringify({ label: [stackLabel(stack)] }) })) as Promise<ServiceInfo[]>;
  /** One service of a stack: the name filter matches prefixes, so the exact name is found among its answers. */
  const stackService = async (stack: string, service: string): Promise<ServiceInfo | undefined> => {
    const name = `${stack}_${service}`;
    const filters = JSON.stringify({ name: [name], label: [stackLabel(stack)] });
    return ((await call('services', () => docker.listServices({ filters }))) as ServiceInfo[]).find((s) => s.Spec?.Name === name);
  };

  return {
    info,
    requireManager,

    /** A single-node swarm on this engine; 409 SWARM_EXISTS when the engine already is part of one. */
    async init(options: { advertise_addr?: string } = {}): Promise<SwarmInfo> {
      const before = await info();
      if (before.state !== 'inactive') throw errors.conflict(`this engine is already part of a swarm (state '${before.state}')`, 'SWARM_EXISTS');
      // No advertise address: the engine picks one, and fails on a host with several; the caller can name it.
      await call('swarm', () => docker.swarmInit({ ListenAddr: '0.0.0.0:2377', AdvertiseAddr: options.advertise_addr ?? '127.0.0.1', ForceNewCluster: false }));
      return info();
    },

    /** The join tokens (secrets: the caller returns them to an admin and writes them nowhere else). */
    async joinTokens(): Promise<{ worker: string; manager: string }> {
      await requireManager();
      const s = (await call('swarm', () => docker.swarmInspect())) as { JoinTokens?: { Worker?: string; Manager?: string } };
      return { worker: s.JoinTokens?.Worker ?? '', manager: s.JoinTokens?.Manager ?? '' };
    },

    async nodes(): Promise<SwarmNode[]> {
      await requireManager();
      const list = (await call('nodes', () => docker.listNodes())) as NodeInfo[];
      return list.map(nodeOf);
    },

    async node(id: string): Promise<SwarmNode> {
      await requireManager();
      return nodeOf(await node(id));
    },

    /** Labels replace the node's labels; the version read first makes a concurrent change fail rather than be lost. */
    async updateNode(id: string, change: SwarmNodeChange): Promise<SwarmNode> {
      await requireManager();
      const current = await node(id);
      const spec = { ...(current.Spec ?? {}) } as Record<string, unknown>;
      if (change.labels) spec.Labels = change.labels;
      if (change.availability) spec.Availability = change.availability;
      await call(`node '${id}'`, () => docker.getNode(id).update({ version: current.Version?.Index, ...spec }));
      return nodeOf(await node(id));
    },

    /** The services of a stack with their tasks' state (the newest task per slot). */
    async stackServices(stack: string): Promise<StackService[]> {
      await managedStack(stack);
      const services = await stackServiceList(stack);
      // Tasks by service: the stack label is on services, not on every task.
      const ids = services.map((s) => s.ID ?? '').filter(Boolean);
      const tasks = ids.length ? ((await call('tasks', () => docker.listTasks({ filters: JSON.stringify({ service: ids }) }))) as TaskInfo[]) : [];
      return services.map((s) => {
        const name = s.Spec?.Name ?? '';
        const short = name.startsWith(`${stack}_`) ? name.slice(stack.length + 1) : name;
        const mode = s.Spec?.Mode;
        const mine = tasks.filter((t) => t.ServiceID === s.ID);
        const current = mine.filter((t) => t.DesiredState === 'running');
        const running = current.filter((t) => t.Status?.State === 'running').length;
        const desired = mode?.Replicated ? (mode.Replicated.Replicas ?? 0) : current.length;
        const update = s.UpdateStatus;
        return {
          name: short,
          service_id: s.ID ?? '',
          image: String(s.Spec?.TaskTemplate?.ContainerSpec?.Image ?? '').replace(/@sha256:[0-9a-f]+$/, ''),
          mode: mode?.Global ? 'global' : 'replicated',
          replicas: { running, desired },
          // When it started: an update that ended before a deploy (its state stays until the next one) is told apart.
          update: update?.State ? { state: update.State, message: update.Message ?? null, started_at: update.StartedAt ?? null } : null,
          tasks: mine
            .sort((a, b) => String(b.UpdatedAt ?? '').localeCompare(String(a.UpdatedAt ?? '')))
            .slice(0, 20)
            .map((t) => ({
              id: t.ID ?? '',
              slot: t.Slot ?? null,
              node_id: t.NodeID ?? null,
              state: t.Status?.State ?? 'unknown',
              desired_state: t.DesiredState ?? 'unknown',
              error: t.Status?.Err ?? null,
              message: t.Status?.Message ?? null,
              updated_at: t.UpdatedAt ?? null,
            })),
        };
      });
    },

    /**
     * Where a stack's service is reached: the ports the engine published for it, and its tasks running on this node
     * (desired and actual state running: past their health check when they have one) by their address on the
     * engine's gateway bridge. Every task on an overlay network is also on that bridge, a bridge of this host: the
     * host reaches the task there, while the overlay addresses are reached only from inside the overlay. Null when
     * the stack has no such service.
     */
    async serviceEndpoint(stack: string, service: string): Promise<SwarmServiceEndpoint | null> {
      const self = await managedStack(stack);
      const found = await stackService(stack, service);
      if (!found?.ID) return null;
      const ports = (found.Endpoint?.Ports ?? [])
        .filter((p) => p.TargetPort && p.PublishedPort)
        .map((p) => ({
          target: p.TargetPort!,
          published: p.PublishedPort!,
          protocol: p.Protocol ?? 'tcp',
          mode: p.PublishMode === 'host' ? ('host' as const) : ('ingress' as const),
        }));
      const taskFilters = JSON.stringify({ service: [found.ID], 'desired-state': ['running'], ...(self.node_id ? { node: [self.node_id] } : {}) });
      const tasks = ((await call('tasks', () => docker.listTasks({ filters: taskFilters }))) as TaskInfo[]).filter(
        (t) => t.DesiredState === 'running' && t.Status?.State === 'running' && t.Status.ContainerStatus?.ContainerID,
      );
      if (!tasks.length) return { ports, local_tasks: [] };
      const bridge = (await call('network', () => docker.getNetwork(GATEWAY_BRIDGE).inspect())) as { Containers?: Record<string, { IPv4Address?: string }> };
      const local_tasks = tasks.flatMap((t) => {
        const container_id = t.Status!.ContainerStatus!.ContainerID!;
        const address = bridge.Containers?.[container_id]?.IPv4Address?.split('/')[0] ?? '';
        // Written into nginx's configuration: an address, nothing else.
        return isIPv4(address) ? [{ task_id: t.ID ?? '', container_id, address }] : [];
      });
      return { ports, local_tasks };
    },

    /** Sets the replicas of one service of a stack (a replicated one); the engine rolls it as its update_config says. */
    async scale(stack: string, service: string, replicas: number): Promise<void> {
      await managedStack(stack);
      const found = await stackService(stack, service);
      if (!found) throw errors.notFound(`deployment '${stack}' has no service '${service}'`);
      const spec = found.Spec ?? {};
      if (!spec.Mode?.Replicated) throw errors.conflict(`service '${service}' is not replicated (global mode): it cannot be scaled`, 'NOT_REPLICATED');
      await call(`service '${service}'`, () =>
        docker.getService(found.ID!).update({ version: found.Version?.Index, ...spec, Mode: { Replicated: { Replicas: replicas } } }),
      );
    },

    /**
     * Restarts every task of a stack's services, or of those named (a forced update: start-first where the service
     * says so).
     */
    async restart(stack: string, only?: string[]): Promise<void> {
      await managedStack(stack);
      for (const s of await stackServiceList(stack)) {
        const spec = s.Spec ?? {};
        if (only && !only.some((service) => spec.Name === `${stack}_${service}`)) continue;
        const template = (spec.TaskTemplate ?? {}) as { ForceUpdate?: number };
        await call(`service '${spec.Name ?? s.ID}'`, () =>
          docker.getService(s.ID!).update({ version: s.Version?.Index, ...spec, TaskTemplate: { ...template, ForceUpdate: (template.ForceUpdate ?? 0) + 1 } }),
        );
      }
    },

    /**
     * Removes a stack (`docker stack rm`): its services, networks, configs and secrets. The engine removes tasks in
     * the background; this waits (bounded) until no service or network of the stack is left.
     */
    async removeStack(stack: string, options: { waitMs?: number } = {}): Promise<void> {
      await managedStack(stack);
      const filters = JSON.stringify({ label: [stackLabel(stack)] });
      const until = Date.now() + (options.waitMs ?? 30_000);
      let failure: string | null = null;
      // `stack rm` removes the services first and then the networks; a network whose tasks are still shutting down
      // (a stack in the middle of an update or rollback) "has active endpoints" and the command fails. It is
      // idempotent, so it is run again until nothing of the stack is left or the time is up.
      let again = true;
      while (Date.now() < until) {
        if (again) {
          const r = await runCompose(['docker'], dockerHost, '/', ['stack', 'rm', stack]);
          failure = r.exit_code === 0 ? null : r.output.trim().split('\n').slice(-3).join(' ');
          again = false;
        }
        const [services, networks] = await Promise.all([
          call('services', () => docker.listServices({ filters })),
          call('networks', () => docker.listNetworks({ filters } as Docker.NetworkListOptions)),
        ]);
        if (!services.length && !networks.length) return;
        again = failure !== null;
        await new Promise((r) => setTimeout(r, failure ? 500 : 250));
      }
      if (failure) throw errors.badGateway(`docker stack rm failed: ${failure}`, 'ENGINE_ERROR');
    },

    /**
     * Removes the secrets the agent created for a stack from its `.env` (swarm-secrets.ts) that the model that runs
     * no longer names: values rotated away, once the stack converged on the new ones. One a task still holds (a task
     * shutting down) stays until the next deploy. Answers the names removed.
     */
    async pruneSecrets(checked: { project: string; model: Readonly<Record<string, unknown>> }): Promise<string[]> {
      const stack = checked.project;
      await managedStack(stack);
      const keep = new Set(envSecretsOf(checked.model).map((s) => s.name));
      const filters = JSON.stringify({ label: [stackLabel(stack), SECRET_LABEL] });
      const removed: string[] = [];
      for (const secret of (await call('secrets', () => docker.listSecrets({ filters }))) as { ID?: string; Spec?: { Name?: string } }[]) {
        const name = secret.Spec?.Name ?? '';
        if (!secret.ID || keep.has(name)) continue;
        try {
          await call(`secret '${name}'`, () => docker.getSecret(secret.ID!).remove());
          removed.push(name);
        } catch {
          // still in use by a task that is shutting down: the next deploy removes it
        }
      }
      return removed;
    },

    /** Stack names the engine holds services of. */
    async stacks(): Promise<string[]> {
      const i = await info();
      if (!i.manager) return [];
      const services = (await call('services', () => docker.listServices({ filters: JSON.stringify({ label: [STACK_LABEL] }) }))) as ServiceInfo[];
      return [...new Set(services.map((s) => s.Spec?.Labels?.[STACK_LABEL]).filter((x): x is string => !!x))];
    },
  };
}
