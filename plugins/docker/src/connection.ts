/** Where the engine is: `docker.host` config, else DOCKER_HOST, else the default unix socket. */
import Docker from 'dockerode';

export interface EndpointInfo {
  /** What compose should get as DOCKER_HOST (null: leave it unset, the default socket). */
  dockerHost: string | null;
  /** Human description for logs. */
  describe: string;
}

export function connect(configured: string): { docker: Docker; endpoint: EndpointInfo } {
  const host = configured || process.env.DOCKER_HOST || '';
  if (!host) {
    return { docker: new Docker({ socketPath: '/var/run/docker.sock' }), endpoint: { dockerHost: null, describe: 'unix:///var/run/docker.sock' } };
  }
  if (host.startsWith('unix://') || host.startsWith('/')) {
    const socketPath = host.startsWith('unix://') ? host.slice('unix://'.length) : host;
    return { docker: new Docker({ socketPath }), endpoint: { dockerHost: `unix://${socketPath}`, describe: `unix://${socketPath}` } };
  }
  const m = /^(?:tcp|http):\/\/([^:/]+|\[[0-9a-fA-F:]+\]):(\d{1,5})\/?$/.exec(host);
  if (!m) throw new Error(`docker host '${host}' is neither unix://<socket> nor tcp://<host>:<port>`);
  return {
    docker: new Docker({ host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]), protocol: 'http' }),
    endpoint: { dockerHost: `tcp://${m[1]}:${m[2]}`, describe: host },
  };
}
