/** Backup and restore of a deployment with a MariaDB service (image built locally from the host's binaries). */
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { cleanupDocker, serviceContainer, treeHashes, uniqueName, until, waitJob } from './helpers/env.js';
import { ensureMariadbImage } from './helpers/mariadb-image.js';

const app = uniqueName('maria');
let agent: TestAgent;
let folder: string;

const sql = (query: string) =>
  execFileSync('docker', ['exec', '-e', 'MYSQL_PWD=Maria-Root-1', serviceContainer(app, 'db'), 'mariadb', '-u', 'root', '-N', '-B', 'shop', '-e', query], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();

beforeAll(async () => {
  const image = ensureMariadbImage();
  agent = await startAgent({ plugins: ['docker', 'deployments', 'backups'] });
  const compose = `services:\n  db:\n    image: ${image}\n    environment:\n      MARIADB_ROOT_PASSWORD: \${ROOT_PW}\n      MARIADB_DATABASE: shop\n    volumes:\n      - data:/var/lib/mysql\n    labels:\n      agent.test: "1"\nvolumes:\n  data: {}\n`;
  const res = await agent.api('POST', '/deployments', {
    body: { name: app, compose_content: compose, env_vars: [{ key: 'ROOT_PW', value: 'Maria-Root-1' }], auto_start: true },
  });
  expect(res.status, res.text).toBe(201);
  folder = res.body.data.path;
  writeFileSync(join(folder, 'config.ini'), '[shop]\ncurrency=EUR\n');
  await until(
    async () => {
      try {
        return sql('SELECT 1') === '1';
      } catch {
        return false;
      }
    },
    (ok) => ok,
    90_000,
    500,
  );
  sql('CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(10,2)); INSERT INTO orders SELECT seq, seq * 1.5 FROM seq_1_to_500;');
}, 240_000);

afterAll(async () => {
  await agent?.stop();
  cleanupDocker();
});

describe('MariaDB deployments', () => {
  it('backs up with mariadb-dump inside the container and restores the rows', async () => {
    const before = treeHashes(folder, (r) => r === '.agent.json');
    const res = await agent.api('POST', '/backups', { body: { deployment_name: app } });
    expect(res.status, res.text).toBe(202);
    const job = await waitJob(agent, res.body.data.job_id);
    expect(job.status, job.error).toBe('completed');
    const backup = (await agent.api('GET', `/backups/${job.result.backup_id}`)).body.data;
    expect(backup.components.find((c: any) => c.type === 'database')).toMatchObject({ service: 'db', engine: 'mysql', databases: ['shop'] });

    sql('DELETE FROM orders WHERE id > 3');
    rmSync(join(folder, 'config.ini'));
    const restore = await agent.api('POST', `/backups/${backup.id}/restore`, { body: {} });
    expect(restore.status, restore.text).toBe(202);
    const done = await waitJob(agent, restore.body.data.job_id, 180_000);
    expect(done.status, done.error).toBe('completed');
    expect(treeHashes(folder, (r) => r === '.agent.json')).toEqual(before);
    await until(
      async () => {
        try {
          return sql('SELECT COUNT(*), SUM(total) FROM orders');
        } catch {
          return '';
        }
      },
      (v) => v === '500\t187875.00',
      90_000,
      500,
    );
  });
});
