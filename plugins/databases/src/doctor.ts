/**
 * Doctor check of the database drivers: the client libraries (pg for PostgreSQL, mysql2 for MySQL and MariaDB)
 * are loaded on first use, so a broken install would only show at the first request; this loads them now.
 */
import { createRequire } from 'node:module';
import type { CheckResult, DoctorCheck } from '@agent/sdk';

const DRIVERS = [
  { name: 'pg', serves: 'PostgreSQL', load: () => import('pg') },
  { name: 'mysql2', serves: 'MySQL/MariaDB', load: () => import('mysql2/promise') },
];

function versionOf(name: string): string {
  try {
    return (createRequire(import.meta.url)(`${name}/package.json`) as { version: string }).version;
  } catch {
    return 'version unknown';
  }
}

export function databaseChecks(): DoctorCheck[] {
  return [
    {
      id: 'databases.drivers',
      title: 'Database drivers',
      run: async (): Promise<CheckResult> => {
        const loaded: string[] = [];
        const broken: string[] = [];
        for (const driver of DRIVERS) {
          try {
            await driver.load();
            loaded.push(`${driver.name} ${versionOf(driver.name)} (${driver.serves})`);
          } catch (err) {
            broken.push(`${driver.name} (${driver.serves}): ${(err as Error).message.split('\n')[0]}`);
          }
        }
        if (broken.length)
          return {
            status: 'failed',
            detail: `cannot load ${broken.join('; ')}`,
            fix: "reinstall the dependencies: npm ci (in the agent's folder), then restart the agent",
          };
        return { status: 'ok', detail: loaded.join(', ') };
      },
    },
  ];
}
