/** Test deployments: a busybox httpd with a CGI script that prints the request's environment. */
import { randomBytes } from 'node:crypto';
import type { TestAgent } from '../../../../test/helpers/agent.js';

/** The plugins every edge test runs: the real docker and deployments plugins provide the services. */
export const EDGE_PLUGINS = ['docker', 'deployments', 'edge'];
/** The same with the security plugin, whose rules the edge renders and whose events come from its traffic. */
export const SECURITY_PLUGINS = [...EDGE_PLUGINS, 'security'];

export const uniqueName = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

/** Compose file of a web service: `/` serves index.html, `/cgi-bin/env` echoes the CGI environment. */
export const webCompose = (service = 'web') => `services:
  ${service}:
    image: agent-test/busybox:latest
    labels:
      agent.test: "1"
    # httpd as PID 1 ignores SIGTERM: stop at once instead of after the 10 s grace period.
    stop_signal: SIGKILL
    command:
      - sh
      - -c
      - |
        mkdir -p /www/cgi-bin /www/sub
        printf '#!/bin/sh\\necho "Content-Type: text/plain"\\necho\\nenv\\n' > /www/cgi-bin/env
        chmod +x /www/cgi-bin/env
        echo "sub page" > /www/sub/index.html
        exec httpd -f -p 80 -h /www
`;

export async function createDeployment(agent: TestAgent, name: string, compose = webCompose()): Promise<void> {
  const res = await agent.api('POST', '/deployments', { body: { name, compose_content: compose, auto_start: true } });
  if (res.status !== 201 || res.body.data.start_error) throw new Error(`create deployment ${name}: ${res.status} ${res.text}`);
}
