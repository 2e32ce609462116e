/**
 * 4.4 volumes and networks: list, create, delete (409 while in use). Tenancy: a volume or network of a deployment
 * (compose project label) is reached with access to that deployment; one of no deployment only by a global principal.
 * Creating is global (a deployment's own objects come from its compose file). Container names shown with an object
 * are only those the caller may see: a container name carries its project's name.
 */
import { canReach, errors, reply, Type, type PluginContext, type Principal, compareText } from '@agent/sdk';
import type Docker from 'dockerode';
import type { DockerEngine } from '../engine.js';
import { LabelMap, Network, Volume } from '../schemas.js';
import { assertCanReach, visibleNames } from '../access.js';
import { PROJECT_LABEL } from '../mapping.js';

const OBJECT_NAME = '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$';
const BUILTIN_NETWORKS = new Set(['bridge', 'host', 'none']);

const containerName = (c: Docker.ContainerInfo) => (c.Names?.[0] ?? c.Id).replace(/^\//, '');
type User = { name: string; deployment: string | null };
const userOf = (c: Docker.ContainerInfo): User => ({ name: containerName(c), deployment: c.Labels?.[PROJECT_LABEL] ?? null });

/** 409 naming only the users the caller may see; the others are counted, never named. */
function inUse(kind: 'volume' | 'network', name: string, using: User[], principal: Principal, code: string) {
  const names = visibleNames(principal, using);
  const hidden = using.length - names.length;
  const who = [...names, ...(hidden > 0 ? [`${hidden} other container(s)`] : [])].join(', ');
  return errors.conflict(`${kind} '${name}' is used by ${who}`, code, { containers: names });
}

export function volumeRoutes(ctx: PluginContext<any>, engine: DockerEngine): void {
  const users = async () => {
    const raw = await engine.call('containers', () => engine.client.listContainers({ all: true }));
    const byVolume = new Map<string, User[]>();
    for (const c of raw) {
      for (const m of c.Mounts ?? []) {
        if (m.Type !== 'volume' || !m.Name) continue;
        byVolume.set(m.Name, [...(byVolume.get(m.Name) ?? []), userOf(c)]);
      }
    }
    return byVolume;
  };
  const view = (v: Docker.VolumeInspectInfo & { CreatedAt?: string }, byVolume: Map<string, User[]>, principal: Principal) => {
    const using = byVolume.get(v.Name) ?? [];
    return {
      name: v.Name,
      driver: v.Driver,
      mountpoint: v.Mountpoint,
      scope: v.Scope ?? 'local',
      created_at: v.CreatedAt ?? null,
      labels: v.Labels ?? {},
      containers: visibleNames(principal, using),
      in_use: using.length > 0,
      deployment: v.Labels?.[PROJECT_LABEL] ?? null,
    };
  };

  ctx.route({
    method: 'GET',
    path: '/volumes',
    permission: 'volumes:read',
    operationId: 'volumes.list',
    tag: 'volumes',
    summary: 'List volumes',
    description: 'Volumes of the deployments the caller can access; those of no deployment only for a principal with global scope.',
    tenancy: 'filtered',
    response: Type.Array(Volume),
    handler: async (req) => {
      const [list, byVolume] = await Promise.all([engine.call('volumes', () => engine.client.listVolumes()), users()]);
      return (list.Volumes ?? [])
        .filter((v) => canReach(req.principal, v.Labels?.[PROJECT_LABEL] ?? null))
        .map((v) => view(v, byVolume, req.principal))
        .sort((a, b) => compareText(a.name, b.name));
    },
  });

  ctx.route({
    method: 'POST',
    path: '/volumes',
    permission: 'volumes:write',
    operationId: 'volumes.create',
    creates: 'name',
    tag: 'volumes',
    status: 201,
    summary: 'Create a volume',
    description: "Global: a deployment's volumes come from its compose file. A volume labelled with a deployment's project needs write access to it.",
    body: Type.Object({
      name: Type.String({ pattern: OBJECT_NAME }),
      driver: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9_.-]{0,63}$', default: 'local' })),
      labels: Type.Optional(LabelMap),
    }),
    response: Volume,
    errors: { 409: ['VOLUME_EXISTS'] },
    handler: async (req) => {
      const existing = await engine.call('volumes', () =>
        engine.client.listVolumes({ filters: JSON.stringify({ name: [req.body.name] }) } as Docker.VolumeListOptions),
      );
      if ((existing.Volumes ?? []).some((v) => v.Name === req.body.name)) throw errors.conflict(`volume '${req.body.name}' already exists`, 'VOLUME_EXISTS');
      const labels = req.body.labels ?? {};
      assertCanReach(req.principal, labels[PROJECT_LABEL] ?? null, `deployment '${labels[PROJECT_LABEL]}'`, 'write');
      await engine.call(`volume '${req.body.name}'`, () =>
        engine.client.createVolume({ Name: req.body.name, Driver: req.body.driver ?? 'local', Labels: labels }),
      );
      const created = await engine.call(`volume '${req.body.name}'`, () => engine.client.getVolume(req.body.name).inspect());
      return reply.created(view(created, new Map(), req.principal), `volume ${req.body.name} created`);
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/volumes/:name',
    permission: 'volumes:write',
    operationId: 'volumes.delete',
    tag: 'volumes',
    summary: 'Delete a volume',
    description:
      "Refused with 409 `VOLUME_IN_USE` while a container (running or stopped) mounts it. Needs write access to the volume's deployment; a volume of no deployment needs global scope.",
    tenancy: 'filtered',
    params: Type.Object({ name: Type.String({ pattern: OBJECT_NAME }) }),
    response: Type.Object({ name: Type.String(), deployment: Type.Union([Type.String(), Type.Null()]) }),
    errors: { 409: ['VOLUME_IN_USE'] },
    handler: async (req) => {
      const volume = await engine.call(`volume '${req.params.name}'`, () => engine.client.getVolume(req.params.name).inspect());
      const deployment = volume.Labels?.[PROJECT_LABEL] ?? null;
      assertCanReach(req.principal, deployment, `volume '${req.params.name}'`, 'write');
      const using = (await users()).get(volume.Name) ?? [];
      if (using.length) throw inUse('volume', volume.Name, using, req.principal, 'VOLUME_IN_USE');
      await engine.call(`volume '${req.params.name}'`, () => engine.client.getVolume(volume.Name).remove());
      return reply.ok({ name: volume.Name, deployment }, `volume ${volume.Name} deleted`);
    },
  });
}

export function networkRoutes(ctx: PluginContext<any>, engine: DockerEngine): void {
  const users = async () => {
    const raw = await engine.call('containers', () => engine.client.listContainers({ all: true }));
    const byNetwork = new Map<string, User[]>();
    for (const c of raw) {
      for (const name of Object.keys(c.NetworkSettings?.Networks ?? {})) byNetwork.set(name, [...(byNetwork.get(name) ?? []), userOf(c)]);
    }
    return byNetwork;
  };
  const view = (n: Docker.NetworkInspectInfo, byNetwork: Map<string, User[]>, principal: Principal) => {
    const using = byNetwork.get(n.Name) ?? [];
    return {
      id: n.Id,
      name: n.Name,
      driver: n.Driver,
      scope: n.Scope,
      internal: n.Internal ?? false,
      created_at: n.Created ?? null,
      labels: n.Labels ?? {},
      containers: visibleNames(principal, using),
      in_use: using.length > 0,
      deployment: n.Labels?.[PROJECT_LABEL] ?? null,
    };
  };

  ctx.route({
    method: 'GET',
    path: '/networks',
    permission: 'networks:read',
    operationId: 'networks.list',
    tag: 'networks',
    summary: 'List networks',
    description:
      'Networks of the deployments the caller can access; those of no deployment (bridge, shared networks, …) only for a principal with global scope.',
    tenancy: 'filtered',
    response: Type.Array(Network),
    handler: async (req) => {
      const [list, byNetwork] = await Promise.all([engine.call('networks', () => engine.client.listNetworks()), users()]);
      return list
        .filter((n) => canReach(req.principal, n.Labels?.[PROJECT_LABEL] ?? null))
        .map((n) => view(n, byNetwork, req.principal))
        .sort((a, b) => compareText(a.name, b.name));
    },
  });

  ctx.route({
    method: 'POST',
    path: '/networks',
    permission: 'networks:write',
    operationId: 'networks.create',
    creates: 'name',
    tag: 'networks',
    status: 201,
    summary: 'Create a network',
    description: "Global: a deployment's networks come from its compose file. A network labelled with a deployment's project needs write access to it.",
    body: Type.Object({
      name: Type.String({ pattern: OBJECT_NAME }),
      driver: Type.Optional(
        Type.Union([Type.Literal('bridge'), Type.Literal('overlay'), Type.Literal('macvlan'), Type.Literal('ipvlan')], { default: 'bridge' }),
      ),
      internal: Type.Optional(Type.Boolean({ default: false, description: 'no route to the outside' })),
      labels: Type.Optional(LabelMap),
    }),
    response: Network,
    errors: { 409: ['NETWORK_EXISTS'] },
    handler: async (req) => {
      if (BUILTIN_NETWORKS.has(req.body.name)) throw errors.conflict(`'${req.body.name}' is a built-in network`, 'NETWORK_EXISTS');
      const existing = await engine.call('networks', () =>
        engine.client.listNetworks({ filters: JSON.stringify({ name: [req.body.name] }) } as Docker.NetworkListOptions),
      );
      if (existing.some((n) => n.Name === req.body.name)) throw errors.conflict(`network '${req.body.name}' already exists`, 'NETWORK_EXISTS');
      const labels = req.body.labels ?? {};
      assertCanReach(req.principal, labels[PROJECT_LABEL] ?? null, `deployment '${labels[PROJECT_LABEL]}'`, 'write');
      const network = await engine.call(`network '${req.body.name}'`, () =>
        engine.client.createNetwork({
          Name: req.body.name,
          Driver: req.body.driver ?? 'bridge',
          Internal: req.body.internal ?? false,
          Labels: labels,
          CheckDuplicate: true,
        }),
      );
      const inspected = (await engine.call(`network '${req.body.name}'`, () => network.inspect())) as Docker.NetworkInspectInfo;
      return reply.created(view(inspected, new Map(), req.principal), `network ${req.body.name} created`);
    },
  });

  ctx.route({
    method: 'DELETE',
    path: '/networks/:name',
    permission: 'networks:write',
    operationId: 'networks.delete',
    tag: 'networks',
    summary: 'Delete a network',
    description:
      "Refused with 409 `NETWORK_IN_USE` while containers are attached, and `NETWORK_BUILTIN` for bridge/host/none. Needs write access to the network's deployment; a network of no deployment needs global scope.",
    tenancy: 'filtered',
    params: Type.Object({ name: Type.String({ pattern: OBJECT_NAME }) }),
    response: Type.Object({ name: Type.String(), deployment: Type.Union([Type.String(), Type.Null()]) }),
    errors: { 409: ['NETWORK_BUILTIN', 'NETWORK_IN_USE'] },
    handler: async (req) => {
      // The built-ins belong to no deployment: a principal limited to its deployments is refused before anything else.
      if (BUILTIN_NETWORKS.has(req.params.name)) {
        assertCanReach(req.principal, null, `network '${req.params.name}'`, 'write');
        throw errors.conflict(`'${req.params.name}' is a built-in network and cannot be deleted`, 'NETWORK_BUILTIN');
      }
      const network = (await engine.call(`network '${req.params.name}'`, () =>
        engine.client.getNetwork(req.params.name).inspect(),
      )) as Docker.NetworkInspectInfo;
      const deployment = network.Labels?.[PROJECT_LABEL] ?? null;
      assertCanReach(req.principal, deployment, `network '${req.params.name}'`, 'write');
      const using = (await users()).get(network.Name) ?? [];
      if (using.length) throw inUse('network', network.Name, using, req.principal, 'NETWORK_IN_USE');
      await engine.call(`network '${req.params.name}'`, () => engine.client.getNetwork(network.Id).remove());
      return reply.ok({ name: network.Name, deployment }, `network ${network.Name} deleted`);
    },
  });
}
