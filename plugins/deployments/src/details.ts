/** What `GET /deployments/:name` answers: the deployment, its files (secrets redacted), containers, ports and host safety. */
import type { Static } from '@agent/sdk';
import type { DeploymentManager } from './manager.js';
import type { Entry } from './records.js';
import type { DeploymentDetails } from './schemas.js';
import { ENV_FILE, readFolderFile } from './files.js';
import { parseEnv, redactEnv } from './env-file.js';

export async function deploymentDetails(manager: DeploymentManager, entry: Entry): Promise<Static<typeof DeploymentDetails>> {
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
    pins: entry.record.pins ?? {},
    host_safety: {
      policy: manager.opts.hostSafety() ? ('enforced' as const) : ('off' as const),
      exceptions: entry.record.exceptions,
      used: [...(last?.granted ?? [])],
    },
    file_problems: problems,
  };
}
