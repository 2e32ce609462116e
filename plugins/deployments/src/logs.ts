/** Reading deployment logs: container output merged across services by time, or a file source from its end. */
import { errors, compareText } from '@agent/sdk';
import { type ContainerSummary, type DockerService, type LogLine } from '@agent/plugin-docker/api';

export interface DeploymentLogLine {
  service: string | null;
  container: string | null;
  stream: 'stdout' | 'stderr' | 'file';
  time: string | null;
  text: string;
}

/** RFC 3339 with a fraction of varying length → a key that sorts in time order. */
export const timeKey = (time: string | null): string => {
  if (!time) return '';
  const m = /^(.*?)(?:\.(\d+))?Z$/.exec(time);
  return m ? `${m[1]}.${(m[2] ?? '').padEnd(9, '0')}` : time;
};

export function pickContainers(containers: ContainerSummary[], service: string | undefined, running = false): ContainerSummary[] {
  const list = containers.filter((c) => (!service || c.service === service) && (!running || c.state === 'running'));
  return list.sort((a, b) => compareText(a.service ?? '', b.service ?? ''));
}

/** The last `keep` (0 = all) lines of `tail` read lines that contain `filter`. */
async function collect(docker: DockerService, c: ContainerSummary, tail: number, keep: number, filter?: string): Promise<DeploymentLogLine[]> {
  const out: DeploymentLogLine[] = [];
  for await (const line of docker.containerLogs(c.id, { tail, timestamps: true }) as AsyncIterable<LogLine>) {
    if (filter && !line.text.includes(filter)) continue;
    out.push({ service: c.service, container: c.name, stream: line.stream, time: line.time, text: line.text });
    if (keep > 0 && out.length > keep * 2) out.splice(0, out.length - keep);
  }
  return keep > 0 && out.length > keep ? out.slice(-keep) : out;
}

/**
 * The last `tail` lines (0 = all) of the containers' output. With a filter, the engine cannot filter for us: read
 * 20× the tail first, then everything only if that did not find enough matching lines.
 */
export async function containerLogs(docker: DockerService, containers: ContainerSummary[], tail: number, filter?: string): Promise<DeploymentLogLine[]> {
  const readAll = async (perContainer: number) => (await Promise.all(containers.map((c) => collect(docker, c, perContainer, tail, filter)))).flat();
  let lines: DeploymentLogLine[];
  if (filter && tail > 0) {
    lines = await readAll(tail * 20);
    if (lines.length < tail) lines = await readAll(0);
  } else lines = await readAll(tail);
  if (containers.length > 1) lines.sort((a, b) => (timeKey(a.time) < timeKey(b.time) ? -1 : timeKey(a.time) > timeKey(b.time) ? 1 : 0));
  return tail > 0 && lines.length > tail ? lines.slice(-tail) : lines;
}

export function assertService(services: string[], containers: ContainerSummary[], service: string | undefined): void {
  if (service && !services.includes(service) && !containers.some((c) => c.service === service)) {
    throw errors.notFound(`service '${service}' not found in this deployment`);
  }
}

/** Picks a deployment's containers for logs and stats: `(entry, service, running)`. */
export type ContainersOf = (entry: { name: string; services: string[] }, service: string | undefined, running: boolean) => Promise<ContainerSummary[]>;

/**
 * The containers of a deployment, from the engine (not the cache: a follower must find the container that just
 * started). Followers joining at once (a console reopened by many people, a reconnect storm) share one engine
 * listing: a caller that arrives while one is in flight takes its answer instead of asking the engine again.
 */
export function containersOf(docker: DockerService): ContainersOf {
  const listings = new Map<string, Promise<ContainerSummary[]>>();
  const listContainers = (deployment: string): Promise<ContainerSummary[]> => {
    let listing = listings.get(deployment);
    if (!listing) {
      listing = docker.listContainers({ all: true, deployment }).finally(() => listings.delete(deployment));
      listings.set(deployment, listing);
    }
    return listing;
  };
  return async (entry, service, running) => {
    docker.assertAvailable();
    const all = await listContainers(entry.name);
    assertService(entry.services, all, service);
    return pickContainers(all, service, running);
  };
}
