/** Test deployments: a busybox httpd with a CGI script that prints the request's environment. */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { TestAgent } from '../../../../test/helpers/agent.js';

export const STUB_DEPLOYMENTS = join(import.meta.dirname, '..', 'fixtures', 'stub-deployments');

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
  if (res.status !== 201 && res.status !== 202) throw new Error(`create deployment ${name}: ${res.status} ${res.text}`);
}
