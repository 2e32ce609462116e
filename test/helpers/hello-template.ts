/**
 * A template on the local test image for the tests of a template deploy (the API's and the CLI's): an httpd whose
 * page says GREETING, and a required PASSWORD.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const HELLO_COMPOSE = `services:
  web:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "mkdir -p /www && echo \\"$$GREETING\\" > /www/index.html && exec httpd -f -p 80 -h /www"]
    environment:
      GREETING: \${GREETING:-hello}
      PASSWORD: \${PASSWORD:?set PASSWORD}
    ports:
      - "127.0.0.1::80"
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

export const HELLO_TEMPLATE = {
  id: 'hello',
  name: 'Hello',
  description: 'a page that says hello',
  category: 'testing',
  env: [
    { key: 'GREETING', description: 'what the page says', default: 'hello' },
    { key: 'PASSWORD', description: 'a password nobody has', default: '', secret: true, required: true },
  ],
};

/** Writes the template as `hello` into a templates folder. */
export function writeHelloTemplate(templates: string): void {
  mkdirSync(join(templates, 'hello'), { recursive: true });
  writeFileSync(join(templates, 'hello', 'docker-compose.yml'), HELLO_COMPOSE);
  writeFileSync(join(templates, 'hello', 'template.json'), JSON.stringify(HELLO_TEMPLATE));
}
