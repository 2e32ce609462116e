/** 4.4 volumes and networks: list, create, delete (409 while in use). */
import { errors, reply, Type, type PluginContext, compareText } from '@agent/sdk';
import type Docker from 'dockerode';
import type { DockerEngine } from '../engine.js';
import { LabelMap, Network, Volume } from '../schemas.js';
import { assertCanSee, canSee } from '../access.js';
import { PROJECT_LABEL } from '../mapping.js';

const OBJECT_NAME = '^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$';
const BUILTIN_NETWORKS = new Set(['bridge', 'host', 'none']);

const containerName = (c: Docker.ContainerInfo) => (c.Names?.[0] ?? c.Id).replace(/^\//, '');

export function volumeRoutes(ctx: PluginContext<any>, engine: DockerEngine): void {
  const users = async () => {
    const raw = await engine.call('containers', () => engine.client.listContainers({ all: true }));
    const byVolume = new Map<string, string[]>();
    for (const c of raw) {
      for (const m of c.Mounts ?? []) {
        if (m.Type !== 'volume' || !m.Name) continue;
        byVolume.set(m.Name, [...(byVolume.get(m.Name) ?? []), containerName(c)]);
      }
    }
    return byVolume;
  };
  const view = (v: Docker.VolumeInspectInfo & { CreatedAt?: string }, byVolume: Map<string, string[]>) => {
    const containers = (byVolume.get(v.Name) ?? []).sort();
    return {
      name: v.Name, driver: v.Driver, mountpoint: v.Mountpoint, scope: v.Scope ?? 'local', created_at: v.CreatedAt ?? null,
      labels: v.Labels ?? {}, containers, in_use: containers.length > 0, deployment: v.Labels?.[PROJECT_LABEL] ?? null,
    };
  };

  ctx.route({
    method: 'GET', path: '/volumes', permission: 'volumes:read', operationId: 'volumes.list', tag: 'volumes',
    summary: 'List volumes',
    response: Type.Array(Volume),
    handler: async (req) => {
      const [list, byVolume] = await Promise.all([engine.call('volumes', () => engine.client.listVolumes()), users()]);
      return (list.Volumes ?? []).map((v) => view(v, byVolume)).filter((v) => canSee(req.principal, v.deployment)).sort((a, b) => compareText(a.name, b.name));
    },
  });

  ctx.route({
    method: 'POST', path: '/volumes', permission: 'volumes:write', operationId: 'volumes.create', tag: 'volumes', status: 201,
    summary: 'Create a volume',
    body: Type.Object({
      name: Type.String({ pattern: OBJECT_NAME }),
      driver: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9_.-]{0,63}$', default: 'local' })),
      labels: Type.Optional(LabelMap),
    }),
    response: Volume,
    handler: async (req) => {
      const existing = await engine.call('volumes', () => engine.client.listVolumes({ filters: JSON.stringify({ name: [req.body.name] }) } as Docker.VolumeListOptions));
      if ((existing.Volumes ?? []).some((v) => v.Name === req.body.name)) throw errors.conflict(`volume '${req.body.name}' already exists`, 'VOLUME_EXISTS');
      const labels = req.body.labels ?? {};
      assertCanSee(req.principal, labels[PROJECT_LABEL] ?? null, `deployment '${labels[PROJECT_LABEL]}'`, 'write');
      await engine.call(`volume '${req.body.name}'`, () => engine.client.createVolume({ Name: req.body.name, Driver: req.body.driver ?? 'local', Labels: labels }));
      const created = await engine.call(`volume '${req.body.name}'`, () => engine.client.getVolume(req.body.name).inspect());
      return reply.created(view(created, new Map()), `volume ${req.body.name} created`);
    },
  });

  ctx.route({
    method: 'DELETE', path: '/volumes/:name', permission: 'volumes:write', operationId: 'volumes.delete', tag: 'volumes',
    summary: 'Delete a volume',
    description: 'Refused with 409 `VOLUME_IN_USE` while a container (running or stopped) mounts it.',
    params: Type.Object({ name: Type.String({ pattern: OBJECT_NAME }) }),
    response: Type.Object({ name: Type.String(), deployment: Type.Union([Type.String(), Type.Null()]) }),
    handler: async (req) => {
      const volume = await engine.call(`volume '${req.params.name}'`, () => engine.client.getVolume(req.params.name).inspect());
      const deployment = volume.Labels?.[PROJECT_LABEL] ?? null;
      assertCanSee(req.principal, deployment, `volume '${req.params.name}'`, 'write');
      const using = (await users()).get(volume.Name) ?? [];
      if (using.length) throw errors.conflict(`volume '${volume.Name}' is used by ${using.join(', ')}`, 'VOLUME_IN_USE', { containers: using });
      await engine.call(`volume '${req.params.name}'`, () => engine.client.getVolume(volume.Name).remove());
      return reply.ok({ name: volume.Name, deployment }, `volume ${volume.Name} deleted`);
    },
  });
}

export function networkRoutes(ctx: PluginContext<any>, engine: DockerEngine): void {
  const users = async () => {
    const raw = await engine.call('containers', () => engine.client.listContainers({ all: true }));
    const byNetwork = new Map<string, string[]>();
    for (const c of raw) {
      for (const name of Object.keys(c.NetworkSettings?.Networks ?? {})) byNetwork.set(name, [...(byNetwork.get(name) ?? []), containerName(c)]);
    }
    return byNetwork;
  };
  const view = (n: Docker.NetworkInspectInfo, byNetwork: Map<string, string[]>) => {
    const containers = (byNetwork.get(n.Name) ?? []).sort();
    return {
      id: n.Id, name: n.Name, driver: n.Driver, scope: n.Scope, internal: n.Internal ?? false, created_at: n.Created ?? null,
      labels: n.Labels ?? {}, containers, in_use: containers.length > 0, deployment: n.Labels?.[PROJECT_LABEL] ?? null,
    };
  };

  ctx.route({
    method: 'GET', path: '/networks', permission: 'networks:read', operationId: 'networks.list', tag: 'networks',
    summary: 'List networks',
    response: Type.Array(Network),
    handler: async (req) => {
      const [list, byNetwork] = await Promise.all([engine.call('networks', () => engine.client.listNetworks()), users()]);
      return list.map((n) => view(n, byNetwork)).filter((n) => canSee(req.principal, n.deployment)).sort((a, b) => compareText(a.name, b.name));
    },
  });

  ctx.route({
    method: 'POST', path: '/networks', permission: 'networks:write', operationId: 'networks.create', tag: 'networks', status: 201,
    summary: 'Create a network',
    body: Type.Object({
      name: Type.String({ pattern: OBJECT_NAME }),
      driver: Type.Optional(Type.Union([Type.Literal('bridge'), Type.Literal('overlay'), Type.Literal('macvlan'), Type.Literal('ipvlan')], { default: 'bridge' })),
      internal: Type.Optional(Type.Boolean({ default: false, description: 'no route to the outside' })),
      labels: Type.Optional(LabelMap),
    }),
    response: Network,
    handler: async (req) => {
      if (BUILTIN_NETWORKS.has(req.body.name)) throw errors.conflict(`'${req.body.name}' is a built-in network`, 'NETWORK_EXISTS');
      const existing = await engine.call('networks', () => engine.client.listNetworks({ filters: JSON.stringify({ name: [req.body.name] }) } as Docker.NetworkListOptions));
      if (existing.some((n) => n.Name === req.body.name)) throw errors.conflict(`network '${req.body.name}' already exists`, 'NETWORK_EXISTS');
      const labels = req.body.labels ?? {};
      assertCanSee(req.principal, labels[PROJECT_LABEL] ?? null, `deployment '${labels[PROJECT_LABEL]}'`, 'write');
      const network = await engine.call(`network '${req.body.name}'`, () => engine.client.createNetwork({
        Name: req.body.name, Driver: req.body.driver ?? 'bridge', Internal: req.body.internal ?? false, Labels: labels, CheckDuplicate: true,
      }));
      const inspected = (await engine.call(`network '${req.body.name}'`, () => network.inspect())) as Docker.NetworkInspectInfo;
      return reply.created(view(inspected, new Map()), `network ${req.body.name} created`);
    },
  });

  ctx.route({
    method: 'DELETE', path: '/networks/:name', permission: 'networks:write', operationId: 'networks.delete', tag: 'networks',
    summary: 'Delete a network',
    description: 'Refused with 409 `NETWORK_IN_USE` while containers are attached, and `NETWORK_BUILTIN` for bridge/host/none.',
    params: Type.Object({ name: Type.String({ pattern: OBJECT_NAME }) }),
    response: Type.Object({ name: Type.String(), deployment: Type.Union([Type.String(), Type.Null()]) }),
    handler: async (req) => {
      if (BUILTIN_NETWORKS.has(req.params.name)) throw errors.conflict(`'${req.params.name}' is a built-in network and cannot be deleted`, 'NETWORK_BUILTIN');
      const network = (await engine.call(`network '${req.params.name}'`, () => engine.client.getNetwork(req.params.name).inspect())) as Docker.NetworkInspectInfo;
      const deployment = network.Labels?.[PROJECT_LABEL] ?? null;
      assertCanSee(req.principal, deployment, `network '${req.params.name}'`, 'write');
      const using = (await users()).get(network.Name) ?? [];
      if (using.length) throw errors.conflict(`network '${network.Name}' is used by ${using.join(', ')}`, 'NETWORK_IN_USE', { containers: using });
      await engine.call(`network '${req.params.name}'`, () => engine.client.getNetwork(network.Id).remove());
      return reply.ok({ name: network.Name, deployment }, `network ${network.Name} deleted`);
    },
  });
}
