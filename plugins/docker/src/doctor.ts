/**
 * Doctor checks of the Docker engine (answers, version, API version) and of compose (which flavour, which version).
 * Compose is asked directly (`<compose> version --short`) rather than through the engine's cached detection, so a
 * compose installed since the start shows up here, with the advice to restart.
 */
import { execa } from 'execa';
import type { CheckResult, DoctorCheck } from '@agent/sdk';
import { COMPOSE_FIX, ENGINE_FIX, type DockerEngine } from './engine.js';

/** Oldest engine API the agent is tested with: one-shot stats (observability) need 1.41, Docker 20.10. */
const MIN_API_VERSION = '1.41';

const apiAtLeast = (version: string, min: string) => {
  const [a = 0, b = 0] = version.split('.').map(Number);
  const [c = 0, d = 0] = min.split('.').map(Number);
  return a > c || (a === c && b >= d);
};

export type ComposeChoice = 'auto' | 'docker compose' | 'docker-compose';

async function composeVersion(argv: string[], signal: AbortSignal): Promise<string | null> {
  const r = await execa(argv[0]!, [...argv.slice(1), 'version', '--short'], { reject: false, all: true, timeout: 15_000, cancelSignal: signal });
  return r.exitCode === 0 ? (r.all ?? '').trim().split('\n')[0]! : null;
}

export function dockerChecks(engine: DockerEngine, compose: ComposeChoice): DoctorCheck[] {
  return [
    {
      id: 'docker.engine',
      title: 'Docker engine and API version',
      run: async (): Promise<CheckResult> => {
        if (!(await engine.check())) return { status: 'failed', detail: `no engine answers at ${engine.endpoint}`, fix: ENGINE_FIX };
        const info = await engine.info();
        const detail = `Docker ${info.version}, API ${info.api_version} at ${engine.endpoint}`;
        if (!apiAtLeast(info.api_version, MIN_API_VERSION)) {
          return {
            status: 'warning',
            detail: `${detail}: older than API ${MIN_API_VERSION} (container metrics need it)`,
            fix: 'upgrade the engine to Docker 20.10 or newer',
          };
        }
        return { status: 'ok', detail };
      },
    },
    {
      id: 'docker.compose',
      title: 'Docker Compose',
      run: async (signal): Promise<CheckResult> => {
        const candidates: [string, string[]][] = [
          ['compose v2 (docker compose)', ['docker', 'compose']],
          ['compose v1 (docker-compose)', ['docker-compose']],
        ];
        const wanted = compose === 'auto' ? candidates : candidates.filter(([, argv]) => argv.join(' ') === compose);
        for (const [flavour, argv] of wanted) {
          const version = await composeVersion(argv, signal);
          if (version) return { status: 'ok', detail: `${flavour} ${version}` };
        }
        return {
          status: 'failed',
          detail: compose === 'auto' ? 'neither `docker compose` nor `docker-compose` works' : `\`${compose}\` (docker.compose) does not work`,
          fix: COMPOSE_FIX,
        };
      },
    },
  ];
}
